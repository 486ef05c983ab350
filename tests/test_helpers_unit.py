"""The suite's own helpers, where they decide what a test run means: a machine that cannot
throttle a disk skips the slow-storage tests with the reason, it does not fail them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import pytest

import slowdisk
from pg_aio_exporter.demo.server import LocalServer

pytestmark = pytest.mark.unit


def test_a_machine_without_the_blkio_controller_skips_slow_storage_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel with cgroup v2 only: no /sys/fs/cgroup/blkio.
    monkeypatch.setattr(slowdisk, "BLKIO", tmp_path / "blkio")
    wanted = "root" if os.geteuid() != 0 else "cgroup v1 blkio controller"
    with pytest.raises(pytest.skip.Exception, match=wanted):
        slowdisk.ThrottledDisk(cast(LocalServer, None), 16)  # refused before the server is used

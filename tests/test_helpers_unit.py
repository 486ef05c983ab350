"""The suite's own helpers, where they decide what a test run means: a machine that cannot
throttle a disk skips the slow-storage tests with the reason, it does not fail them; pgbench's
verdict "faster" from alternating runs is that of most pairs, whatever the machine's load did
between them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

import slowdisk
from pg_aio_exporter.demo.server import LocalServer
from pgbench_judge import faster_by_alternating_runs, parse_pgbench

pytestmark = pytest.mark.unit


def test_a_machine_without_the_blkio_controller_skips_slow_storage_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel with cgroup v2 only: no /sys/fs/cgroup/blkio.
    monkeypatch.setattr(slowdisk, "BLKIO", tmp_path / "blkio")
    wanted = "root" if os.geteuid() != 0 else "cgroup v1 blkio controller"
    with pytest.raises(pytest.skip.Exception, match=wanted):
        slowdisk.ThrottledDisk(cast(LocalServer, None), 16)  # refused before the server is used


def rates(values: list[float]) -> Callable[[], float]:
    """A run's rate, each call the next of `values`."""
    left: Iterator[float] = iter(values)
    return lambda: next(left)


def test_faster_by_alternating_runs_is_most_pairs_verdict_whatever_the_load_did() -> None:
    # Runs in order: base 100, candidate 140, base 60, ...: the machine slower from the second
    # pair on, and the third pair's candidate run caught by a swing within it. Each other pair
    # says 1.4x; summed per side 1.10x, the median per side 84 / 80 = 1.05x.
    faster, runs = faster_by_alternating_runs(rates([100, 60, 80]), rates([140, 84, 40]), 3)
    assert runs == [100, 140, 60, 84, 80, 40]
    assert faster == pytest.approx(1.4)
    # Two pairs: their mean.
    faster, _ = faster_by_alternating_runs(rates([100, 50]), rates([140, 80]), 2)
    assert faster == pytest.approx(1.5)


def test_parse_pgbench_reads_the_summary() -> None:
    out = "number of failed transactions: 0 (0.000%)\nlatency average = 12.5 ms\n"
    run = parse_pgbench(out + "initial connection time = 3.1 ms\ntps = 318.2 (without initial)\n")
    assert (run.tps, run.latency_ms) == (318.2, 12.5)
    with pytest.raises(AssertionError, match="latency average"):
        parse_pgbench("pgbench: error: connection refused\nlatency average = 1 ms\n")

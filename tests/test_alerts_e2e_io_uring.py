"""End to end with io_method=io_uring: the session's io_uring server (conftest.uring), whose
tables sit on a disk throttled below the system call (slowdisk.py: io_uring never calls the
libc read that the shim slows), the exporter, and a real Prometheus with the shipped rules in
short windows (alertstack.py).

With fast storage no alert may even be pending; once the disk is throttled the latency and
storage alerts must fire and the io worker pool alert must not (io_uring runs no io workers:
no utilisation exists to alert on); once it is fast again they must resolve."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from alertstack import STORAGE_ALERTS, Stack, alert_stack, follow_storage, short_rules
from conftest import Uring

pytestmark = pytest.mark.integration

SLOW_BPS = 8 << 20


@pytest.fixture(scope="module")
def stack(uring: Uring, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with alert_stack(uring.server, short_rules(tmp_path_factory.mktemp("rules"))) as stack:
        yield stack


def test_alerts_follow_throttled_storage_under_io_uring(uring: Uring, stack: Stack) -> None:
    assert uring.io_method() == "io_uring"
    run = follow_storage(
        stack,
        slow=lambda: uring.disk.set_limit(read_bps=SLOW_BPS),
        fast=uring.disk.set_limit,
        expected=STORAGE_ALERTS,
    )
    assert uring.io_method() == "io_uring"
    fast, slow = run.measured["fast"], run.measured["slow"]
    assert fast["ms_per_read"] is not None and slow["ms_per_read"] is not None
    assert slow["ms_per_read"] > 10 * fast["ms_per_read"]
    assert slow["io_worker_utilization"] is None, "no io workers under io_uring"
    assert slow["sessions_waiting_on_io"] is not None and slow["sessions_waiting_on_io"] > 2

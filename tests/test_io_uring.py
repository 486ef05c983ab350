"""io_method=io_uring on a real PostgreSQL 18 built with liburing (the session's `uring` server,
its tables on a disk that can be slowed below the system call).

The same checks as on every other server (counters equal pg_stat_io, per-interval gauges equal
the test's own math), then what only io_uring shows: its wait events, pg_aios in flight, the
io_method state set, and no io worker metrics. Every test first asserts that the server really
runs io_uring, so none can pass on a server that silently fell back to another io_method.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from conftest import URING_SCAN_TABLES, Uring
from harness import (
    Exporter,
    Samples,
    client_wait,
    in_flight,
    labels,
    observer,
    scanning,
    wait_for,
)
from iocheck import BULKREAD, check_counters_under_load, check_one_interval, series_key
from pg_aio_exporter.demo.workload import TABLE

POLL = 3.0
T = labels(target="default")
SLOW_BPS = 8 << 20  # the throttled disk's read bandwidth while slow


@pytest.fixture(scope="module")
def exporter(uring: Uring) -> Iterator[Exporter]:
    exp = Exporter(
        "--dsn", uring.server.dsn(), "--poll-interval", f"{POLL}s", "--sample-interval", "100ms"
    )
    yield exp
    exp.stop()


@pytest.fixture(scope="module")
def obs(uring: Uring) -> Iterator[psycopg.Connection[Any]]:
    conn = observer(uring.server.dsn())
    yield conn
    conn.close()


def test_counters_equal_pg_stat_io(
    uring: Uring, exporter: Exporter, obs: psycopg.Connection
) -> None:
    assert uring.io_method() == "io_uring"
    check_counters_under_load(uring.server.dsn(), exporter, obs)


def test_interval_gauges_and_combined_reads(
    uring: Uring, exporter: Exporter, obs: psycopg.Connection
) -> None:
    assert uring.io_method() == "io_uring"
    scraped = check_one_interval(uring.server.dsn(), exporter, obs, POLL)
    assert scraped["pg_aio_read_size_bytes"][series_key(BULKREAD)] > 8192


def test_io_method_says_io_uring_and_io_worker_metrics_are_absent(
    uring: Uring, exporter: Exporter
) -> None:
    assert uring.io_method() == "io_uring"
    scraped = exporter.wait_poll()
    assert scraped["pg_aio_io_method"] == {
        labels(target="default", io_method=method): float(method == "io_uring")
        for method in ("sync", "worker", "io_uring")
    }
    assert scraped["pg_aio_sampler_samples_total"][T] > 10, "the sampler ran"
    assert scraped["pg_settings_io_workers"][T] == 3, "the setting exists, unused"
    no_workers = [name for name in scraped if name.startswith("pg_aio_io_worker")]
    assert no_workers == [], "io_uring starts no io workers: their metrics are absent, not 0"


def test_sampler_classifies_io_uring_waits(uring: Uring, exporter: Exporter) -> None:
    """Cached data: reads complete while being submitted (AioIoUringSubmit). Slow storage:
    sessions wait in the kernel for their own reads (AioIoUringExecution), and for another
    session's ring when they need a block it is reading (LWLock/AioUringCompletion: two scans
    of one table synchronize), with readv handles in flight."""
    assert uring.io_method() == "io_uring"
    dsn = uring.server.dsn()
    with scanning(dsn, URING_SCAN_TABLES, release=uring.disk.set_limit):
        start = exporter.scrape()
        wait_for(
            lambda: (
                client_wait(exporter.scrape(), "IO", "AioIoUringSubmit")
                > client_wait(start, "IO", "AioIoUringSubmit")
            ),
            30,
            "sessions submitting cached reads",
            every=0.5,
        )
        uring.disk.set_limit(read_bps=SLOW_BPS)
        fast = exporter.scrape()
        seen: dict[str, float] = {}

        def slow_waits_seen() -> Samples | None:
            now = exporter.scrape()
            for wait_type, wait in (
                ("IO", "AioIoUringExecution"),
                ("LWLock", "AioUringCompletion"),
            ):
                seen[wait] = client_wait(now, wait_type, wait) - client_wait(fast, wait_type, wait)
            return (
                now if seen["AioIoUringExecution"] > 50 and seen["AioUringCompletion"] > 0 else None
            )

        # Two scans of one table, started together once storage is slow: the second begins
        # where the first is (synchronize_seqscans) and from then on needs blocks the first is
        # reading. Started earlier, on fast storage, they drift apart and may never meet again.
        with scanning(dsn, (TABLE, TABLE), together=True, release=uring.disk.set_limit):
            try:
                wait_for(slow_waits_seen, 60, "io_uring waits on slow storage", every=0.5)
            except AssertionError as timeout:
                raise AssertionError(f"{timeout}; samples since slowed: {seen}") from None
            # A poll whose whole interval (pg_aio_in_flight_max's window) was on slow storage.
            slow = exporter.wait_poll(after=time.time() + POLL)
    # On slow storage sessions wait for the kernel, not for a submission.
    execution = client_wait(slow, "IO", "AioIoUringExecution") - client_wait(
        fast, "IO", "AioIoUringExecution"
    )
    submit = client_wait(slow, "IO", "AioIoUringSubmit") - client_wait(
        fast, "IO", "AioIoUringSubmit"
    )
    assert submit < 0.2 * execution, (submit, execution)
    assert in_flight(slow, "readv") > in_flight(fast, "readv")
    assert slow["pg_aio_in_flight_max"][labels(target="default", operation="readv")] >= 1
    assert not [name for name in slow if name.startswith("pg_aio_io_worker")]

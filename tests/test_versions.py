"""One exporter for PostgreSQL 16, 17, 18 and 19: the same checks on a real server of each.

Counters equal pg_stat_io, per-interval gauges equal the test's own math, AIO-only metrics are
absent (not zero) before 18, the io worker pool's settings are 18's or 19's, and the wait-event
sampler works everywhere. 19 is Debian's build (pgbins.debian_release: fetched once from the
archive); its cases are skipped, with the archive's answer as the reason, only when the archive
has no 19.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from harness import Exporter, labels, observer
from iocheck import BULKREAD, check_counters_under_load, check_one_interval, series_key
from pg_aio_exporter import thresholds, vocabulary
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.worker import TargetWorker
from pg_aio_exporter.report import runner
from pg_aio_exporter.report.findings import writes
from pgbins import DEBIAN_MAJOR, bin_dir, debian_release
from slowwrite import SlowWrites

POLL = 3.0
T = labels(target="default")
BULK = series_key(BULKREAD)
NORMAL = series_key(("client backend", "relation", "normal"))
# The IO wait of a session waiting for its WAL flush, as PostgreSQL's documentation of each
# version names it (monitoring.sgml, "Wait Events of Type IO"): 17 renamed 16's WALSync.
WAL_SYNC = {"16": "WALSync", "17": "WalSync", "18": "WalSync", "19": "WalSync"}
AIO_ONLY = (
    "pg_aio_io_method",
    "pg_settings_io_max_concurrency",
    "pg_settings_io_max_combine_limit_bytes",
    "pg_aio_io_workers",
    "pg_aio_io_worker_busy_samples_total",
    "pg_aio_io_worker_samples_total",
    "pg_aio_io_worker_utilization_ratio",
    "pg_aio_in_flight_samples_total",
    "pg_aio_in_flight_bytes_samples_total",
    "pg_aio_in_flight_max",
)
# The io worker pool's settings: a fixed size on 18, bounds of a pool that sizes itself on 19.
POOL_SETTINGS = {
    "18": ("pg_settings_io_workers",),
    "19": (
        "pg_settings_io_min_workers",
        "pg_settings_io_max_workers",
        "pg_settings_io_worker_idle_timeout_seconds",
        "pg_settings_io_worker_launch_interval_seconds",
    ),
}


class Stack:
    def __init__(self, major: str) -> None:
        self.major = major
        self.server = LocalServer.create(
            bin_dir(major), settings={"shared_buffers": "16MB", "track_io_timing": "on"}
        )
        self.slow = SlowWrites(self.server)  # no delay until a test sets one
        self.server.start()
        create_table(self.server.dsn(), 32)
        self.obs = observer(self.server.dsn())
        self.started = time.time()
        self.exporter = Exporter(
            "--dsn", self.server.dsn(), "--poll-interval", f"{POLL}s", "--sample-interval", "200ms"
        )

    def close(self) -> None:
        self.exporter.stop()
        self.obs.close()
        self.server.destroy()


@pytest.fixture(scope="module", params=["16", "17", "18", "19"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    if request.param == DEBIAN_MAJOR and (why := debian_release(DEBIAN_MAJOR)) is not None:
        pytest.skip(f"PostgreSQL {DEBIAN_MAJOR} not run: {why}")
    stack = Stack(request.param)
    yield stack
    stack.close()


def test_counters_equal_pg_stat_io(stack: Stack) -> None:
    check_counters_under_load(stack.server.dsn(), stack.exporter, stack.obs)


def test_interval_gauges_and_read_size(stack: Stack) -> None:
    scraped = check_one_interval(stack.server.dsn(), stack.exporter, stack.obs, POLL)
    size = scraped["pg_aio_read_size_bytes"]
    if int(stack.major) >= 18:
        # I/O combining: one read operation covers several blocks of a sequential scan, so
        # read_time/reads rises after an upgrade with no change in storage.
        assert size[BULK] > 8192
    else:
        assert size[BULK] == 8192 and size[NORMAL] == 8192  # one block per read operation


def test_aio_metrics_only_where_aio_exists(stack: Stack) -> None:
    # Any poll after a whole poll window (the gauges need one): after the tests before it, the
    # last one, without waiting for another.
    scraped = stack.exporter.wait_poll(after=stack.started + POLL)
    version = next(iter(scraped["pg_server_info"]))
    assert dict(version)["version"].startswith(stack.major)
    assert scraped["pg_up"][T] == 1
    assert scraped["pg_settings_effective_io_concurrency"][T] > 0
    assert scraped["pg_settings_maintenance_io_concurrency"][T] > 0
    assert ("pg_settings_io_combine_limit_bytes" in scraped) == (stack.major != "16")
    if int(stack.major) >= 18:
        assert scraped["pg_aio_supported"][T] == 1
        for name in AIO_ONLY:
            if name not in ("pg_aio_in_flight_samples_total",):  # only when something in flight
                assert name in scraped, name
        for major, names in POOL_SETTINGS.items():
            for name in names:
                assert (name in scraped) == (major == stack.major), name
    else:
        assert scraped["pg_aio_supported"][T] == 0
        for name in (*AIO_ONLY, *(n for names in POOL_SETTINGS.values() for n in names)):
            assert name not in scraped, f"{name} must be absent on {stack.major}"
    assert "pg_aio_exporter_poll_errors_total" not in scraped or not any(
        scraped["pg_aio_exporter_poll_errors_total"].values()
    )


class PollReads:
    """A tap (poll/worker.py Tap): the collectors each poll of a worker read."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def polled(self, collector: str, snapshot: object | None, read_at: float) -> None:
        self.read.append(collector)

    def sampled(self, samples: int, totals: dict[str, Any], answered: list[str]) -> None:
        pass

    def failed(self, collector: str, kind: str, message: str) -> None:
        pass

    def round_trip(self, transactions: int, ended: float, seconds: float) -> None:
        pass


async def polls_reading_wait_events(stack: Stack) -> list[bool]:
    """Whether each of four polls of the report's worker read pg_wait_events: two on one
    connection, one that finds its backend terminated, one on the new connection."""
    tap = PollReads()
    worker = TargetWorker(
        target_from_dsn(stack.server.dsn(application_name="versions-once"), name="once"),
        None,
        SelfMetrics(),
        poll_interval=60,
        sample_interval=0,
        timeout=5,
        tap=tap,
        logger=runner.QUIET,
        poll_collectors=registry.report_collectors(),
    )
    reads = []
    for number in range(4):
        if number == 2:
            stack.obs.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'versions-once'"
            )
        tap.read.clear()
        await worker.poll()
        reads.append("pg_wait_events" in tap.read)
    return reads


def sample_waits(dsn: str, stop: threading.Event, seen: Counter[tuple[str, str]]) -> None:
    """The test's own look at pgbench's sessions in pg_stat_activity, every 10 ms."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            for wait_type, wait in conn.execute(
                "SELECT wait_event_type, wait_event FROM pg_stat_activity"
                " WHERE application_name = 'pgbench' AND wait_event IS NOT NULL"
            ):
                seen[(wait_type, wait)] += 1
            time.sleep(0.01)


def test_write_waits_count_by_the_names_the_server_reports(stack: Stack) -> None:
    """Real WAL sync waits (commits under 100 ms fsyncs): the report counts them by the names
    the server reports in pg_stat_activity (16: IO/WALSync, 17+: IO/WalSync), which it takes
    from pg_wait_events where the server has one (read once per connection), else by version,
    and never by the other version's name."""
    dsn = stack.server.dsn()
    shipped = thresholds.load().writes
    assert shipped is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        has_view = conn.execute("SELECT to_regclass('pg_wait_events') IS NOT NULL").fetchone()
        assert has_view is not None and has_view[0] == (stack.major != "16")
        server = set(conn.execute("SELECT type, name FROM pg_wait_events")) if has_view[0] else None
        conn.execute("CREATE TABLE IF NOT EXISTS commits (n int)")
        conn.execute("ALTER SYSTEM SET fsync = on")  # the suite's servers run with fsync off
        conn.execute("SELECT pg_reload_conf()")
    script = stack.server.root / "commit.sql"
    script.write_text("INSERT INTO commits VALUES (1);\n")
    stack.slow.set_delay(sync_us=100_000)
    seen: Counter[tuple[str, str]] = Counter()
    stop = threading.Event()
    judge = threading.Thread(target=sample_waits, args=(dsn, stop, seen))
    bench = subprocess.Popen(
        [str(bin_dir("18") / "pgbench"), "-n", "-c", "2", "-T", "60", "-f", str(script), dsn],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        judge.start()
        summary = asyncio.run(
            runner.measure(
                target_from_dsn(dsn, name="waits"), duration=0.5, sample_interval=0.05, timeout=5
            )
        )
    finally:
        stop.set()
        judge.join()
        bench.terminate()
        bench.wait(30)
        stack.slow.set_delay(sync_us=0)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET fsync")
            conn.execute("SELECT pg_reload_conf()")
    # One session syncs the WAL, the other queues for the lock behind it (group commit).
    own, queue = ("IO", WAL_SYNC[stack.major]), ("LWLock", "WALWrite")
    assert seen[own] > 0 and seen[queue] > 0, f"pg_stat_activity under slow fsyncs: {seen}"
    counted = writes.write_wait_sessions(summary.activity, shipped)
    assert counted.get("/".join(own), 0) > 0 and counted.get("/".join(queue), 0) > 0, counted
    # The names the report counts on this server: its own spelling of the WAL sync, never the
    # other version's.
    named = summary.activity.wait_events.named(shipped.wal_sync_events, "IO")
    assert named & {("IO", name) for name in WAL_SYNC.values()} == {own}, sorted(named)
    if server is None:
        return
    # 17+: the server's own catalogue, and the package's by-version table (for saved reports)
    # agrees with it.
    assert summary.activity.wait_events.events == server
    assert vocabulary.wait_events(summary.server.version_num) <= server
    assert asyncio.run(polls_reading_wait_events(stack)) == [True, False, False, True]


def test_postgresql_15_without_pg_stat_io() -> None:
    server = LocalServer.create(bin_dir("15"))
    server.start()
    exp = Exporter("--dsn", server.dsn(), "--poll-interval", "1s", "--sample-interval", "100ms")
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("SELECT pg_sleep(1.5)")  # a working session for the sampler to see
        scraped = exp.wait_poll()
        assert scraped["pg_up"][T] == 1
        assert scraped["pg_aio_supported"][T] == 0
        assert dict(next(iter(scraped["pg_server_info"])))["version"].startswith("15")
        assert scraped["pg_settings_effective_io_concurrency"][T] > 0
        assert scraped["pg_aio_sampler_samples_total"][T] > 0
        sleeping = labels(
            target="default",
            backend_type="client backend",
            wait_event_type="Timeout",
            wait_event="PgSleep",
        )
        assert scraped["pg_aio_wait_event_samples_total"][sleeping] > 0
        assert not [name for name in scraped if name.startswith(("pg_stat_io_", "pg_aio_read"))]
        exp.wait_poll()
        log = exp.logs()
        assert log.count("needs PostgreSQL 16 or newer") == 1, log
        assert "level=error" not in log
    finally:
        exp.stop()
        server.destroy()

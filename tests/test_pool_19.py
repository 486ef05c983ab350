"""PostgreSQL 19's io worker pool, live (Debian's 19, pgbins.debian_release): it sizes itself
between io_min_workers and io_max_workers. Four sessions, each scanning a table of its own on
slowed storage: the pool grows from io_min_workers and, idle, shrinks back after
io_worker_idle_timeout, as the exporter's pg_aio_io_workers shows; while it can still grow the
pool alert (the shipped rule on a real Prometheus 2, windows shortened) and the report's pool
finding stay quiet, and pinned at io_max_workers = 1 they fire, the report naming
io_max_workers and the value to set (never 18's io_workers, which 19 has no more)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import psycopg
import pytest

from alertstack import Stack, alert_stacks, short_rules
from harness import labels, scanning, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from pgbins import DEBIAN_MAJOR, bin_dir, debian_release
from slowread import SlowReads
from test_report import findings, report_json

pytestmark = pytest.mark.integration

POOL_ALERT = "PgAioWorkerPoolSaturated"
TABLES = ("pool_a", "pool_b", "pool_c", "pool_d")  # one per session: no synchronized scans
DELAY_US = 5000
IDLE_TIMEOUT = 5  # seconds of io_worker_idle_timeout (default 1 min)
QUIET_SECONDS = 20
T = labels(target="default")
IO_WORKERS = re.compile(r"\bio_workers\b")  # 18's setting, gone in 19


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, SlowReads]]:
    if (why := debian_release(DEBIAN_MAJOR)) is not None:
        pytest.skip(f"PostgreSQL {DEBIAN_MAJOR} not run: {why}")
    server = LocalServer.create(
        bin_dir(DEBIAN_MAJOR),
        settings={
            "shared_buffers": "16MB",
            "track_io_timing": "on",
            "io_worker_idle_timeout": f"'{IDLE_TIMEOUT}s'",
        },
    )
    try:
        slow = SlowReads(server)
        server.start()
        for table in TABLES:
            create_table(server.dsn(), 16, table)
        with alert_stacks(server, short_rules(tmp_path_factory.mktemp("rules")), ("2",)) as (
            stack,
        ):
            yield stack, slow
    finally:
        server.destroy()


def workers(stack: Stack) -> float | None:
    return stack.exporter.scrape().get("pg_aio_io_workers", {}).get(T)


def set_pool(server: LocalServer, most: int | None) -> None:
    """io_min_workers = io_max_workers = `most` (None: both reset), reloaded."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for name in ("io_min_workers", "io_max_workers"):
            change = f"RESET {name}" if most is None else f"SET {name} = {most}"
            conn.execute(f"ALTER SYSTEM {change}")
        conn.execute("SELECT pg_reload_conf()")


def test_the_pool_grows_under_scans_and_shrinks_after_the_idle_timeout(
    pool: tuple[Stack, SlowReads],
) -> None:
    stack, slow = pool
    least = wait_for(
        lambda: stack.exporter.scrape().get("pg_settings_io_min_workers", {}).get(T), 30, "settings"
    )
    assert wait_for(lambda: workers(stack) == least, 30, "the pool at rest")
    slow.set_delay(DELAY_US)
    try:
        with scanning(stack.server.dsn(), TABLES):
            grown = wait_for(
                lambda: (n := workers(stack)) is not None and n > least and n, 90, "the pool grown"
            )
    finally:
        slow.set_delay(0)
    idle = time.monotonic()
    wait_for(lambda: workers(stack) == least, 60, "the pool back at io_min_workers", every=0.5)
    shrunk_after = time.monotonic() - idle
    print(f"\npool: {least:.0f} at rest, {grown:.0f} under scans, back in {shrunk_after:.1f} s")
    # An idle worker leaves after io_worker_idle_timeout, not before.
    assert shrunk_after >= IDLE_TIMEOUT - 1


def test_a_pool_that_can_grow_is_quiet_a_pinned_one_alerts_and_names_io_max_workers(
    pool: tuple[Stack, SlowReads],
) -> None:
    stack, slow = pool
    slow.set_delay(DELAY_US)
    try:
        with scanning(stack.server.dsn(), TABLES, settle=1):
            doc, _ = report_json("--dsn", stack.server.dsn(), "--duration", "15s")
            assert "io_worker_pool_saturated" not in findings(doc), doc["findings"]
            assert "(io_max_workers)" in doc["verdict"]["io_workers"]
            for _ in range(QUIET_SECONDS):
                assert POOL_ALERT not in stack.firing(), "a pool below io_max_workers can grow"
                time.sleep(1)
        set_pool(stack.server, 1)
        with scanning(stack.server.dsn(), TABLES, settle=1):
            pinned = time.monotonic()
            wait_for(lambda: POOL_ALERT in stack.firing(), 120, "the pool alert", every=1)
            fired_after = time.monotonic() - pinned
            doc, _ = report_json("--dsn", stack.server.dsn(), "--duration", "15s")
    finally:
        slow.set_delay(0)
        set_pool(stack.server, None)
    assert stack.firing()[POOL_ALERT]["labels"]["signal"] == "pool_pinned"
    found = findings(doc)["io_worker_pool_saturated"]
    evidence = found["evidence"]
    assert evidence["io_max_workers"] == 1 and evidence["pool_share"] >= 0.9
    suggested = evidence["suggested_io_max_workers"]
    assert suggested > 1
    assert f"ALTER SYSTEM SET io_max_workers = {suggested}" in found["advice"]
    said = " ".join([found["summary"], found["advice"], doc["verdict"]["io_workers"]])
    assert not IO_WORKERS.search(said), said
    print(f"\npinned at 1: alert after {fired_after:.0f} s, advice io_max_workers = {suggested}")

"""PostgreSQL 19's io worker pool, live (Debian's 19, pgbins.debian_release): it sizes itself
between io_min_workers and io_max_workers. Four sessions, each scanning a table of its own on
slowed storage: the pool grows from io_min_workers and, idle, shrinks back after
io_worker_idle_timeout, as the exporter's pg_aio_io_workers shows; while it can still grow the
pool alert (the shipped rule on a real Prometheus 2, windows shortened) and the report's pool
finding stay quiet, and pinned at io_max_workers = 1 they fire, the report naming
io_max_workers and the value to set (never 18's io_workers, which 19 has no more); that value
applied, pgbench's scans of the same four tables run at least 1.3x as fast as pinned at one.
About 4 minutes, of which 75 s are pgbench's alternating runs."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from alertstack import Stack, alert_stacks, short_rules
from harness import labels, scanning, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from pgbench_judge import faster_by_alternating_runs, scans_per_second
from pgbins import DEBIAN_MAJOR, bin_dir, debian_release
from slowread import SlowReads
from test_report import findings, report_json

pytestmark = pytest.mark.integration

POOL_ALERT = "PgAioWorkerPoolSaturated"
TABLES = ("pool_0", "pool_1", "pool_2", "pool_3")  # one per session: no synchronized scans
# pgbench's client n (from 0) scans TABLES[n].
OWN_SCAN = "SELECT sum(length(payload)) FROM pool_:client_id;\n"
DELAY_US = 5000
IDLE_TIMEOUT = 5  # seconds of io_worker_idle_timeout (default 1 min)
QUIET_SECONDS = 20
T = labels(target="default")
IO_WORKERS = re.compile(r"\bio_workers\b")  # 18's setting, gone in 19
BENCH_SECONDS = 12
# pgbench's reads: 2 ms each, so that a run holds tens of scans, not the few whole ones DELAY_US
# leaves (0.4 a second pinned at one worker: a count too coarse), while the pool still sets
# the pace: at 1 ms the scans were CPU-bound on these 2 loaded cores, pinned or not (9.8 and
# 11.9 scans a second pinned, 13.3 and 12.5 with the advice).
BENCH_READ_US = 2000
PAIRS = 3  # pgbench runs pinned and with the advice, alternating: 1, n, 1, n, 1, n
# The runs' read-ahead: four streams of 8 reads in flight fit the workers' submission queue
# (64 entries). At the default 16 they can fill it, and a backend that finds it full does its
# reads itself (method_worker.c), so a pinned pool stops setting the pace: one CI run measured
# 1.19 scans/s pinned, then 9.75 and 9.59, as fast as the advice's 9.88 and 10.65.
READ_AHEAD = 8
# The bar: the advice applied makes pgbench's scans at least this much faster.
FASTER = 1.3


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


def configure(server: LocalServer, **settings: int | None) -> None:
    """Each setting ALTER SYSTEM SET (None: reset to the default), reloaded."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for name, value in settings.items():
            change = f"RESET {name}" if value is None else f"SET {name} = {value}"
            conn.execute(f"ALTER SYSTEM {change}")
        conn.execute("SELECT pg_reload_conf()")


def set_pool(server: LocalServer, least: int | None, most: int | None) -> None:
    """io_min_workers = `least`, io_max_workers = `most` (None: reset to the default),
    reloaded."""
    configure(server, io_min_workers=least, io_max_workers=most)


def running_workers(server: LocalServer) -> int:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'io worker'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def advice_speedup(server: LocalServer, script: Path, suggested: int) -> tuple[float, list[float]]:
    """pgbench's scans a second with io_max_workers = `suggested` (io_min_workers at its
    default: the advice as a user applies it) over those with the pool pinned at one, in
    alternating runs (1, n, 1, n, ...): on this shared machine one pair moved by half either
    way. One client per table, each on a thread of its own, READ_AHEAD reads ahead."""
    clients = len(TABLES)

    def pinned() -> float:
        set_pool(server, 1, 1)
        # Workers beyond io_max_workers leave when idle: the pinned run starts with one.
        wait_for(lambda: running_workers(server) == 1, 60, "the pool pinned at one", every=0.2)
        return scans_per_second(server.dsn(), script, clients, BENCH_SECONDS, threads=clients)

    def advised() -> float:
        set_pool(server, None, suggested)
        return scans_per_second(server.dsn(), script, clients, BENCH_SECONDS, threads=clients)

    configure(server, effective_io_concurrency=READ_AHEAD)
    try:
        return faster_by_alternating_runs(pinned, advised, PAIRS)
    finally:
        configure(server, effective_io_concurrency=None)


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
    pool: tuple[Stack, SlowReads], tmp_path: Path
) -> None:
    stack, slow = pool
    script = tmp_path / "own.sql"
    script.write_text(OWN_SCAN)
    slow.set_delay(DELAY_US)
    try:
        with scanning(stack.server.dsn(), TABLES, settle=1):
            doc, _ = report_json("--dsn", stack.server.dsn(), "--duration", "15s")
            assert "io_worker_pool_saturated" not in findings(doc), doc["findings"]
            assert "(io_max_workers)" in doc["verdict"]["io_workers"]
            for _ in range(QUIET_SECONDS):
                assert POOL_ALERT not in stack.firing(), "a pool below io_max_workers can grow"
                time.sleep(1)
        set_pool(stack.server, 1, 1)
        with scanning(stack.server.dsn(), TABLES, settle=1):
            pinned = time.monotonic()
            alert = wait_for(lambda: stack.firing().get(POOL_ALERT), 120, "the pool alert", every=1)
            fired_after = time.monotonic() - pinned
            doc, _ = report_json("--dsn", stack.server.dsn(), "--duration", "15s")
        pinned_finding = findings(doc).get("io_worker_pool_saturated")
        assert pinned_finding is not None, doc["findings"]
        applied = pinned_finding["evidence"]["suggested_io_max_workers"]
        slow.set_delay(BENCH_READ_US)
        faster, runs = advice_speedup(stack.server, script, applied)
    finally:
        slow.set_delay(0)
        set_pool(stack.server, None, None)
    assert alert["labels"]["signal"] == "pool_pinned"
    found = findings(doc)["io_worker_pool_saturated"]
    evidence = found["evidence"]
    assert evidence["io_max_workers"] == 1 and evidence["pool_share"] >= 0.9
    suggested = evidence["suggested_io_max_workers"]
    assert suggested > 1
    assert f"ALTER SYSTEM SET io_max_workers = {suggested}" in found["advice"]
    said = " ".join([found["summary"], found["advice"], doc["verdict"]["io_workers"]])
    assert not IO_WORKERS.search(said), said
    print(
        f"\npinned at 1: alert after {fired_after:.0f} s, advice io_max_workers = {suggested};"
        f" pgbench scans/s pinned and applied, alternating: {runs} ({faster:.2f}x)"
    )
    assert faster >= FASTER, runs

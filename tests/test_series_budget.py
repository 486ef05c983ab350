"""What one target costs a Prometheus: the series of its /metrics at defaults, on a real
PostgreSQL 18 server under pgbench, against a budget and against postgres_exporter's defaults
on the same server (issue 46; docs/metrics.md, "What a target costs")."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from conftest import SMALL_BUFFERS
from harness import REPO, Exporter, Samples, wait_for
from pg_aio_exporter.demo.server import LocalServer, embedded_bin_dir
from postgres_exporter import PostgresExporter
from prometheus import Prometheus

# Measured at 339-344 with these defaults (1,047-1,051 before idle pg_stat_io rows were left
# out and the self-histograms cut to five bounds); postgres_exporter's defaults held 537 on the
# issue's server. The margin is for rows a longer or other workload wakes (checkpointer,
# autovacuum): a regression that brings back the idle rows (~650) or the old buckets (~60)
# fails.
BUDGET = 400


def series(text: str) -> Counter[str]:
    """Series per metric name (a histogram's buckets, _sum and _count under its own name)."""
    names: Counter[str] = Counter()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            names[name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")] += 1
    return names


# pg_stat_io's columns that are not counters: the row's labels and its reset time.
LABEL_COLUMNS = ("backend_type", "object", "context", "stats_reset")


def per_row(scraped: Samples) -> Counter[tuple[str, str, str]]:
    """pg_stat_io counter series per row (backend_type, object, context)."""
    rows: Counter[tuple[str, str, str]] = Counter()
    for name, by_labels in scraped.items():
        if name.startswith("pg_stat_io_") and name.endswith("_total"):
            for labels in by_labels:
                found = dict(labels)
                rows[found["backend_type"], found["object"], found["context"]] += 1
    return rows


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    server = LocalServer.create(settings=SMALL_BUFFERS | {"io_method": "worker"})
    server.start()
    yield server
    server.destroy()


def test_one_target_under_load_stays_within_the_budget_and_below_postgres_exporter(
    server: LocalServer,
) -> None:
    pgbench = str(embedded_bin_dir() / "pgbench")
    subprocess.run([pgbench, "-i", "-q", "-s", "2", server.dsn()], check=True, capture_output=True)
    ours = Exporter("--dsn", server.dsn(), "--poll-interval", "1s")
    peer = PostgresExporter(server)
    load = subprocess.Popen(
        [pgbench, "-c", "4", "-T", "6", server.dsn()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ours.wait_poll()
        ours.wait_poll()  # a whole interval under load: its per-interval gauges are out too
        got = series(ours.text())
        theirs = series(peer.get("/metrics")[0].decode())
        assert load.wait(timeout=30) == 0
    finally:
        load.kill()
        peer.stop()
        ours.stop()
    total, peers = sum(got.values()), sum(theirs.values())
    largest = ", ".join(f"{name} {n}" for name, n in got.most_common(8))
    print(f"[series budget] ours {total}, postgres_exporter {peers}; largest: {largest}")
    # The load reached pg_stat_io: the count is that of a working server, not an idle one.
    assert got["pg_stat_io_reads_total"] >= 3 and got["pg_aio_read_latency_seconds"] >= 1, largest
    assert total <= BUDGET, f"{total} series (budget {BUDGET}, peer {peers}); largest: {largest}"
    assert total <= peers, f"{total} series, postgres_exporter {peers}; largest: {largest}"


def test_the_idle_rows_flag_serves_the_full_raw_view(server: LocalServer) -> None:
    """--collector.pg_stat_io.idle_rows: every row of pg_stat_io, also those that never
    counted, with one counter series per non-NULL cell, as the view has them; by default the
    rows that never counted are left out (a row may wake between the view's reads here and the
    polls: counting in the first read, it is served; idle in the last, it is not)."""
    before = io_cells(server)
    full = Exporter("--dsn", server.dsn(), "--collector.pg_stat_io.idle_rows")
    default = Exporter("--dsn", server.dsn())
    try:
        served_full, served_default = per_row(full.wait_poll()), per_row(default.wait_poll())
    finally:
        full.stop()
        default.stop()
    after = io_cells(server)
    print(
        f"[idle rows] {len(after)} rows, {sum(not c for c, _ in after.values())} idle; counter"
        f" series: full view {sum(served_full.values())}, default {sum(served_default.values())}"
    )
    assert served_full == {row: cells for row, (_, cells) in after.items()}
    counting = {row for row, (active, _) in before.items() if active}
    idle = {row for row, (active, _) in after.items() if not active}
    assert idle, "a server has rows that never counted (e.g. walsender's)"
    assert counting <= set(served_default), counting - set(served_default)
    assert not idle & set(served_default), idle & set(served_default)


def io_cells(server: LocalServer) -> dict[tuple[str, str, str], tuple[bool, int]]:
    """pg_stat_io's rows: whether each has counted anything, and its non-NULL counter cells."""
    with psycopg.connect(server.dsn()) as conn:
        cursor = conn.execute("SELECT * FROM pg_stat_io")
        columns = [d.name for d in cursor.description or []]
        rows = cursor.fetchall()
    counters = [i for i, c in enumerate(columns) if c not in LABEL_COLUMNS]
    return {
        (row[0], row[1], row[2]): (
            any(row[i] for i in counters),
            sum(row[i] is not None for i in counters),
        )
        for row in rows
    }


# The shipped rule files, as committed.
RULES = sorted((REPO / "alerts").glob("pg_aio_*.yml"))
RECORDED = '{__name__=~"pg_aio:.+|pg_aio_target:.+"}'
# One series per recording rule and target: 49 rules (alerts/pg_aio_recording.yml), every one
# of them per target since issue 46, so no workload can add more. Measured 34 under pgbench
# here (the rest record nothing without pg_stat_statements, PostgreSQL 19, track_wal_io_timing
# or checkpoints); 119 before on the same run, ~325 on a server with every pg_stat_io row out.
RECORDED_BUDGET = 49


def test_recorded_series_of_one_target_under_load_stay_within_the_budget(
    server: LocalServer,
) -> None:
    """Every distinct series the shipped recording rules recorded for one target while it
    served pgbench: what the rules add to a Prometheus per target, by rule."""
    pgbench = str(embedded_bin_dir() / "pgbench")
    subprocess.run([pgbench, "-i", "-q", "-s", "2", server.dsn()], check=True, capture_output=True)
    ours = Exporter("--dsn", server.dsn(), "--poll-interval", "1s")
    prometheus = Prometheus([f"127.0.0.1:{ours.port}"], RULES)
    start = time.time()
    load = subprocess.Popen(
        [pgbench, "-c", "4", "-T", "10", server.dsn()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert load.wait(timeout=40) == 0
        wait_for(
            lambda: prometheus.query("pg_aio_target:write_ops_per_second:rate5m > 0"),
            20,
            "the recording rules to see the load's writes",
        )
        found = prometheus.api("series", **{"match[]": RECORDED, "start": str(start)})
    finally:
        load.kill()
        prometheus.stop()
        ours.stop()
    recorded = Counter(str(s["__name__"]) for s in found)
    total = sum(recorded.values())
    largest = ", ".join(f"{name} {n}" for name, n in recorded.most_common(10))
    print(f"[recorded series] {total} by {len(recorded)} rules; largest: {largest}")
    print("\n".join(f"  {name} {n}" for name, n in sorted(recorded.items())))
    assert total <= RECORDED_BUDGET, (
        f"{total} recorded series (budget {RECORDED_BUDGET}): {largest}"
    )

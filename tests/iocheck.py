"""Checks shared by the pg_stat_io tests on every server version: the exporter's counters and
interval gauges against pg_stat_io read independently by the test."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from harness import OBSERVER, Exporter, Samples, flush_stats, labels, pg_stat_io, wait_for
from pg_aio_exporter.demo.workload import Workload, index_scan, seq_scan

Row = dict[str, Any]
IoRows = dict[tuple[str, str, str], Row]
BULKREAD = ("client backend", "relation", "bulkread")
# The exporter's own footprint: its pg_stat_database collector reads the one page of
# pg_database from shared buffers at every poll (measured on 18.6 with the prepared statement:
# 1 hit per poll, 0 reads), counted on its backend's row when that backend next reports its
# stats (when idle, at most once a second): after the poll that read pg_stat_io. Exact
# comparisons of that row's hits allow it, and nothing else.
OWN = ("client backend", "relation", "normal")
OWN_HITS = 1

# Contract metric -> (pg_stat_io column, factor); written out here rather than imported so that
# the test does not trust the exporter's own mapping. Byte columns exist from PG 18; before,
# bytes are the count column times op_bytes.
COUNTERS = {
    "pg_stat_io_reads_total": ("reads", 1.0),
    "pg_stat_io_read_bytes_total": ("read_bytes", 1.0),
    "pg_stat_io_read_time_seconds_total": ("read_time", 0.001),
    "pg_stat_io_writes_total": ("writes", 1.0),
    "pg_stat_io_write_bytes_total": ("write_bytes", 1.0),
    "pg_stat_io_write_time_seconds_total": ("write_time", 0.001),
    "pg_stat_io_writebacks_total": ("writebacks", 1.0),
    "pg_stat_io_writeback_time_seconds_total": ("writeback_time", 0.001),
    "pg_stat_io_extends_total": ("extends", 1.0),
    "pg_stat_io_extend_bytes_total": ("extend_bytes", 1.0),
    "pg_stat_io_extend_time_seconds_total": ("extend_time", 0.001),
    "pg_stat_io_hits_total": ("hits", 1.0),
    "pg_stat_io_evictions_total": ("evictions", 1.0),
    "pg_stat_io_reuses_total": ("reuses", 1.0),
    "pg_stat_io_fsyncs_total": ("fsyncs", 1.0),
    "pg_stat_io_fsync_time_seconds_total": ("fsync_time", 0.001),
}
# What the interval gauges are computed from.
READ_COUNTERS = (
    "pg_stat_io_reads_total",
    "pg_stat_io_read_bytes_total",
    "pg_stat_io_read_time_seconds_total",
    "pg_stat_io_hits_total",
)
# The fewest counter values check_counters_between must have checked for a check to count: a
# server that has worked serves 7-15 rows (of 30 on 16, 35 on 17, 79 on 18/19), 86-144 values
# measured under this file's workload and 87 on a near-idle 18 after one query; a scrape
# missing a working row's series fails below it, as does an empty one.
CHECKED = 60
GAUGES = (
    "pg_aio_read_latency_seconds",
    "pg_aio_read_seconds_per_byte",
    "pg_aio_read_size_bytes",
    "pg_aio_hit_ratio",
)


def expected(row: Row, column: str, factor: float) -> float | None:
    if column not in row:  # PG 16/17: e.g. read_bytes = reads x op_bytes
        count = row[column.replace("_bytes", "s")]
        return None if count is None else float(count * row["op_bytes"])
    value = row[column]
    return None if value is None else float(value) * factor


def served(row: Row) -> bool:
    """Whether the exporter serves this pg_stat_io row: it has counted something since the last
    reset. A row whose every counter is 0 or NULL has no series at all (docs/metrics.md,
    pg_stat_io); written out here from the test's own column list, not the exporter's rule."""
    return any(expected(row, column, factor) for column, factor in COUNTERS.values())


def series_key(key: tuple[str, str, str]) -> frozenset[tuple[str, str]]:
    return labels(target="default", backend_type=key[0], object=key[1], context=key[2])


def check_counters_between(scraped: Samples, before: IoRows, after: IoRows) -> int:
    """Every counter lies between two pg_stat_io reads taken around the scrape; NULL cells
    have no series, nor has a row idle in `after`. A row that counted in `before` has every
    other cell's series; one idle in `before` and counting in `after` woke around the poll: it
    is absent or whole. Returns how many values were checked."""
    checked = 0
    for key, row in after.items():
        was = before[key]
        values = {metric: scraped.get(metric, {}).get(series_key(key)) for metric in COUNTERS}
        if not served(row):
            assert set(values.values()) == {None}, f"series for idle row {key}: {values}"
            continue
        if not served(was) and set(values.values()) == {None}:
            continue  # woke after the poll read it
        for metric, (column, factor) in COUNTERS.items():
            value = values[metric]
            high = expected(row, column, factor)
            if high is None:
                assert value is None, f"{metric} exported for NULL cell {key}"
                continue
            low = expected(was, column, factor)
            assert value is not None, f"{metric}{key} missing"
            assert low is not None and low - 1e-9 <= value <= high + 1e-9, (metric, key, value)
            checked += 1
    return checked


def check_monotonic(history: list[Samples]) -> None:
    for earlier, later in itertools.pairwise(history):
        for metric in COUNTERS:
            for key, value in earlier.get(metric, {}).items():
                assert later[metric][key] >= value, (metric, key)


def quiesce(dsn: str) -> None:
    """Let all pending stats reach shared memory: nobody but the exporter is connected."""

    def alone() -> bool:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND application_name NOT IN ('pg_aio_exporter', %s) AND pid <> pg_backend_pid()",
                (OBSERVER,),
            ).fetchone()
            return row is not None and row[0] == 0

    wait_for(alone, 30, "workload connections to close")
    time.sleep(0.2)  # a backend flushes its stats while exiting


def burst(dsn: str) -> None:
    """Reads in both contexts, on a connection whose stats are flushed on return."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        seq_scan(conn)  # bulkread: table > shared_buffers / 4
        for _ in range(20):
            index_scan(conn, span=500)  # normal
        flush_stats(conn)


def reads_as_polled(scraped: Samples, rows: IoRows) -> bool:
    """The scrape's read counters equal these pg_stat_io rows, but for the exporter's own hits:
    nothing was read in between (a background process, e.g. autovacuum, may flush its reads at
    any moment). An idle row (not `served`) has no series."""
    for key, row in rows.items():
        for metric in READ_COUNTERS:
            column, factor = COUNTERS[metric]
            want = expected(row, column, factor) if served(row) else None
            got = scraped.get(metric, {}).get(series_key(key))
            if own_hits(key, metric) and want is not None and got is not None:
                if not 0 <= want - got <= OWN_HITS:
                    return False
            elif got != (None if want is None else pytest.approx(want, rel=1e-9, abs=1e-12)):
                return False
    return True


def own_hits(key: tuple[str, str, str], metric: str) -> bool:
    return key == OWN and metric == "pg_stat_io_hits_total"


def stood_still(before: IoRows, after: IoRows) -> bool:
    """No process but the exporter's poll flushed I/O between two pg_stat_io reads."""
    if before.keys() != after.keys():
        return False
    for key, row in after.items():
        was = before[key]
        if any(row[c] != was[c] for c in row if c not in ("hits", "stats_reset")):
            return False
        if row["stats_reset"] != was["stats_reset"]:
            return False
        if not 0 <= (row["hits"] or 0) - (was["hits"] or 0) <= (OWN_HITS if key == OWN else 0):
            return False
    return True


def one_interval(
    dsn: str,
    exporter: Exporter,
    obs: psycopg.Connection[Any],
    poll: float,
    work: Callable[[str], None] = burst,
) -> tuple[IoRows, IoRows, Samples]:
    """pg_stat_io S1 == poll P1, `work` (a burst of reads on the server of `dsn`, its
    connections closed when it returns), S2 == poll P2, with exactly one poll between them."""
    for _ in range(4):
        quiesce(dsn)
        first = exporter.wait_poll()
        p1 = max(first["pg_aio_exporter_last_poll_success_timestamp_seconds"].values())
        s1 = pg_stat_io(obs)
        work(dsn)
        s2 = pg_stat_io(obs)
        second = exporter.wait_poll(after=p1)
        p2 = max(second["pg_aio_exporter_last_poll_success_timestamp_seconds"].values())
        if p2 - p1 < 1.5 * poll and reads_as_polled(first, s1) and reads_as_polled(second, s2):
            return s1, s2, second
    raise AssertionError("could not fit a burst into one poll interval")


def check_one_interval(
    dsn: str, exporter: Exporter, obs: psycopg.Connection[Any], poll: float
) -> Samples:
    """A burst of reads within one poll interval: the gauges of at least the two read
    contexts equal the test's own math. Returns the scrape after it."""
    s1, s2, scraped = one_interval(dsn, exporter, obs, poll)
    assert check_interval_gauges(s1, s2, scraped, block_size(obs)) >= 2
    return scraped


def block_size(conn: psycopg.Connection[Any]) -> int:
    """The server's block size in bytes, as the test reads it: what one hit counts."""
    row = conn.execute("SHOW block_size").fetchone()
    assert row is not None
    return int(row[0])


def check_interval_gauges(s1: IoRows, s2: IoRows, scraped: Samples, block: int) -> int:
    """The four gauges equal the test's own math on S1 -> S2, and are absent where no reads
    happened; `block`: the server's block size. Returns how many label sets had reads."""
    moved = 0
    for key, now in s2.items():
        before = s1.get(key)
        gauges = {name: scraped.get(name, {}).get(series_key(key)) for name in GAUGES}
        d_reads = (now["reads"] or 0) - ((before or {}).get("reads") or 0)
        if before is None or now["reads"] is None or d_reads <= 0:
            assert set(gauges.values()) == {None}, f"gauges for {key} without reads: {gauges}"
            continue
        moved += 1
        d_bytes = (expected(now, "read_bytes", 1.0) or 0.0) - (
            expected(before, "read_bytes", 1.0) or 0.0
        )
        d_time = (now["read_time"] - before["read_time"]) / 1000.0
        d_hits = now["hits"] - before["hits"]
        rel = pytest.approx
        assert gauges["pg_aio_read_latency_seconds"] == rel(d_time / d_reads, rel=1e-9)
        assert gauges["pg_aio_read_seconds_per_byte"] == rel(d_time / d_bytes, rel=1e-9)
        assert gauges["pg_aio_read_size_bytes"] == rel(d_bytes / d_reads, rel=1e-9)
        # Hits count blocks, reads operations (on 18 of many blocks): blocks read by bytes.
        d_blocks = d_bytes / block
        # The exporter's own hit of the first poll may fall on either side of the test's read.
        slack = OWN_HITS / (d_hits + d_blocks) if key == OWN else 0.0
        by_blocks = d_hits / (d_hits + d_blocks)
        assert gauges["pg_aio_hit_ratio"] == rel(by_blocks, rel=1e-9, abs=slack)
    return moved


def check_counters_under_load(dsn: str, exporter: Exporter, obs: psycopg.Connection[Any]) -> None:
    """Under a workload every counter lies between pg_stat_io read before and after a poll,
    and grows; the sampler sees the sessions; on the quiet server they equal pg_stat_io."""
    workload = Workload(dsn, clients=2, pause=0.05).start()
    history: list[Samples] = []
    try:
        for _ in range(3):
            before = pg_stat_io(obs)
            scraped = exporter.wait_poll()
            after = pg_stat_io(obs)
            history.append(scraped)
            assert check_counters_between(scraped, before, after) > CHECKED
    finally:
        workload.stop()
    check_monotonic(history)
    # The scans may not have begun by the first poll: bulkread's row idle, no series, 0 reads.
    reads = [h["pg_stat_io_reads_total"].get(series_key(BULKREAD), 0.0) for h in history]
    assert reads[-1] > reads[0]
    waits = history[-1]["pg_aio_wait_event_samples_total"]
    assert sum(v for k, v in waits.items() if dict(k)["backend_type"] == "client backend") > 0
    quiesce(dsn)
    for _ in range(4):
        now = pg_stat_io(obs)
        scraped = exporter.wait_poll()
        if stood_still(now, pg_stat_io(obs)):  # autovacuum may flush I/O at any moment
            break
    else:
        raise AssertionError("pg_stat_io never stood still for the length of a poll")
    assert check_counters_between(scraped, now, now) > CHECKED

"""pg_stat_io (PostgreSQL 16+): cumulative I/O counters and per-interval read and write gauges.

PG 16/17 count in blocks of op_bytes; PG 18 has byte columns and one read may cover many
blocks (io_combine_limit), which is why latency is exported per operation AND per byte.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pg_aio_exporter.collectors.base import Row
from pg_aio_exporter.collectors.intervals import (
    WAL_OBJECT,
    IntervalOperation,
    LabelKey,
    ReadCounters,
    Snapshot,
    WriteCounters,
    interval_reads,
    interval_writes,
)
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG16, PG18


@dataclass(frozen=True)
class Column:
    column: str
    metric: str  # counter name without _total
    doc: str
    scale: float = 1.0  # pg_stat_io times are milliseconds
    blocks_of: str | None = None  # PG 16/17: bytes = this count column x op_bytes


COLUMNS = (
    Column("reads", "pg_stat_io_reads", "Read operations (PG 18: one op may cover many blocks)."),
    Column("read_bytes", "pg_stat_io_read_bytes", "Bytes read.", blocks_of="reads"),
    Column(
        "read_time",
        "pg_stat_io_read_time_seconds",
        "Time spent waiting for reads; needs track_io_timing.",
        0.001,
    ),
    Column("writes", "pg_stat_io_writes", "Write operations."),
    Column("write_bytes", "pg_stat_io_write_bytes", "Bytes written.", blocks_of="writes"),
    Column(
        "write_time",
        "pg_stat_io_write_time_seconds",
        "Time spent in writes; needs track_io_timing.",
        0.001,
    ),
    Column("writebacks", "pg_stat_io_writebacks", "Writeback requests (in blocks)."),
    Column(
        "writeback_time",
        "pg_stat_io_writeback_time_seconds",
        "Time spent in writeback; needs track_io_timing.",
        0.001,
    ),
    Column("extends", "pg_stat_io_extends", "Relation extend operations."),
    Column("extend_bytes", "pg_stat_io_extend_bytes", "Bytes extended.", blocks_of="extends"),
    Column(
        "extend_time",
        "pg_stat_io_extend_time_seconds",
        "Time spent extending; needs track_io_timing.",
        0.001,
    ),
    Column("hits", "pg_stat_io_hits", "Shared buffer hits (reads avoided)."),
    Column("evictions", "pg_stat_io_evictions", "Buffers evicted to make room."),
    Column("reuses", "pg_stat_io_reuses", "Ring buffers reused (bulk strategies)."),
    Column("fsyncs", "pg_stat_io_fsyncs", "fsync calls."),
    Column(
        "fsync_time",
        "pg_stat_io_fsync_time_seconds",
        "Time spent in fsync; needs track_io_timing.",
        0.001,
    ),
)


def _select_list(version_num: int) -> str:
    exprs = []
    for col in COLUMNS:
        if col.blocks_of is not None and version_num < PG18:
            exprs.append(f"({col.blocks_of} * op_bytes)::float8 AS {col.column}")
        else:
            exprs.append(f"{col.column}::float8 AS {col.column}")
    return ", ".join(exprs)


class PgStatIoCollector:
    name = "pg_stat_io"
    labels = ("backend_type", "object", "context")
    since = PG16

    def __init__(self) -> None:
        self._previous: Snapshot | None = None

    def query(self, version_num: int) -> str | None:
        if version_num < self.since:
            return None
        # The setting and postmaster start ride along so that interval math needs no other
        # collector: a restart or track_io_timing flip between polls must void the interval.
        return (
            f"SELECT backend_type, object, context, {_select_list(version_num)},"
            " extract(epoch FROM stats_reset)::float8 AS stats_reset,"
            " current_setting('track_io_timing')::bool AS track_io_timing,"
            " extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time"
            " FROM pg_stat_io"
        )

    def collect(self, rows: list[Row], out: MetricSet) -> None:
        for row in rows:
            labels = {
                "backend_type": row["backend_type"],
                "object": row["object"],
                "context": row["context"],
            }
            for col in COLUMNS:
                value = row[col.column]
                if value is not None:  # NULL: the operation does not apply to this row
                    out.counter(col.metric, col.doc, value * col.scale, **labels)
        snapshot = read_snapshot(rows)
        if snapshot is None:
            return
        if snapshot.stats_reset is not None:
            out.gauge(
                "pg_stat_io_stats_reset_timestamp_seconds",
                "Last pg_stat_io reset (pg_stat_reset_shared('io')), epoch seconds.",
                snapshot.stats_reset,
            )
        for (backend_type, obj, context), iv in sorted(
            interval_reads(self._previous, snapshot).items()
        ):
            labels = {"backend_type": backend_type, "object": obj, "context": context}
            if iv.latency_seconds is not None:
                out.gauge(
                    "pg_aio_read_latency_seconds",
                    "Read wait time per read operation over the last poll interval.",
                    iv.latency_seconds,
                    **labels,
                )
            if iv.seconds_per_byte is not None:
                out.gauge(
                    "pg_aio_read_seconds_per_byte",
                    "Read wait time per byte read over the last poll interval;"
                    " comparable across PG 17 and 18.",
                    iv.seconds_per_byte,
                    **labels,
                )
            out.gauge(
                "pg_aio_read_size_bytes",
                "Average bytes per read operation over the last poll interval.",
                iv.size_bytes,
                **labels,
            )
            out.gauge(
                "pg_aio_hit_ratio",
                "hits / (hits + reads) over the last poll interval.",
                iv.hit_ratio,
                **labels,
            )
        collect_write_gauges(interval_writes(self._previous, snapshot), out)
        self._previous = snapshot


# What each write operation is, for the help text of its gauges.
WRITE_OPERATION_WORDS = {
    "write": "buffer write",
    "extend": "relation extension",
    "writeback": "writeback request",
    "fsync": "fsync",
}


def collect_write_gauges(
    figures: dict[tuple[LabelKey, str], IntervalOperation], out: MetricSet
) -> None:
    """pg_aio_<op>_latency_seconds and, for operations that move bytes,
    pg_aio_<op>_seconds_per_byte, like the read gauges."""
    for ((backend_type, obj, context), op), iv in sorted(figures.items()):
        labels = {"backend_type": backend_type, "object": obj, "context": context}
        words = WRITE_OPERATION_WORDS[op]
        out.gauge(
            f"pg_aio_{op}_latency_seconds",
            f"Time per {words} over the last poll interval; needs track_io_timing.",
            iv.latency_seconds,
            **labels,
        )
        if iv.seconds_per_byte is not None:
            out.gauge(
                f"pg_aio_{op}_seconds_per_byte",
                f"Time per byte of {words}s over the last poll interval; needs track_io_timing.",
                iv.seconds_per_byte,
                **labels,
            )


def _key(row: Row) -> LabelKey:
    # Kept until the next poll, for every target: one copy of each label string.
    return (sys.intern(row["backend_type"]), sys.intern(row["object"]), sys.intern(row["context"]))


def read_snapshot(rows: list[Row]) -> Snapshot | None:
    """This poll's read counters, as the interval math takes them."""
    if not rows:
        return None
    counters: dict[LabelKey, ReadCounters] = {}
    for row in rows:
        if row["reads"] is None or row["read_bytes"] is None or row["hits"] is None:
            continue
        counters[_key(row)] = ReadCounters(
            reads=row["reads"],
            read_bytes=row["read_bytes"],
            read_time_ms=row["read_time"] or 0.0,
            hits=row["hits"],
        )
    resets = [row["stats_reset"] for row in rows if row["stats_reset"] is not None]
    return Snapshot(
        rows=counters,
        stats_reset=max(resets) if resets else None,
        start_time=rows[0]["start_time"],
        track_io_timing=rows[0]["track_io_timing"],
        writes=write_counters(rows),
    )


def write_counters(rows: list[Row]) -> dict[LabelKey, WriteCounters]:
    """This poll's write counters per row; a NULL cell (the operation does not apply to that
    row, e.g. fsyncs of bulkwrite) counts 0. Rows that can do none of them are left out, and so
    are PostgreSQL 18's `wal` rows: their times follow track_wal_io_timing, not
    track_io_timing, and the pg_stat_wal collector turns them into the WAL figures."""
    out: dict[LabelKey, WriteCounters] = {}
    for row in rows:
        if row["object"] == WAL_OBJECT:
            continue
        if all(row[c] is None for c in ("writes", "extends", "writebacks", "fsyncs")):
            continue
        out[_key(row)] = WriteCounters(
            *(
                row[column] or 0.0
                for column in (
                    "writes",
                    "write_bytes",
                    "write_time",
                    "extends",
                    "extend_bytes",
                    "extend_time",
                    "writebacks",
                    "writeback_time",
                    "fsyncs",
                    "fsync_time",
                )
            )
        )
    return out

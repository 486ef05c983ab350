"""pg_stat_io (PostgreSQL 16+): cumulative I/O counters and per-interval read and write gauges.

PG 16/17 count in blocks of op_bytes; PG 18 has byte columns and one read may cover many
blocks (io_combine_limit), which is why latency is exported per operation AND per byte.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pg_aio_exporter.collectors.base import Counter, select
from pg_aio_exporter.collectors.intervals import (
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
from pg_aio_exporter.vocabulary import IO_LABELS, WAL_OBJECT, WRITE_OPERATIONS


def _bytes(column: str, of: str, doc: str) -> Counter:
    """A byte column (PG 18); PG 16/17 count in blocks of op_bytes: the count column x op_bytes."""
    sources = ((PG16, f"({of} * op_bytes)"), (PG18, column))
    return Counter(column, f"pg_stat_io_{column}", doc, sources=sources)


def _time(operation: str, doc: str) -> Counter:
    """A time column, milliseconds in the view."""
    time = f"{operation}_time"
    return Counter(time, f"pg_stat_io_{time}_seconds", f"{doc}; needs track_io_timing.", 0.001)


COUNTERS = (
    Counter("reads", "pg_stat_io_reads", "Read operations (PG 18: one op may cover many blocks)."),
    _bytes("read_bytes", "reads", "Bytes read."),
    _time("read", "Time spent waiting for reads"),
    Counter("writes", "pg_stat_io_writes", "Write operations."),
    _bytes("write_bytes", "writes", "Bytes written."),
    _time("write", "Time spent in writes"),
    Counter("writebacks", "pg_stat_io_writebacks", "Writeback requests (in blocks)."),
    _time("writeback", "Time spent in writeback"),
    Counter("extends", "pg_stat_io_extends", "Relation extend operations."),
    _bytes("extend_bytes", "extends", "Bytes extended."),
    _time("extend", "Time spent extending"),
    Counter("hits", "pg_stat_io_hits", "Shared buffer hits (reads avoided)."),
    Counter("evictions", "pg_stat_io_evictions", "Buffers evicted to make room."),
    Counter("reuses", "pg_stat_io_reuses", "Ring buffers reused (bulk strategies)."),
    Counter("fsyncs", "pg_stat_io_fsyncs", "fsync calls."),
    _time("fsync", "Time spent in fsync"),
)


@dataclass(frozen=True, slots=True)
class IoRow:
    """A row of the collector's SQL: the counters (COUNTERS), NULL where the operation does not
    apply to the row, and what the interval math needs besides."""

    backend_type: str
    object: str
    context: str
    reads: float | None
    read_bytes: float | None
    read_time: float | None
    writes: float | None
    write_bytes: float | None
    write_time: float | None
    writebacks: float | None
    writeback_time: float | None
    extends: float | None
    extend_bytes: float | None
    extend_time: float | None
    hits: float | None
    evictions: float | None
    reuses: float | None
    fsyncs: float | None
    fsync_time: float | None
    stats_reset: float | None
    track_io_timing: bool
    block_size: float
    start_time: float


# The per-interval gauges, by the operation each measures (collect_write_gauges for writes).
READ_GAUGES = (
    "pg_aio_read_latency_seconds",
    "pg_aio_read_seconds_per_byte",
    "pg_aio_read_size_bytes",
    "pg_aio_hit_ratio",
)
WRITE_GAUGES = tuple(
    name
    for op in WRITE_OPERATIONS.values()
    for name in (
        f"pg_aio_{op.name}_latency_seconds",
        *([f"pg_aio_{op.name}_seconds_per_byte"] if op.moves_bytes else []),
    )
)


class PgStatIoCollector:
    name = "pg_stat_io"
    labels = IO_LABELS
    families = (
        *(c.series for c in COUNTERS),
        "pg_stat_io_stats_reset_timestamp_seconds",
        *READ_GAUGES,
        *WRITE_GAUGES,
    )
    since = PG16
    row_type = IoRow

    def __init__(self, *, idle_rows: bool = False) -> None:
        """`idle_rows`: every row of the view, also those that never counted (the full raw
        view, --collector.pg_stat_io.idle_rows; see active())."""
        self._previous: Snapshot | None = None
        self._idle_rows = idle_rows

    def query(self, version_num: int) -> str | None:
        if version_num < self.since:
            return None
        # The settings and postmaster start ride along so that interval math needs no other
        # collector: a restart or track_io_timing flip between polls must void the interval,
        # and the hit ratio counts the bytes read in blocks of the server's block_size.
        return (
            f"SELECT backend_type, object, context, {select(COUNTERS, version_num)},"
            " extract(epoch FROM stats_reset)::float8 AS stats_reset,"
            " current_setting('track_io_timing')::bool AS track_io_timing,"
            " current_setting('block_size')::float8 AS block_size,"
            " extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time"
            " FROM pg_stat_io"
        )

    def snapshot(self, rows: list[IoRow]) -> Snapshot | None:
        return read_snapshot(rows)

    def collect(self, rows: list[IoRow], out: MetricSet) -> None:
        for row in rows:
            if not (self._idle_rows or active(row)):
                continue
            labels = {
                "backend_type": row.backend_type,
                "object": row.object,
                "context": row.context,
            }
            for counter in COUNTERS:  # NULL: the operation does not apply to this row
                counter.publish_from(row, out, **labels)
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
            if iv.hit_ratio is not None:  # always: block_size rides along
                out.gauge(
                    "pg_aio_hit_ratio",
                    "hits / (hits + blocks read) over the last poll interval; blocks read ="
                    " read bytes / block_size (PG 18 reads many blocks per operation).",
                    iv.hit_ratio,
                    **labels,
                )
        collect_write_gauges(interval_writes(self._previous, snapshot), out)
        self._previous = snapshot


def active(row: IoRow) -> bool:
    """Whether the row counted anything since pg_stat_io was last reset. Most rows never do on
    a given server (backend types that never read, contexts that never occur): 16 zeros each,
    the bulk of a target's series. Leaving them out changes no sum the rules or panels take
    (a row's rate is 0 until it counts); a row that starts counting later appears then, and
    rate() misses the increase of its first poll, as it does for every row when the exporter
    starts (docs/metrics.md)."""
    return any(counter.value(row) for counter in COUNTERS)


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


def _key(row: IoRow) -> LabelKey:
    # Kept until the next poll, for every target: one copy of each label string.
    return (sys.intern(row.backend_type), sys.intern(row.object), sys.intern(row.context))


def read_snapshot(rows: list[IoRow]) -> Snapshot | None:
    """This poll's read counters, as the interval math takes them."""
    if not rows:
        return None
    counters: dict[LabelKey, ReadCounters] = {}
    for row in rows:
        if row.reads is None or row.read_bytes is None or row.hits is None:
            continue
        counters[_key(row)] = ReadCounters(
            reads=row.reads,
            read_bytes=row.read_bytes,
            read_time_ms=row.read_time or 0.0,
            hits=row.hits,
        )
    resets = [row.stats_reset for row in rows if row.stats_reset is not None]
    return Snapshot(
        rows=counters,
        stats_reset=max(resets) if resets else None,
        start_time=rows[0].start_time,
        track_io_timing=rows[0].track_io_timing,
        block_size=rows[0].block_size,
        writes=write_counters(rows),
    )


def write_counters(rows: list[IoRow]) -> dict[LabelKey, WriteCounters]:
    """This poll's write counters per row; a NULL cell (the operation does not apply to that
    row, e.g. fsyncs of bulkwrite) counts 0. Rows that can do none of them are left out, and so
    are PostgreSQL 18's `wal` rows: their times follow track_wal_io_timing, not
    track_io_timing, and the pg_stat_wal collector turns them into the WAL figures."""
    out: dict[LabelKey, WriteCounters] = {}
    for row in rows:
        if row.object == WAL_OBJECT:
            continue
        if all(n is None for n in (row.writes, row.extends, row.writebacks, row.fsyncs)):
            continue
        out[_key(row)] = WriteCounters(
            writes=row.writes or 0.0,
            write_bytes=row.write_bytes or 0.0,
            write_time_ms=row.write_time or 0.0,
            extends=row.extends or 0.0,
            extend_bytes=row.extend_bytes or 0.0,
            extend_time_ms=row.extend_time or 0.0,
            writebacks=row.writebacks or 0.0,
            writeback_time_ms=row.writeback_time or 0.0,
            fsyncs=row.fsyncs or 0.0,
            fsync_time_ms=row.fsync_time or 0.0,
        )
    return out

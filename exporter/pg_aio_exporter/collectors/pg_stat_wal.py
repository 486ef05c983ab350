"""WAL (PostgreSQL 14+): how much WAL is written, and how long its writes and syncs take, under
one set of names on every version.

PostgreSQL 18 moved WAL write and sync counts and times out of pg_stat_wal (wal_write, wal_sync,
wal_write_time, wal_sync_time are gone) into pg_stat_io's rows with object 'wal'. Context
'normal' of those rows is what pg_stat_wal counted before (writes of WAL buffers by XLogWrite,
fsyncs by issue_xlog_fsync; 'init' is the writes and fsyncs that create a new segment, which 17
did not count either). Any backend type may flush WAL (client backends at commit, walwriter,
checkpointer), so the rows are summed. Times are measured only with track_wal_io_timing on
(track_io_timing is not enough), on every version.
"""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.collectors.base import Counter, select
from pg_aio_exporter.collectors.intervals import (
    WalCounters,
    WalSnapshot,
    wal_delta,
    wal_figures,
)
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG14, PG18
from pg_aio_exporter.vocabulary import WAL_OBJECT

# pg_stat_wal as w; on 18 the writes and syncs come from pg_stat_io's wal rows, summed (io).
COUNTERS = (
    Counter(
        "records",
        "pg_stat_wal_records",
        "WAL records generated.",
        sources=((PG14, "w.wal_records"),),
    ),
    Counter(
        "fpi", "pg_stat_wal_fpi", "Full page images written to WAL.", sources=((PG14, "w.wal_fpi"),)
    ),
    Counter(
        "wal_bytes",
        "pg_stat_wal_bytes",
        "WAL generated, in bytes.",
        sources=((PG14, "w.wal_bytes"),),
    ),
    Counter(
        "buffers_full",
        "pg_stat_wal_buffers_full",
        "WAL writes forced because wal_buffers was full.",
        sources=((PG14, "w.wal_buffers_full"),),
    ),
    Counter(
        "writes",
        "pg_aio_wal_writes",
        "WAL buffer writes (PG 14-17 pg_stat_wal.wal_write; 18 pg_stat_io wal rows).",
        sources=((PG14, "w.wal_write"), (PG18, "io.writes")),
    ),
    Counter(
        "write_time",
        "pg_aio_wal_write_time_seconds",
        "Time spent writing WAL; needs track_wal_io_timing.",
        0.001,
        sources=((PG14, "w.wal_write_time"), (PG18, "io.write_time")),
    ),
    Counter(
        "syncs",
        "pg_aio_wal_syncs",
        "WAL syncs to disk (PG 14-17 pg_stat_wal.wal_sync; 18 pg_stat_io wal rows).",
        sources=((PG14, "w.wal_sync"), (PG18, "io.syncs")),
    ),
    Counter(
        "sync_time",
        "pg_aio_wal_sync_time_seconds",
        "Time spent syncing WAL to disk; needs track_wal_io_timing.",
        0.001,
        sources=((PG14, "w.wal_sync_time"), (PG18, "io.sync_time")),
    ),
)
_IO_WAL = (
    "(SELECT coalesce(sum(writes), 0)::float8 AS writes,"
    " coalesce(sum(write_time), 0)::float8 AS write_time,"
    " coalesce(sum(fsyncs), 0)::float8 AS syncs, coalesce(sum(fsync_time), 0)::float8 AS sync_time,"
    " extract(epoch FROM max(stats_reset))::float8 AS stats_reset"
    f" FROM pg_stat_io WHERE object = '{WAL_OBJECT}' AND context = 'normal') io"
)


def sql(version_num: int) -> str:
    if version_num >= PG18:  # the reset of the rows the writes and syncs come from
        reset, views = "io.stats_reset", f"pg_stat_wal w, {_IO_WAL}"
    else:
        reset, views = "extract(epoch FROM w.stats_reset)::float8", "pg_stat_wal w"
    return (
        "SELECT extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time,"
        " current_setting('track_wal_io_timing')::bool AS track_wal_io_timing,"
        f" {select(COUNTERS, version_num)}, {reset} AS stats_reset FROM {views}"
    )


SQL_BEFORE_18 = sql(PG14)
SQL_18 = sql(PG18)


@dataclass(frozen=True, slots=True)
class WalRow:
    """The row of the collector's SQL: COUNTERS, the same names on every version."""

    start_time: float
    track_wal_io_timing: bool
    records: float
    fpi: float
    wal_bytes: float
    buffers_full: float
    writes: float
    write_time: float
    syncs: float
    sync_time: float
    stats_reset: float | None


def wal_snapshot(rows: list[WalRow]) -> WalSnapshot | None:
    """This poll's WAL counters, as the interval math takes them."""
    if not rows:
        return None
    row = rows[0]
    return WalSnapshot(
        WalCounters(
            writes=row.writes,
            write_time_ms=row.write_time,
            syncs=row.syncs,
            sync_time_ms=row.sync_time,
            records=row.records,
            fpi=row.fpi,
            wal_bytes=row.wal_bytes,
            buffers_full=row.buffers_full,
        ),
        stats_reset=row.stats_reset,
        start_time=row.start_time,
        track_wal_io_timing=row.track_wal_io_timing,
    )


class PgStatWalCollector:
    name = "pg_stat_wal"
    labels = ()
    families = (
        *(c.series for c in COUNTERS),
        "pg_aio_wal_write_latency_seconds",
        "pg_aio_wal_sync_latency_seconds",
    )
    since = PG14
    row_type = WalRow

    def __init__(self) -> None:
        self._previous: WalSnapshot | None = None

    def query(self, version_num: int) -> str | None:
        if version_num < self.since:
            return None
        return SQL_18 if version_num >= PG18 else SQL_BEFORE_18

    def snapshot(self, rows: list[WalRow]) -> WalSnapshot | None:
        return wal_snapshot(rows)

    def collect(self, rows: list[WalRow], out: MetricSet) -> None:
        snapshot = wal_snapshot(rows)
        if snapshot is None:
            return
        for counter in COUNTERS:
            counter.publish_from(rows[0], out)
        delta = wal_delta(self._previous, snapshot)
        timing = self._previous is not None and self._previous.track_wal_io_timing
        figures = (
            None if delta is None else wal_figures(delta, timing and snapshot.track_wal_io_timing)
        )
        if figures is not None and figures.write_latency_seconds is not None:
            out.gauge(
                "pg_aio_wal_write_latency_seconds",
                "Time per WAL write over the last poll interval; needs track_wal_io_timing.",
                figures.write_latency_seconds,
            )
        if figures is not None and figures.sync_latency_seconds is not None:
            out.gauge(
                "pg_aio_wal_sync_latency_seconds",
                "Time per WAL sync over the last poll interval (commits wait for it);"
                " needs track_wal_io_timing.",
                figures.sync_latency_seconds,
            )
        self._previous = snapshot

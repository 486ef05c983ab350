"""Checkpointer and background writer (PostgreSQL 10+): why and how the checkpointer writes,
and whether the background writer keeps up, under one set of names on every version.

PostgreSQL 17 moved the checkpointer's counters out of pg_stat_bgwriter into
pg_stat_checkpointer (checkpoints_timed -> num_timed, checkpoints_req -> num_requested,
checkpoint_write_time -> write_time, checkpoint_sync_time -> sync_time, buffers_checkpoint ->
buffers_written) and dropped buffers_backend (client backends' writes are in pg_stat_io now).
Requested checkpoints come from WAL reaching max_wal_size (or a CHECKPOINT command);
maxwritten_clean counts background writer rounds stopped at bgwriter_lru_maxpages.
"""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.collectors.base import Counter, select
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10, PG17

# pg_stat_checkpointer (17+) as c, or pg_stat_bgwriter as b before; the background writer's
# counters are pg_stat_bgwriter's (b) throughout.
COUNTERS = (
    Counter(
        "timed",
        "pg_aio_checkpoints_timed",
        "Checkpoints started by checkpoint_timeout.",
        sources=((PG10, "b.checkpoints_timed"), (PG17, "c.num_timed")),
    ),
    Counter(
        "requested",
        "pg_aio_checkpoints_requested",
        "Checkpoints requested: WAL reached max_wal_size, or a CHECKPOINT command.",
        sources=((PG10, "b.checkpoints_req"), (PG17, "c.num_requested")),
    ),
    Counter(
        "write_time",
        "pg_aio_checkpoint_write_time_seconds",
        "Time checkpoints spent writing buffers (paced by checkpoint_completion_target).",
        0.001,
        sources=((PG10, "b.checkpoint_write_time"), (PG17, "c.write_time")),
    ),
    Counter(
        "sync_time",
        "pg_aio_checkpoint_sync_time_seconds",
        "Time checkpoints spent syncing files to disk.",
        0.001,
        sources=((PG10, "b.checkpoint_sync_time"), (PG17, "c.sync_time")),
    ),
    Counter(
        "buffers_written",
        "pg_aio_checkpoint_buffers_written",
        "Buffers written by checkpoints.",
        sources=((PG10, "b.buffers_checkpoint"), (PG17, "c.buffers_written")),
    ),
    Counter(
        "buffers_clean",
        "pg_aio_bgwriter_buffers_clean",
        "Buffers written by the background writer.",
        sources=((PG10, "b.buffers_clean"),),
    ),
    Counter(
        "maxwritten_clean",
        "pg_aio_bgwriter_maxwritten_clean",
        "Background writer rounds stopped at bgwriter_lru_maxpages.",
        sources=((PG10, "b.maxwritten_clean"),),
    ),
    Counter(
        "buffers_alloc",
        "pg_aio_bgwriter_buffers_alloc",
        "Buffers allocated.",
        sources=((PG10, "b.buffers_alloc"),),
    ),
)


def sql(version_num: int) -> str:
    views = (
        "pg_stat_checkpointer c, pg_stat_bgwriter b"
        if version_num >= PG17
        else "pg_stat_bgwriter b"
    )
    return (
        f"SELECT {select(COUNTERS, version_num)},"
        f" extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time FROM {views}"
    )


SQL_BEFORE_17 = sql(PG10)
SQL_17 = sql(PG17)


@dataclass(frozen=True, slots=True)
class CheckpointerRow:
    """The row of the collector's SQL: COUNTERS, the same names on every version."""

    timed: float
    requested: float
    write_time: float
    sync_time: float
    buffers_written: float
    buffers_clean: float
    maxwritten_clean: float
    buffers_alloc: float
    start_time: float


@dataclass(frozen=True)
class CheckpointerCounts:
    """The view's snapshot: the counts the report's write side reads."""

    timed: float
    requested: float
    buffers_written: float
    buffers_clean: float
    maxwritten_clean: float
    start_time: float  # postmaster start: counts of two restarts do not subtract


class CheckpointerCollector:
    name = "checkpointer"
    labels = ()
    families = tuple(c.series for c in COUNTERS)
    since = PG10
    row_type = CheckpointerRow

    def query(self, version_num: int) -> str | None:
        return SQL_17 if version_num >= PG17 else SQL_BEFORE_17

    def snapshot(self, rows: list[CheckpointerRow]) -> CheckpointerCounts | None:
        if not rows:
            return None
        row = rows[0]
        return CheckpointerCounts(
            timed=row.timed,
            requested=row.requested,
            buffers_written=row.buffers_written,
            buffers_clean=row.buffers_clean,
            maxwritten_clean=row.maxwritten_clean,
            start_time=row.start_time,
        )

    def collect(self, rows: list[CheckpointerRow], out: MetricSet) -> None:
        for counter in COUNTERS:
            counter.publish_from(rows[0], out)

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

from pg_aio_exporter.collectors.base import Row
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10, PG17

_BGWRITER = (
    "b.buffers_clean::float8 AS buffers_clean, b.maxwritten_clean::float8 AS maxwritten_clean,"
    " b.buffers_alloc::float8 AS buffers_alloc,"
    " extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time"
)
SQL_BEFORE_17 = (
    "SELECT b.checkpoints_timed::float8 AS timed, b.checkpoints_req::float8 AS requested,"
    " b.checkpoint_write_time AS write_time, b.checkpoint_sync_time AS sync_time,"
    f" b.buffers_checkpoint::float8 AS buffers_written, {_BGWRITER} FROM pg_stat_bgwriter b"
)
SQL_17 = (
    "SELECT c.num_timed::float8 AS timed, c.num_requested::float8 AS requested,"
    " c.write_time, c.sync_time, c.buffers_written::float8 AS buffers_written, "
    f"{_BGWRITER} FROM pg_stat_checkpointer c, pg_stat_bgwriter b"
)

# Counter name (without _total), column, help, scale (times are in ms).
COUNTERS = (
    ("pg_aio_checkpoints_timed", "timed", "Checkpoints started by checkpoint_timeout.", 1.0),
    (
        "pg_aio_checkpoints_requested",
        "requested",
        "Checkpoints requested: WAL reached max_wal_size, or a CHECKPOINT command.",
        1.0,
    ),
    (
        "pg_aio_checkpoint_write_time_seconds",
        "write_time",
        "Time checkpoints spent writing buffers (paced by checkpoint_completion_target).",
        0.001,
    ),
    (
        "pg_aio_checkpoint_sync_time_seconds",
        "sync_time",
        "Time checkpoints spent syncing files to disk.",
        0.001,
    ),
    (
        "pg_aio_checkpoint_buffers_written",
        "buffers_written",
        "Buffers written by checkpoints.",
        1.0,
    ),
    (
        "pg_aio_bgwriter_buffers_clean",
        "buffers_clean",
        "Buffers written by the background writer.",
        1.0,
    ),
    (
        "pg_aio_bgwriter_maxwritten_clean",
        "maxwritten_clean",
        "Background writer rounds stopped at bgwriter_lru_maxpages.",
        1.0,
    ),
    ("pg_aio_bgwriter_buffers_alloc", "buffers_alloc", "Buffers allocated.", 1.0),
)
COLUMNS = tuple(column for _, column, _, _ in COUNTERS)


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
    since = PG10

    def query(self, version_num: int) -> str | None:
        return SQL_17 if version_num >= PG17 else SQL_BEFORE_17

    def snapshot(self, rows: list[Row]) -> CheckpointerCounts | None:
        if not rows:
            return None
        row = rows[0]
        return CheckpointerCounts(**{f: row[f] for f in CheckpointerCounts.__dataclass_fields__})

    def collect(self, rows: list[Row], out: MetricSet) -> None:
        for metric, column, doc, scale in COUNTERS:
            out.counter(metric, doc, rows[0][column] * scale)

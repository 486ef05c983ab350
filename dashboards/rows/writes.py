"""The overview's write row: time per write and per MiB written (the rules' write_formulas), WAL
(wal_formulas), who writes shared buffers, and the sessions waiting on writes
(write_wait_sessions by wait event)."""

from __future__ import annotations

from alerts import promql

from dashboards.figures import (
    DEFAULT_CLASS,
    MAX_WAL_SYNC,
    NOW,
    OVER,
    ROW_LEGEND,
    WRITE_LOCK_EVENTS,
    WRITE_WAIT_EVENTS,
    write_figure,
)
from dashboards.panels import Grid, Item, Q, graph
from pg_aio_exporter.vocabulary import MIB, WRITE_OPERATIONS

# The write waits of PgAioStorageSaturatedByWrites, one series per wait event.
BY_WAIT = promql.by(("target", "wait_event_type", "wait_event"))


def panels(g: Grid) -> list[Item]:
    """Write time per MiB and per operation, WAL write and sync time, who writes, write waits."""
    wal = promql.wal_formulas(NOW)
    waits = promql.write_wait_sessions(NOW, WRITE_WAIT_EVENTS, WRITE_LOCK_EVENTS, BY_WAIT)
    return [
        g.row("Writes: latency, WAL, who writes"),
        g.place(
            graph(
                "Write time per MiB",
                f"Time per MiB of buffer writes and of relation extension {OVER} "
                "(as pg_aio_target:write_seconds_per_byte, per row). Writes land in the OS page "
                "cache: time per MiB rises when the kernel throttles dirty pages or the volume "
                "is saturated. Needs track_io_timing.",
                [
                    Q(write_figure("write_seconds_per_byte", scale=MIB), f"write {ROW_LEGEND}"),
                    Q(write_figure("extend_seconds_per_byte", scale=MIB), f"extend {ROW_LEGEND}"),
                ],
                "s",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Write time per operation",
                f"Time per buffer write, relation extension, writeback request and data file "
                f"fsync {OVER} (as pg_aio_target:<op>_latency_seconds, per row). The "
                "checkpointer's fsyncs at the end of a checkpoint are the slowest.",
                [
                    Q(write_figure(f"{op}_latency_seconds"), f"{op} {ROW_LEGEND}")
                    for op in WRITE_OPERATIONS
                ],
                "s",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "WAL write and sync time",
                f"Time per WAL write and per WAL sync {OVER} (as "
                "pg_aio_target:wal_write_latency_seconds, wal_sync_latency_seconds; the same "
                "names on PostgreSQL 16, 17 and 18). Every commit waits for a sync: the dashed "
                "line is PgAioWalSyncLatencyHigh's threshold for the default storage class "
                f"({DEFAULT_CLASS}). Needs track_wal_io_timing.",
                [
                    Q(wal["wal_write_latency_seconds"].expr, "{{target}} write"),
                    Q(wal["wal_sync_latency_seconds"].expr, "{{target}} sync"),
                ],
                "s",
                threshold=MAX_WAL_SYNC,
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Who writes shared buffers",
                f"Shared buffers written per second by backend type {OVER} (relation, context "
                "normal). checkpointer: at checkpoints; background writer: ahead of need; client "
                "backend: a query had to clean a buffer itself because the background writer "
                "fell behind (PgAioBackendsWritingBuffers).",
                [
                    Q(
                        "sum by (target, backend_type) ("
                        + NOW.rate("pg_stat_io_write_bytes_total", *promql.BUFFER_WRITES)
                        + ")",
                        "{{target}} {{backend_type}}",
                    )
                ],
                "Bps",
                stacked=True,
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Sessions waiting on writes",
                f"Average sessions (io workers aside) in write waits {OVER}: IO/DataFileWrite, "
                "DataFileExtend, DataFileFlush, DataFileSync, WalWrite, WalSync, ... and "
                "LWLock/WALWrite, sessions queueing behind another session's WAL flush (group "
                "commit). Many waiting while WAL sync time climbs: storage saturated by writes "
                "(PgAioStorageSaturatedByWrites).",
                [Q(waits.expr, "{{target}} {{wait_event_type}} / {{wait_event}}")],
                "none",
                stacked=True,
            ),
            12,
            8,
        ),
    ]

"""The one list of the report's checks, read and write, in the order their findings are listed
within a severity, and the one place they are run and sorted (the most severe first)."""

from __future__ import annotations

from collections.abc import Callable

from pg_aio_exporter.report.findings import reads, writes
from pg_aio_exporter.report.findings.baseline import baseline_not_a_storage_signal
from pg_aio_exporter.report.findings.combining import reads_not_combined
from pg_aio_exporter.report.findings.context import Check, Context, Finding
from pg_aio_exporter.report.findings.pool import io_worker_pool_saturated
from pg_aio_exporter.report.findings.workload_regression import workload_regression
from pg_aio_exporter.thresholds import SEVERITIES

CHECKS: tuple[Check, ...] = (
    workload_regression,
    reads.track_io_timing_off,
    reads.no_read_activity,
    reads.reads_not_yet_counted,
    reads.storage_saturated,
    reads.read_latency_high,
    io_worker_pool_saturated,
    reads.read_latency_regression,
    reads.wait_per_read_rose_with_read_size,
    baseline_not_a_storage_signal,
    reads_not_combined,
    reads.io_uring_available,
    reads.pending_restart,
    reads.stats_reset_during_window,
)
# The write checks read the window's write figures (writes.judged), when it has them.
WRITE_CHECKS: tuple[Callable[[Context, writes.Judged], Finding | None], ...] = (
    writes.track_wal_io_timing_off,
    writes.storage_saturated_by_writes,
    writes.wal_sync_latency_high,
    writes.write_latency_regression,
    writes.backends_writing_buffers,
)


def findings(ctx: Context) -> list[Finding]:
    """Every finding the data supports, the most severe first; within a severity, in the order
    of CHECKS, then WRITE_CHECKS."""
    found = [f for check in CHECKS if (f := check(ctx)) is not None]
    judged = writes.judged(ctx)
    if judged is not None:
        found += [f for check in WRITE_CHECKS if (f := check(ctx, judged)) is not None]
    return sorted(found, key=lambda f: -SEVERITIES.index(f.severity))

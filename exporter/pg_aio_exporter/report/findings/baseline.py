"""Why a baseline from another major version or io_method was no storage signal: the one
finding that says what storage_saturated and storage_saturated_by_writes left out."""

from __future__ import annotations

from typing import Any

from pg_aio_exporter.report.findings import reads, writes
from pg_aio_exporter.report.findings.context import Context, Finding


def _read_side(ctx: Context) -> str | None:
    """The reads' wait per byte against the baseline, in words, where storage_saturated would
    have taken it as a signal within one regime and did not come on its other signals."""
    t = ctx.thresholds
    share = ctx.summary.activity.read_wait_share(t.io_wait_events)
    found = ctx.regression()
    if not ctx.sampled or share is None or share <= t.min_read_wait_share:
        return None
    if not ctx.enough_reads or found is None or not found.saturating(t.baseline):
        return None
    if reads.storage_saturated(ctx) is not None:
        return None
    return f"reads wait {found.shown} the baseline's per MiB"


def _write_side(ctx: Context) -> str | None:
    """The same for buffer writes and storage_saturated_by_writes."""
    j = writes.judged(ctx)
    if j is None or not ctx.sampled or j.waiting <= j.t.min_write_wait_sessions:
        return None
    found = writes.write_regression(ctx, j)
    if found is None or not found.saturating(j.t.baseline):
        return None
    if writes.storage_saturated_by_writes(ctx, j) is not None:
        return None
    return f"buffer writes take {found.shown} the baseline's per MiB"


def baseline_not_a_storage_signal(ctx: Context) -> Finding | None:
    other = ctx.other_regime()
    if other is None or ctx.baseline is None:
        return None
    sides = [words for words in (_read_side(ctx), _write_side(ctx)) if words is not None]
    if not sides:
        return None
    now, then = ctx.summary.server, ctx.baseline.server
    evidence: dict[str, Any] = {
        "version": now.version,
        "io_method": now.io_method,
        "baseline_version": then.version,
        "baseline_io_method": then.io_method,
        "left_out": sides,
    }
    return Finding(
        "baseline_not_a_storage_signal",
        ctx.severity("baseline_not_a_storage_signal"),
        f"Sessions mostly waited on I/O and {' and '.join(sides)}, but {other}: that is no"
        " sign of slow storage, so the storage judgement leaves the baseline out.",
        evidence,
        "A new major version or io_method changes how much of each I/O overlaps other work,"
        " with no change in the storage (the alerts compare a server only with itself at the"
        " same major version and io_method). Judge faster or slower by workload time; judge"
        " storage by this window's latency against its storage class, or against a baseline"
        " saved on this version and io_method.",
    )

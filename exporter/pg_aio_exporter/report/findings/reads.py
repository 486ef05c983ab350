"""The read side's findings: timing, traffic, read latency against the storage class and the
baseline, storage saturation, and what the server's build and settings say (io_uring, pending
restarts, statistics resets). The io worker pool's finding is pool.py's, read combining's
combining.py's, the workload's workload_regression.py's."""

from __future__ import annotations

from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.report.findings.context import Context, Finding
from pg_aio_exporter.report.findings.intervals import SlowIntervals, read_intervals
from pg_aio_exporter.report.findings.pool import pool_busy, pool_queueing, pool_signals
from pg_aio_exporter.report.side import Regression, interval_json
from pg_aio_exporter.report.workload import WorkloadComparison


def track_io_timing_off(ctx: Context) -> Finding | None:
    server = ctx.summary.server
    # Off when pg_stat_io's reads or pg_settings said so; not read is not off.
    if ctx.summary.timed and server.track_io_timing is not False:
        return None
    return Finding(
        "track_io_timing_off",
        ctx.severity("PgAioTrackIoTimingOff"),
        "track_io_timing was off during the window: PostgreSQL measured no read wait, so this"
        " report shows none.",
        {"track_io_timing": server.track_io_timing, "on_at_every_poll": ctx.summary.timed},
        "ALTER SYSTEM SET track_io_timing = on; SELECT pg_reload_conf(); then run the report"
        " again. It reads the clock twice per I/O: pg_test_timing shows what that costs here.",
    )


def no_read_activity(ctx: Context) -> Finding | None:
    if ctx.enough_reads or ctx.reads_uncounted() or not ctx.summary.reads_read:
        return None  # not read is no "too little"
    minimum = ctx.thresholds.min_read_ops_per_second
    return Finding(
        "no_read_activity",
        ctx.severity("no_read_activity"),
        f"Too little read traffic to judge: {units.rate(ctx.reads_per_second)} reads/s counted,"
        f" below {units.rate(minimum)}/s.",
        {
            "reads_per_second": ctx.reads_per_second,
            "min_read_ops_per_second": minimum,
            "read_wait_sessions": ctx.read_wait_sessions if ctx.sampled else None,
        },
        "Run the report while the workload you care about runs (a longer --duration covers"
        " more of it); storage and io worker figures need reads to mean anything.",
    )


def reads_not_yet_counted(ctx: Context) -> Finding | None:
    if not ctx.reads_uncounted():
        return None
    counted = ctx.summary.total.wait_sessions
    return Finding(
        "reads_not_yet_counted",
        ctx.severity("reads_not_yet_counted"),
        f"{units.sessions(ctx.read_wait_sessions)} sessions waited on reads on average, but"
        f" pg_stat_io counted {units.rate(ctx.reads_per_second)} reads/s"
        + ("" if counted is None else f" worth {units.sessions(counted)} waiting sessions")
        + ".",
        {
            "read_wait_sessions": ctx.read_wait_sessions,
            "counted_read_wait_sessions": counted,
            "reads_per_second": ctx.reads_per_second,
        },
        "PostgreSQL adds a backend's I/O to pg_stat_io when its transaction ends or it goes"
        " idle: queries that read through the whole window are not in the per-read figures"
        " yet, while the sampled waits include them. Run the report over a window in which"
        " those queries finish, or read the sampled waits.",
    )


def slow_for_class(ctx: Context) -> tuple[bool, SlowIntervals | None]:
    """Reads above PgAioReadLatencyHigh's limit as the alert judges it: in at least min_share
    of the polls with reads (findings/intervals.py); by the window's average only where the
    window has no per-poll figures (a saved report from before them). With the polls' share
    found, or None."""
    intervals = read_intervals(ctx)
    if intervals is not None:
        return intervals.share >= ctx.thresholds.min_slow_read_share, intervals
    per_read, limit = ctx.seconds_per_read(), ctx.latency_limit()
    slow = per_read is not None and limit is not None and ctx.enough_reads and per_read > limit
    return slow, None


def read_latency_high(ctx: Context) -> Finding | None:
    per_read, limit = ctx.seconds_per_read(), ctx.latency_limit()
    slow, intervals = slow_for_class(ctx)
    if per_read is None or limit is None or not slow:
        return None
    evidence: dict[str, Any] = {
        "seconds_per_read": per_read,
        "max_seconds_per_read": limit,
        "storage_class": ctx.thresholds.storage.name,
        "reads_per_second": ctx.reads_per_second,
    }
    healthy = f"healthy {ctx.thresholds.storage.name} storage"
    summary = f"Reads wait {ctx.read_class_words()}: above what {healthy} needs for reads of"
    summary += " this size."
    if intervals is not None:
        evidence |= intervals.evidence(ctx.thresholds.min_slow_read_share)
        summary = (
            f"Reads wait {ctx.read_class_words()} over the window, and waited longer than"
            f" {healthy} needs for reads of their size in {intervals.words('reads')}."
        )
    return Finding(
        "read_latency_high",
        ctx.severity("PgAioReadLatencyHigh"),
        summary,
        evidence,
        "See storage_saturated if sessions queue on reads; otherwise check the volume's"
        " latency and throttling (cloud volumes: IOPS and throughput limits).",
    )


def _at_volume_limit(ctx: Context) -> str | None:
    """Reads running at the volume's configured IOPS or throughput limit, in words."""
    t, total = ctx.thresholds, ctx.summary.total
    share = t.volume_limit_share
    if t.volume_max_ops is not None and total.reads_per_second >= share * t.volume_max_ops:
        return (
            f"reads run at the volume's limit ({units.rate(total.reads_per_second)} reads/s of"
            f" {units.rate(t.volume_max_ops)} IOPS)"
        )
    if t.volume_max_bytes is not None and total.bytes_per_second >= share * t.volume_max_bytes:
        return (
            f"reads run at the volume's limit ({units.mib(total.bytes_per_second)}/s of"
            f" {units.mib(t.volume_max_bytes)}/s)"
        )
    return None


def storage_saturated(ctx: Context) -> Finding | None:
    """Storage-bound: most of the sessions' active time waits on reads, and the reads are slow
    for the storage class, slower than the baseline, or at the volume's limits."""
    t = ctx.thresholds
    share = ctx.summary.activity.read_wait_share(t.io_wait_events)
    per_byte, per_read, limit = ctx.seconds_per_byte(), ctx.seconds_per_read(), ctx.latency_limit()
    if not ctx.sampled or share is None or share <= t.min_read_wait_share:
        return None
    if not ctx.enough_reads or per_byte is None or per_read is None or limit is None:
        return None
    evidence: dict[str, Any] = {
        "read_wait_share": share,
        "min_read_wait_share": t.min_read_wait_share,
        "read_wait_sessions": ctx.read_wait_sessions,
        "seconds_per_read": per_read,
        "seconds_per_byte": per_byte,
        "reads_per_second": ctx.reads_per_second,
        "storage_class": t.storage.name,
        "max_seconds_per_read": limit,
    }
    signals: list[str] = []
    if slow_for_class(ctx)[0]:
        signals.append(f"{ctx.read_class_words()}")
    found = ctx.storage_regression()
    if found is not None and found.saturating(t.baseline):
        # The alert's test, with the baseline file in place of the target's own median within
        # the regime (another one is left out: baseline.py).
        evidence |= {"baseline_seconds_per_byte": found.before, "latency_factor": t.latency_factor}
        signals.append(f"{found.shown} the baseline's wait per MiB")
    at_limit = _at_volume_limit(ctx)
    if at_limit is not None:
        evidence |= {"volume_max_ops": t.volume_max_ops, "volume_max_bytes": t.volume_max_bytes}
        signals.append(at_limit)
    if not signals:
        return None
    evidence["signals"] = signals
    summary = (
        f"Storage is saturated (reads are storage-bound): {units.percent(share)} of active time"
        f" waits on reads ({units.sessions(ctx.read_wait_sessions)} sessions on average),"
        f" {'; '.join(signals)} ({units.per_mib(per_byte)})."
    )
    advice = (
        "Storage, not PostgreSQL, sets the pace: more io workers or another io_method will not"
        " help. Check the volume's IOPS and throughput limits (cloud volumes throttle), give"
        " reads a faster volume, or read less: more shared_buffers, or plans that scan less."
    )
    if pool_queueing(ctx) and ctx.summary.server.io_method == "worker":
        evidence["io_worker_utilization"] = ctx.summary.activity.io_worker_utilization
        summary += " The io workers are busy too, so part of that wait is queueing for them."
        if pool_signals(ctx):
            advice = (
                f"Raise {ctx.summary.server.pool_setting} first (io_worker_pool_saturated) and"
                " run the report again: the wait that remains is the storage's. Then: " + advice
            )
    return Finding(
        "storage_saturated", ctx.severity("PgAioStorageSaturated"), summary, evidence, advice
    )


def read_latency_regression(ctx: Context) -> Finding | None:
    found = ctx.regression()
    factor = ctx.thresholds.regression_factor
    if found is None or not ctx.enough_reads or not found.regressed(ctx.thresholds.baseline):
        return None
    advice = (
        "Per byte, so larger combined reads cannot cause this: storage or contention got"
        f" slower. Compare the io_method, {ctx.summary.server.pool_setting} and sampled waits of"
        " the two runs, and the volume's limits."
    )
    then = ctx.baseline.server.io_method if ctx.baseline is not None else None
    workload = ctx.workload()
    severity = ctx.severity("PgAioReadLatencyRegression")
    if workload is not None and _not_slower_for_sure(workload):
        return _faster_despite_read_wait(ctx, workload, found, then)
    if ctx.summary.server.io_method == "worker" and then != "worker" and not pool_busy(ctx):
        advice += (
            f" The baseline read without io workers (io_method {then or 'none'}) and this"
            " pool is not busy: the added wait is the hand-off of each read to an io worker and"
            " back, which fast storage (page cache, NVMe) and a loaded CPU make dominant. Try"
            " io_method = 'sync' (or io_uring, where available; restart) and compare again."
        )
    summary = (
        f"Reads wait {found.shown} longer per byte than in the baseline:"
        f" {units.per_mib(found.now)} against {units.per_mib(found.before)}."
    )
    if workload is not None and workload.claim is None:
        summary += (
            " The workload comparison is undecided"
            f" ({units.ratio(workload.time_ratio)} of the baseline's time,"
            f" {units.interval(*workload.interval)}, {workload.basis}): it may have got slower,"
            " so the wait stands."
        )
    return Finding(
        "read_latency_regression",
        severity,
        summary,
        _regression_evidence(ctx, found, factor, workload),
        advice,
    )


def _regression_evidence(
    ctx: Context,
    found: Regression,
    factor: float,
    workload: WorkloadComparison | None,
) -> dict[str, Any]:
    return {
        "seconds_per_byte": found.now,
        "baseline_seconds_per_byte": found.before,
        "ratio": found.ratio,
        "interval": interval_json(found.margin),
        "factor": factor,
        "reads_per_second": ctx.reads_per_second,
        "workload_time_ratio": workload.time_ratio if workload is not None else None,
    }


def _not_slower_for_sure(workload: WorkloadComparison) -> bool:
    """The work was shown not slower: faster claimed beyond the margin (margin.py), or the
    whole interval at most 1. A point ratio below 1 with an interval reaching above it is no
    such showing: a real regression inside the noise would pass `--fail-on warning`."""
    return workload.claim == "faster" or workload.interval[1] <= 1


def _faster_despite_read_wait(
    ctx: Context, workload: WorkloadComparison, found: Regression, then: str | None
) -> Finding:
    """Read wait per byte rose while the work got done faster: an explanation, not a
    regression."""
    now_method = ctx.summary.server.io_method
    if now_method in ("worker", "io_uring"):
        why = (
            f"under io_method {now_method} the read wait counts the hand-off of each read and"
            " the stall not overlapped with other work, while the work itself overlapped more"
        )
    else:
        why = (
            "the reads come from the page cache or fast storage, where the wait is mostly the"
            " copy, and the statements spent less time elsewhere (CPU, other waits)"
        )
    if then is not None and then != now_method:
        why += f" (the baseline read with io_method {then})"
    return Finding(
        "read_latency_regression",
        "info",  # whatever the alert's severity: this explains a change, there is nothing to fix
        f"Reads wait {found.shown} longer per byte than in the baseline, yet the"
        f" workload {_not_slower(workload)}: {why}.",
        _regression_evidence(ctx, found, ctx.thresholds.regression_factor, workload),
        "Nothing to fix: judge by workload time. The wait per MiB explains where time goes;"
        " it does not measure speed across versions or io_methods (docs/report.md).",
    )


def _not_slower(workload: WorkloadComparison) -> str:
    """How much faster the work got, claimed only beyond its margin (margin.py): inside it, the
    time fell but may not have moved at all."""
    if workload.claim == "faster":
        return f"ran {units.ratio(1 / workload.time_ratio)} faster ({workload.basis})"
    return (
        f"was not slower ({units.ratio(workload.time_ratio)} of the baseline's time,"
        f" {units.interval(*workload.interval)}, {workload.basis}: too close to call faster)"
    )


def wait_per_read_rose_with_read_size(ctx: Context) -> Finding | None:
    if ctx.baseline is None or read_latency_regression(ctx) is not None:
        return None
    now, before = ctx.summary.total.figures, ctx.baseline.total.figures
    if now is None or before is None or now.latency_seconds is None:
        return None
    if not before.latency_seconds or before.size_bytes <= 0:
        return None
    per_read = now.latency_seconds / before.latency_seconds
    size = now.size_bytes / before.size_bytes
    if per_read <= 1 or size <= 1:
        return None
    found = ctx.regression()
    return Finding(
        "wait_per_read_rose_with_read_size",
        ctx.severity("wait_per_read_rose_with_read_size"),
        f"Each read waits {units.ratio(per_read)} longer than in the baseline, but reads are"
        f" {units.ratio(size)} larger ({units.size(before.size_bytes)} ->"
        f" {units.size(now.size_bytes)}): per byte the wait changed"
        f" {units.ratio(found.ratio) if found else 'unknown'}.",
        {
            "seconds_per_read_ratio": per_read,
            "read_size_ratio": size,
            "seconds_per_byte_ratio": found.ratio if found else None,
        },
        "Not a regression: PostgreSQL 18 combines up to io_combine_limit blocks into one read,"
        " so a read carries more data and takes longer. Compare the wait per MiB.",
    )


def io_uring_available(ctx: Context) -> Finding | None:
    server = ctx.summary.server
    if not server.io_uring_available or server.io_method == "io_uring":
        return None
    return Finding(
        "io_uring_available",
        ctx.severity("io_uring_available"),
        f"This PostgreSQL build accepts io_method=io_uring; it runs {server.io_method}.",
        {"io_method": server.io_method, "io_methods": list(server.io_methods)},
        "io_uring lets each backend submit its own reads to the kernel (no io worker hop)."
        " It needs a restart (ALTER SYSTEM SET io_method = 'io_uring'), a kernel that allows"
        " it (/proc/sys/kernel/io_uring_disabled = 0) and, in containers, a seccomp profile"
        " that permits the io_uring system calls (Docker's default blocks them). Compare"
        " before and after with --save and --baseline.",
    )


def pending_restart(ctx: Context) -> Finding | None:
    names = ctx.summary.server.pending_restart
    if not names:
        return None
    return Finding(
        "pending_restart",
        ctx.severity("PgAioPendingRestart"),
        f"Changed settings wait for a restart: {', '.join(names)}.",
        {"settings": list(names)},
        "The running server still uses the old values, and this report describes them. The"
        " next restart, planned or not, applies the new ones: measure again after it.",
    )


def stats_reset_during_window(ctx: Context) -> Finding | None:
    summary = ctx.summary
    if not summary.resets and not summary.restarts:
        return None
    what = []
    if summary.resets:
        what.append(f"pg_stat_io was reset {len(summary.resets)} time(s)")
    if summary.restarts:
        what.append(f"the server restarted {summary.restarts} time(s)")
    return Finding(
        "stats_reset_during_window",
        ctx.severity("PgAioStatsReset"),
        f"During the window {' and '.join(what)}: the read figures cover"
        f" {units.duration(summary.read_seconds)} of {units.duration(summary.duration)}.",
        {
            "resets": [units.timestamp(r) for r in summary.resets],
            "restarts": summary.restarts,
            "counted_seconds": summary.read_seconds,
            "window_seconds": summary.duration,
        },
        "The intervals across a reset or restart are left out; the rest of the window counts."
        " Run again without resets for a full window.",
    )

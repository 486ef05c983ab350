"""Findings: what the window's numbers support, each as pure function of the summary, the
thresholds and (optionally) a baseline window. A finding is emitted only when its data is there
and says so; missing data (no timing, no samples, too few reads) emits nothing or says that.

The conditions shared with the alert rules are the rules' own, read over the report's window
instead of a Prometheus range; where an alert compares with the target's own past (its median),
the report compares with the --baseline file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pg_aio_exporter.collectors import settings as aio_settings
from pg_aio_exporter.report import units
from pg_aio_exporter.report.side import Regression, against
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.workload import (
    STATEMENTS,
    StatementChange,
    WorkloadComparison,
    compare_workload,
)
from pg_aio_exporter.thresholds import SEVERITIES, StorageClass, Thresholds
from pg_aio_exporter.vocabulary import BLOCK_BYTES

BULK_READS = ("relation", "bulkread")  # object, context of large sequential scans


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # ok, info, warning, critical
    summary: str
    evidence: dict[str, Any]
    advice: str


@dataclass(frozen=True)
class Context:
    summary: Summary
    thresholds: Thresholds
    baseline: Summary | None = None

    @property
    def reads_per_second(self) -> float:
        return self.summary.total.reads_per_second

    @property
    def enough_reads(self) -> bool:
        """The alerts' traffic guard: below it, per-read figures are noise."""
        return self.reads_per_second >= self.thresholds.min_read_ops_per_second

    @property
    def read_wait_sessions(self) -> float:
        return self.summary.activity.read_wait_sessions(self.thresholds.io_wait_events)

    @property
    def sampled(self) -> bool:
        """The sessions' waits were sampled (not merely samples taken: pg_stat_activity read)."""
        return self.summary.waits_read

    def severity(self, alert: str) -> str:
        return self.thresholds.severities[alert]

    def seconds_per_read(self) -> float | None:
        figures = self.summary.total.figures
        return None if figures is None else figures.latency_seconds

    def seconds_per_byte(self) -> float | None:
        return self.summary.total.seconds_per_byte()

    def latency_limit(self) -> float | None:
        """PgAioReadLatencyHigh's limit for this window's average read size."""
        figures = self.summary.total.figures
        if figures is None:
            return None
        return self.thresholds.allowed_seconds_per_read(figures.size_bytes)

    def read_class_words(self) -> str | None:
        """Per-read wait judged by the target's storage class, and the class it looks like:
        "4.08 ms per 20 kB read: slow for network-ssd (up to 2.16 ms), usual for hdd"."""
        figures = self.summary.total.figures
        if figures is None or figures.latency_seconds is None:
            return None
        t, per_read, size = self.thresholds, figures.latency_seconds, figures.size_bytes
        return f"{units.ms(per_read)} per {units.size(size)} read: " + class_words(
            t, per_read, t.allowed_seconds_per_read(size), t.usual_for_reads(per_read, size)
        )

    def regression(self) -> Regression | None:
        """Read wait per byte against the baseline's, when both windows measured waits."""
        if self.baseline is None:
            return None
        return against(self.seconds_per_byte(), self.baseline.total.seconds_per_byte())

    def workload(self) -> WorkloadComparison | None:
        """Workload time now against the baseline: the answer to "faster or slower"."""
        if self.baseline is None:
            return None
        return compare_workload(self.baseline.workload, self.summary.workload)

    def reads_uncounted(self) -> bool:
        """Sessions waited on reads while pg_stat_io counted too few to judge: queries that
        read through the whole window, counted only when they end. The sampled wait is not
        held against the counted read time: under io_method=worker a session waits for its
        io workers several times longer than the read time pg_stat_io counts, even when every
        read is counted (docs/report.md)."""
        if not self.sampled or self.enough_reads:
            return False
        return self.read_wait_sessions >= self.thresholds.min_uncounted_read_sessions


Check = Callable[[Context], Finding | None]


def class_words(t: Thresholds, value: float, limit: float, usual: StorageClass | None) -> str:
    """ "slow for network-ssd (up to 2.16 ms), usual for hdd": `value` against the target's
    class's `limit`, and the fastest class for which it is `usual`."""
    own = t.storage.name
    if value <= limit:
        said = f"usual for {own} (up to {units.ms(limit)})"
        if usual is not None and usual.name != own:
            said += f", as fast as {usual.name}"
        return said
    said = f"slow for {own} (up to {units.ms(limit)})"
    return said + (f", usual for {usual.name}" if usual else ", slow for every storage class")


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
        "info",
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
        "info",
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


def read_latency_high(ctx: Context) -> Finding | None:
    per_read, limit = ctx.seconds_per_read(), ctx.latency_limit()
    if per_read is None or limit is None or not ctx.enough_reads or per_read <= limit:
        return None
    return Finding(
        "read_latency_high",
        ctx.severity("PgAioReadLatencyHigh"),
        f"Reads wait {ctx.read_class_words()}: above what healthy"
        f" {ctx.thresholds.storage.name} storage needs for reads of this size.",
        {
            "seconds_per_read": per_read,
            "max_seconds_per_read": limit,
            "storage_class": ctx.thresholds.storage.name,
            "reads_per_second": ctx.reads_per_second,
        },
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
    if per_read > limit:
        signals.append(f"{ctx.read_class_words()}")
    found = ctx.regression()
    if found is not None and found.saturating(t.baseline):
        # The alert's test, with the baseline file in place of the target's own median.
        evidence |= {"baseline_seconds_per_byte": found.before, "latency_factor": t.latency_factor}
        signals.append(f"{units.ratio(found.ratio)} the baseline's wait per MiB")
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
    if _pool_busy(ctx) and ctx.summary.server.io_method == "worker":
        evidence["io_worker_utilization"] = ctx.summary.activity.io_worker_utilization
        summary += " The io workers are busy too, so part of that wait is queueing for them."
        if _pool_signals(ctx):
            advice = (
                f"Raise {ctx.summary.server.pool_setting} first (io_worker_pool_saturated) and"
                " run the report again: the wait that remains is the storage's. Then: " + advice
            )
    return Finding(
        "storage_saturated", ctx.severity("PgAioStorageSaturated"), summary, evidence, advice
    )


def _pool_busy(ctx: Context) -> bool:
    utilization = ctx.summary.activity.io_worker_utilization
    return utilization is not None and utilization > ctx.thresholds.max_utilization


def _overflow_sessions(ctx: Context) -> float:
    """Clients reading by themselves because the io worker queue was full. Under
    io_method=worker PostgreSQL also reads single blocks in place (index lookups) whatever the
    pool's load, so these count only while the pool is busy."""
    if ctx.summary.server.io_method != "worker" or not _pool_busy(ctx):
        return 0.0
    return ctx.summary.activity.sync_read_sessions


def _pinned_share(ctx: Context) -> float | None:
    """PostgreSQL 19: the live pool's average size against io_max_workers."""
    server = ctx.summary.server
    if not server.self_sizing_pool:
        return None
    return ctx.summary.activity.pool_share(server.settings["io_max_workers"])


def _pool_signals(ctx: Context) -> list[str]:
    """What shows reads queueing for the io workers. PostgreSQL 19 grows the pool by itself
    while they queue, so there they count only while the pool is pinned at io_max_workers."""
    t, activity = ctx.thresholds, ctx.summary.activity
    if ctx.summary.server.self_sizing_pool:
        share = _pinned_share(ctx)
        if share is None or share < t.min_pool_share:
            return []
    signals = []
    if _pool_busy(ctx):
        signals.append("utilization")
    if activity.submission_queue_sessions > t.max_submission_queue_sessions:
        signals.append("submission_queue")
    if _overflow_sessions(ctx) > t.max_sync_read_sessions:
        signals.append("clients_reading_themselves")
    return signals


def pool_demand(ctx: Context) -> float | None:
    """io workers' worth of work, on average: what the pool carried or was handed (I/Os
    submitted and not done, from pg_aios), plus sessions queueing for it or reading instead."""
    activity = ctx.summary.activity
    if activity.busy_io_workers is None:
        return None
    carried = max(activity.busy_io_workers, activity.submitted_average)
    return carried + activity.submission_queue_sessions + _overflow_sessions(ctx)


def suggested_io_workers(ctx: Context) -> int | None:
    """Enough workers for the measured demand at the busy share the alert allows; at least
    one more than now (io_workers on 18, io_max_workers on 19), at most what PostgreSQL
    accepts."""
    server, demand, t = ctx.summary.server, pool_demand(ctx), ctx.thresholds
    workers = (
        int(server.settings["io_max_workers"])
        if server.self_sizing_pool
        else ctx.summary.activity.io_workers
    )
    if workers is None or demand is None:
        return None
    return min(t.max_io_workers, max(workers + 1, math.ceil(demand / t.max_utilization)))


def _workers(count: int | None) -> str:
    return "workers not visible" if count is None else f"{count} worker{'s' * (count != 1)}"


def _pool_advice(ctx: Context, suggested: int | None, demand: float | None) -> str:
    t, server, activity = ctx.thresholds, ctx.summary.server, ctx.summary.activity
    setting = server.pool_setting
    if suggested is None or demand is None:
        return f"Raise {setting} (ALTER SYSTEM SET {setting} = ...; SELECT pg_reload_conf())."
    now = int(server.settings[setting]) if server.self_sizing_pool else activity.io_workers
    advice = (
        f"Raise {setting} from {now} to {suggested}. Measured: the pool was handed"
        f" {units.sessions(demand)} workers' worth of I/O on average"
        f" ({units.sessions(activity.submitted_average)} I/Os submitted and not done,"
        f" {units.sessions(activity.busy_io_workers or 0.0)} workers busy); {suggested}"
        f" workers carry that at {units.percent(t.max_utilization)} busy."
        f" ALTER SYSTEM SET {setting} = {suggested}; SELECT pg_reload_conf(); (no"
        " restart), then run the report again: if sessions still wait on reads, storage"
        " is the limit."
    )
    if server.self_sizing_pool:
        launch = server.settings.get("io_worker_launch_interval_seconds")
        every = "" if launch is None else f", one every {units.ms(launch)}"
        advice += (
            " If the load comes in bursts, raise io_min_workers too (now"
            f" {units.count(server.settings.get('io_min_workers', 0))}): the pool starts each"
            f" burst from it and grows only while reads queue{every}."
        )
    return advice


def io_worker_pool_saturated(ctx: Context) -> Finding | None:
    if not ctx.sampled:
        return None
    signals = _pool_signals(ctx)
    if not signals:
        return None
    t, activity, server = ctx.thresholds, ctx.summary.activity, ctx.summary.server
    workers, demand = activity.io_workers, pool_demand(ctx)
    suggested = suggested_io_workers(ctx)
    said = {
        "utilization": f"io workers busy {units.percent(activity.io_worker_utilization)} of the"
        f" time (above {units.percent(t.max_utilization)})",
        "submission_queue": f"{units.sessions(activity.submission_queue_sessions)} sessions"
        " waiting for the submission queue",
        "clients_reading_themselves": f"{units.sessions(activity.sync_read_sessions)} client"
        " sessions reading by themselves (IO/DataFileRead), which PostgreSQL does when the io"
        " worker queue is full",
    }
    reasons = "; ".join(said[s] for s in signals)
    # On 19 the names say what is measured: workers running, not a setting called io_workers.
    running = "running_io_workers" if server.self_sizing_pool else "io_workers"
    evidence: dict[str, Any] = {
        "signals": signals,
        running: workers,
        "io_worker_utilization": activity.io_worker_utilization,
        "max_utilization": t.max_utilization,
        "submission_queue_sessions": activity.submission_queue_sessions,
        "max_submission_queue_sessions": t.max_submission_queue_sessions,
        "sync_read_sessions": activity.sync_read_sessions,
        "max_sync_read_sessions": t.max_sync_read_sessions,
        "submitted_io_average": activity.submitted_average,
        "pool_demand_workers": demand,
        f"suggested_{server.pool_setting}": suggested,
    }
    if server.self_sizing_pool:
        ceiling = server.settings["io_max_workers"]
        evidence |= {
            "io_max_workers": int(ceiling),
            "io_min_workers": server.settings.get("io_min_workers"),
            "pool_average_workers": activity.pool_average,
            "pool_share": _pinned_share(ctx),
            "min_pool_share": t.min_pool_share,
            "io_worker_max_utilization": activity.max_utilization(ceiling),
        }
        summary = (
            f"The io worker pool is pinned at io_max_workers ({units.count(ceiling)}:"
            f" {units.sessions(activity.pool_average or 0.0)} running on average) while reads"
            f" queue: {reasons}."
        )
    else:
        summary = f"The io worker pool ({_workers(workers)}) is too small: {reasons}."
    return Finding(
        "io_worker_pool_saturated",
        ctx.severity("PgAioWorkerPoolSaturated"),
        summary,
        evidence,
        _pool_advice(ctx, suggested, demand),
    )


def io_uring_available(ctx: Context) -> Finding | None:
    server = ctx.summary.server
    if not server.io_uring_available or server.io_method == "io_uring":
        return None
    return Finding(
        "io_uring_available",
        "info",
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
    if workload is not None and workload.time_ratio < 1:
        return _faster_despite_read_wait(ctx, workload, found, then)
    if ctx.summary.server.io_method == "worker" and then != "worker" and not _pool_busy(ctx):
        advice += (
            f" The baseline read without io workers (io_method {then or 'none'}) and this"
            " pool is not busy: the added wait is the hand-off of each read to an io worker and"
            " back, which fast storage (page cache, NVMe) and a loaded CPU make dominant. Try"
            " io_method = 'sync' (or io_uring, where available; restart) and compare again."
        )
    return Finding(
        "read_latency_regression",
        severity,
        f"Reads wait {units.ratio(found.ratio)} longer per byte than in the baseline:"
        f" {units.per_mib(found.now)} against {units.per_mib(found.before)}.",
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
        "factor": factor,
        "reads_per_second": ctx.reads_per_second,
        "workload_time_ratio": workload.time_ratio if workload is not None else None,
    }


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
        "info",
        f"Reads wait {units.ratio(found.ratio)} longer per byte than in the baseline, yet the"
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


def _listed_statement(change: StatementChange) -> dict[str, Any]:
    now = change.now
    return {
        "text": now.text,
        "database": now.database,
        "user": now.user,
        "ratio": change.ratio,
        "seconds_per_call": now.seconds_per_call,
        "baseline_seconds_per_call": change.before.seconds_per_call,
        "read_mib_per_call": now.read_mib_per_call,
        "read_wait_share": now.read_share,
        "baseline_read_wait_share": change.before.read_share,
    }


def workload_regression(ctx: Context) -> Finding | None:
    """The work took longer than in the baseline, by more than the regression factor."""
    workload = ctx.workload()
    factor = ctx.thresholds.workload_regression_factor
    if workload is None or workload.time_ratio <= factor or not workload.margin.slower:
        return None
    slowed = workload.slowed()
    grew = workload.read_wait_grew
    if grew:
        cause = "Read waits grew with it: I/O."
        advice = (
            "The added time is read wait: check storage (its latency and limits), the"
            f" io_method and {ctx.summary.server.pool_setting} (the verdict's storage and io"
            " worker lines, the findings above)."
        )
    elif grew is None:
        cause = "Per-statement read waits are not known on this basis."
        advice = (
            "Load pg_stat_statements (shared_preload_libraries) to see which statements"
            " slowed; compare the sampled waits of the two windows."
        )
    else:
        cause = "Read waits did not grow as much: CPU or plan."
        advice = (
            "The added time is not read wait: run EXPLAIN (ANALYZE, BUFFERS) on the listed"
            " statements on both servers and compare plans and row counts; check CPU."
        )
    basis = (
        "time per statement call at the baseline's mix"
        if workload.basis == STATEMENTS
        else "DB time per transaction"
    )
    return Finding(
        "workload_regression",
        "warning",
        f"The workload took {units.ratio(workload.time_ratio)} as long as in the baseline"
        f" ({basis}: {units.ms(workload.after)} against {units.ms(workload.before)}). {cause}",
        {
            "time_ratio": workload.time_ratio,
            "basis": workload.basis,
            "factor": factor,
            "matched_statements": workload.matched_statements,
            "read_wait_grew": grew,
            "read_wait_per_call": workload.read_after,
            "baseline_read_wait_per_call": workload.read_before,
            "statements": [_listed_statement(c) for c in slowed],
        },
        advice,
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
        "info",
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


def reads_not_combined(ctx: Context) -> Finding | None:
    server, t = ctx.summary.server, ctx.thresholds
    if not server.aio:
        return None
    rows: list[dict[str, Any]] = []
    for key in ctx.summary.reading_rows():
        reads = ctx.summary.reads(key)
        figures = reads.figures
        if key[1:] != BULK_READS or figures is None:
            continue
        if reads.reads_per_second < t.min_read_ops_per_second:
            continue
        if figures.size_bytes <= t.max_uncombined_read_size_bytes:
            rows.append(
                {
                    "backend_type": key[0],
                    "object": key[1],
                    "context": key[2],
                    "read_size_bytes": figures.size_bytes,
                    "reads_per_second": reads.reads_per_second,
                }
            )
    if not rows:
        return None
    settings = server.settings
    shown = ", ".join(
        f"{units.size(r['read_size_bytes'])} per read ({r['backend_type']})" for r in rows
    )
    return Finding(
        "reads_not_combined",
        "warning",
        f"Sequential scans read {shown}: PostgreSQL 18 does not combine blocks here, so the AIO"
        " gain is lost.",
        {
            "rows": rows,
            **{s.key: settings.get(s.key) for s in aio_settings.AIO_SETTINGS if s.combining},
        },
        _why_not_combined(settings),
    )


def _combining(settings: Mapping[str, float]) -> dict[str, float | None]:
    """The settings that shape read combining, from the collector's list, as measured."""
    return {s.key: settings.get(s.key) for s in aio_settings.AIO_SETTINGS if s.combining}


def _why_not_combined(settings: Mapping[str, float]) -> str:
    reasons = []
    combine = settings.get("io_combine_limit_bytes")
    if combine is not None and combine <= BLOCK_BYTES:
        reasons.append(
            f"io_combine_limit is {units.size(combine)}: set it back to 128kB (the default,"
            " 16 blocks)"
        )
    concurrency = settings.get("io_max_concurrency")
    if concurrency is not None and concurrency < 16:
        shared = settings.get("shared_buffers_bytes")
        reasons.append(
            f"io_max_concurrency is {units.count(concurrency)}, sized by PostgreSQL from"
            f" shared_buffers ({units.size(shared) if shared else '?'}) and max_connections:"
            " too few reads in flight per backend to combine. Raise shared_buffers, lower"
            " max_connections, or set io_max_concurrency (restart)"
        )
    effective = settings.get("effective_io_concurrency")
    if effective is not None and effective <= 1:
        reasons.append(
            f"effective_io_concurrency is {units.count(effective)}: read-ahead is off; raise it"
            " (16 is the default)"
        )
    if not reasons:
        return "The settings allow combining; check for concurrent scans of the same table."
    return "; ".join(reasons) + "."


CHECKS: tuple[Check, ...] = (
    workload_regression,
    track_io_timing_off,
    no_read_activity,
    reads_not_yet_counted,
    storage_saturated,
    read_latency_high,
    io_worker_pool_saturated,
    read_latency_regression,
    wait_per_read_rose_with_read_size,
    reads_not_combined,
    io_uring_available,
    pending_restart,
    stats_reset_during_window,
)


def findings(ctx: Context) -> list[Finding]:
    """Every finding the data supports, the most severe first."""
    found = [f for check in CHECKS if (f := check(ctx)) is not None]
    return sorted(found, key=lambda f: -SEVERITIES.index(f.severity))

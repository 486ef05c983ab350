"""io worker pool sizing: when reads queue for the io workers (io_method=worker), the pool's
measured demand, the io_workers (18) or io_max_workers (19) it needs, and the finding that
says so (io_worker_pool_saturated)."""

from __future__ import annotations

import math
from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.report.findings.context import Context, Finding


def pool_busy(ctx: Context) -> bool:
    utilization = ctx.summary.activity.io_worker_utilization
    return utilization is not None and utilization > ctx.thresholds.max_utilization


def pool_queueing(ctx: Context) -> bool:
    """The pool busy while I/Os wait for a worker: then, and only then, more workers would
    read more. One read stream (synchronized scans of one table) keeps a worker as busy with
    nothing queued, and more workers do not make it faster (docs/alerts.md)."""
    queued = ctx.summary.activity.queued_ios
    return pool_busy(ctx) and queued is not None and queued >= ctx.thresholds.min_queued_ios


def _overflow_sessions(ctx: Context) -> float:
    """Clients reading by themselves because the io worker queue was full. Under
    io_method=worker PostgreSQL also reads single blocks in place (index lookups) whatever the
    pool's load, so these count only while the pool is busy."""
    if ctx.summary.server.io_method != "worker" or not pool_queueing(ctx):
        return 0.0
    return ctx.summary.activity.sync_read_sessions


def _pinned_share(ctx: Context) -> float | None:
    """PostgreSQL 19: the live pool's average size against io_max_workers."""
    server = ctx.summary.server
    if not server.self_sizing_pool:
        return None
    return ctx.summary.activity.pool_share(server.settings["io_max_workers"])


def pool_signals(ctx: Context) -> list[str]:
    """What shows reads queueing for the io workers. PostgreSQL 19 grows the pool by itself
    while they queue, so there they count only while the pool is pinned at io_max_workers."""
    t, activity = ctx.thresholds, ctx.summary.activity
    if ctx.summary.server.self_sizing_pool:
        share = _pinned_share(ctx)
        if share is None or share < t.min_pool_share:
            return []
    signals = []
    if pool_queueing(ctx):
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
    signals = pool_signals(ctx)
    if not signals:
        return None
    t, activity, server = ctx.thresholds, ctx.summary.activity, ctx.summary.server
    workers, demand = activity.io_workers, pool_demand(ctx)
    suggested = suggested_io_workers(ctx)
    said = {
        "utilization": f"io workers busy {units.percent(activity.io_worker_utilization)} of the"
        f" time (above {units.percent(t.max_utilization)}) with"
        f" {units.sessions(activity.queued_ios or 0.0)} I/Os waiting for a worker on average"
        f" (at least {units.sessions(t.min_queued_ios)})",
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
        "queued_ios": activity.queued_ios,
        "min_queued_ios": t.min_queued_ios,
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

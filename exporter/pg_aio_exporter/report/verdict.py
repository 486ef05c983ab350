"""The verdict: the three questions of an AIO upgrade answered in words, with the numbers."""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.report import units, writes
from pg_aio_exporter.report.findings import Context, Finding


@dataclass(frozen=True)
class Verdict:
    reads: str  # did reads get faster or slower?
    storage: str  # is storage saturated?
    io_workers: str  # is the io worker pool big enough?


def _by_id(found: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in found}


def reads(ctx: Context, found: dict[str, Finding]) -> str:
    total = ctx.summary.total
    figures = total.figures
    volume = f"{units.rate(total.reads_per_second)} reads/s, {units.mib(total.bytes_per_second)}/s"
    server = ctx.summary.server
    if not server.has_pg_stat_io:
        return f"Not judged: PostgreSQL {server.version} has no pg_stat_io (16 and newer do)."
    if "reads_not_yet_counted" in found:
        return (
            f"Not judged: the reads of queries still running were not counted yet ({volume}"
            " counted); the sampled waits below include them."
        )
    if figures is None or not ctx.enough_reads:
        return f"Not judged: too little read traffic ({volume})."
    shape = (
        f"{units.size(figures.size_bytes)} per read, hit ratio {units.fraction(figures.hit_ratio)}"
    )
    if figures.seconds_per_byte is None:
        return f"Read wait not measured (track_io_timing off): {volume}, {shape}."
    now = (
        f"Reads wait {units.per_mib(figures.seconds_per_byte)}"
        f" ({units.ms(figures.latency_seconds)} per read); {volume}, {shape}."
    )
    base = ctx.baseline
    before = base.total.figures if base is not None else None
    if base is None or before is None or not before.seconds_per_byte:
        return now + " Run with --baseline FILE to compare with a saved run."
    ratio = figures.seconds_per_byte / before.seconds_per_byte
    against = (
        f" Against the baseline (PostgreSQL {base.server.version}, io_method"
        f" {base.server.io_method or 'none'}: {units.per_mib(before.seconds_per_byte)},"
        f" {units.size(before.size_bytes)} per read)"
    )
    if "read_latency_regression" in found:
        change = f"{units.ratio(ratio)} slower per MiB: a regression."
    elif ratio < 1:
        change = f"{units.ratio(1 / ratio)} faster per MiB."
    else:
        change = (
            f"{units.ratio(ratio)} slower per MiB, within the"
            f" {units.ratio(ctx.thresholds.regression_factor)} a regression needs."
        )
    throughput = base.total.bytes_per_second
    if throughput > 0:
        change += f" Throughput {units.ratio(total.bytes_per_second / throughput)} the baseline's."
    return now + against + ": " + change


def storage(ctx: Context, found: dict[str, Finding]) -> str:
    """Reads and writes together: writes.storage_sentence puts writes first when they
    saturate the volume."""
    return writes.storage_sentence(ctx, found, read_storage(ctx, found))


def read_storage(ctx: Context, found: dict[str, Finding]) -> str:
    if "storage_saturated" in found:
        return found["storage_saturated"].summary
    if not ctx.sampled:
        return "Not judged: no sample of the sessions' waits was taken."
    activity = ctx.summary.activity
    waiting = ctx.read_wait_sessions
    share = activity.read_wait_share(ctx.thresholds.io_wait_events)
    waits = (
        f"{units.sessions(waiting)} sessions wait on reads on average"
        f" ({units.percent(share) + ' of' if share is not None else 'no'} active time)"
    )
    if "reads_not_yet_counted" in found:
        return f"Not judged from counted reads: {waits}, in reads pg_stat_io has not counted yet."
    per_read = ctx.seconds_per_read()
    if waiting > ctx.thresholds.min_io_wait_sessions:
        return (
            f"Reads are not storage-bound, though busy: {waits}, yet each read waits"
            f" {units.ms(per_read)}: the workload reads a lot and storage keeps up."
        )
    return f"Reads are not storage-bound: {waits}" + (
        f", {units.ms(per_read)} per read." if per_read is not None else "."
    )


def io_workers(ctx: Context, found: dict[str, Finding]) -> str:
    server, activity = ctx.summary.server, ctx.summary.activity
    if not server.aio:
        return f"PostgreSQL {server.version} has no asynchronous I/O, so no io worker pool."
    if server.io_method != "worker":
        return f"io_method is {server.io_method}: no io worker pool is involved."
    if "io_worker_pool_saturated" in found:
        finding = found["io_worker_pool_saturated"]
        suggested = finding.evidence["suggested_io_workers"]
        return finding.summary + (
            f" Raise io_workers to {suggested}." if suggested is not None else ""
        )
    utilization = activity.io_worker_utilization
    if utilization is None:
        return "Not judged: the io workers were not visible to this role (grant it pg_monitor)."
    return (
        f"The io worker pool is big enough: {activity.io_workers} workers busy"
        f" {units.percent(utilization)} of the time,"
        f" {units.sessions(activity.submission_queue_sessions)} sessions waiting for the"
        " submission queue."
    )


def verdict(ctx: Context, found: list[Finding]) -> Verdict:
    index = _by_id(found)
    return Verdict(reads(ctx, index), storage(ctx, index), io_workers(ctx, index))

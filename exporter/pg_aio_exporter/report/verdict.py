"""The verdict: the three questions of an AIO upgrade answered in words, with the numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pg_aio_exporter.collectors.pg_stat_database import PgStatDatabaseCollector
from pg_aio_exporter.report import units
from pg_aio_exporter.report.findings import writes
from pg_aio_exporter.report.findings.context import Context, Finding
from pg_aio_exporter.report.margin import MIN_CHANGE
from pg_aio_exporter.report.side import Regression
from pg_aio_exporter.report.workload import (
    ACTIVE_TIME,
    STATEMENTS,
    Workload,
    WorkloadComparison,
    matched_share,
)


@dataclass(frozen=True)
class Verdict:
    workload: str  # did the work get done faster or slower? (the headline)
    reads: str  # did reads get faster or slower?
    storage: str  # is storage saturated?
    io_workers: str  # is the io worker pool big enough?


DATABASE = PgStatDatabaseCollector.name


def _by_id(found: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in found}


def _reads_not_judged(ctx: Context, found: dict[str, Finding], volume: str) -> str | None:
    server = ctx.summary.server
    if not server.has_pg_stat_io:
        return f"Not judged: PostgreSQL {server.version} has no pg_stat_io (16 and newer do)."
    if not ctx.summary.reads_read:
        return "Not judged: pg_stat_io was not read (Not visible to this role, below)."
    if "reads_not_yet_counted" in found:
        return (
            f"Not judged: the reads of queries still running were not counted yet ({volume}"
            " counted); the sampled waits below include them."
        )
    if ctx.summary.total.figures is None or not ctx.enough_reads:
        return f"Not judged: too little read traffic ({volume})."
    return None


def reads(ctx: Context, found: dict[str, Finding]) -> str:
    total = ctx.summary.total
    figures = total.figures
    volume = f"{units.rate(total.reads_per_second)} reads/s, {units.mib(total.bytes_per_second)}/s"
    not_judged = _reads_not_judged(ctx, found, volume)
    if not_judged is not None:
        return not_judged
    assert figures is not None
    shape = (
        f"{units.size(figures.size_bytes)} per read, hit ratio {units.fraction(figures.hit_ratio)}"
    )
    if figures.seconds_per_byte is None:
        return f"Read wait not measured (track_io_timing off): {volume}, {shape}."
    now = (
        f"Reads wait {units.per_mib(figures.seconds_per_byte)}"
        f" ({ctx.read_class_words()}); {volume}, {shape}."
    )
    base = ctx.baseline
    before = base.total.figures if base is not None else None
    if base is None or before is None or not before.seconds_per_byte:
        return now + " Run with --baseline FILE to compare with a saved run."
    change = ctx.regression()
    assert change is not None  # both windows measured a read wait per byte
    against = (
        f" Against the baseline (PostgreSQL {base.server.version}, io_method"
        f" {base.server.io_method_shown}: {units.per_mib(before.seconds_per_byte)},"
        f" {units.size(before.size_bytes)} per read)"
    )
    return now + against + ": " + _read_change(ctx, change, found) + _throughput(ctx)


def _read_change(ctx: Context, change: Regression, found: dict[str, Finding]) -> str:
    """Read wait per MiB against the baseline's, in words: a direction only where it is claimed
    (margin.py's rule where the ratio has an interval, side.Regression)."""
    if "read_latency_regression" in found and found["read_latency_regression"].severity == "info":
        workload = ctx.workload()
        claimed = workload is not None and workload.claim == "faster"
        return (
            f"{change.shown} longer wait per MiB, while the workload"
            f" {'ran faster' if claimed else 'was not slower'}: the wait overlapped more, it is"
            " no slowdown."
        )
    if "read_latency_regression" in found:
        return f"{change.shown} slower per MiB: a read wait regression."
    if change.ratio == 0:
        return "no read wait measured now (under track_io_timing's resolution)."
    if change.faster:
        speedup = ""
        if change.margin is not None:
            low, high = change.margin.interval
            speedup = f" ({units.interval(1 / high, 1 / low)})"
        return f"{units.ratio(1 / change.ratio)}{speedup} faster per MiB."
    if change.slower:
        return (
            f"{change.shown} slower per MiB, within the"
            f" {units.ratio(ctx.thresholds.regression_factor)} a regression needs."
        )
    undecided = "" if change.margin is None else f", {change.undecided}: no direction claimed"
    return f"{units.ratio(change.ratio)} the wait per MiB{undecided}."


def _throughput(ctx: Context) -> str:
    base = ctx.baseline
    assert base is not None
    throughput = base.total.bytes_per_second
    if throughput > 0:
        ratio = ctx.summary.total.bytes_per_second / throughput
        return f" Throughput {units.ratio(ratio)} the baseline's."
    return ""


def storage(ctx: Context, found: dict[str, Finding]) -> str:
    """Reads and writes together: writes.storage_sentence puts writes first when they
    saturate the volume."""
    return writes.storage_sentence(ctx, found, read_storage(ctx, found))


def read_storage(ctx: Context, found: dict[str, Finding]) -> str:
    if "storage_saturated" in found:
        return found["storage_saturated"].summary
    if ctx.summary.activity.samples and not ctx.sampled:
        return "Not judged: the sessions' waits were not read (Not visible to this role, below)."
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
    words = ctx.read_class_words()
    if share is not None and share > ctx.thresholds.min_read_wait_share:
        return (
            f"Reads are not storage-bound, though busy: {waits}, yet each read waits"
            f" {words or 'an unmeasured time'}: the workload reads a lot and storage keeps up."
        )
    return f"Reads are not storage-bound: {waits}" + (f", {words}." if words is not None else ".")


def io_workers(ctx: Context, found: dict[str, Finding]) -> str:
    server, activity = ctx.summary.server, ctx.summary.activity
    if not server.aio:
        return f"PostgreSQL {server.version} has no asynchronous I/O, so no io worker pool."
    if not server.settings_read:
        return "Not judged: io_method was not read (pg_settings, under Not visible)."
    if server.io_method != "worker":
        return f"io_method is {server.io_method}: no io worker pool is involved."
    if "io_worker_pool_saturated" in found:
        finding = found["io_worker_pool_saturated"]
        suggested = finding.evidence[f"suggested_{server.pool_setting}"]
        return finding.summary + (
            f" Raise {server.pool_setting} to {suggested}." if suggested is not None else ""
        )
    utilization = activity.io_worker_utilization
    if utilization is None:
        return "Not judged: the io workers were not visible to this role (grant it pg_monitor)."
    return _pool_big_enough(ctx, utilization)


def _pool_big_enough(ctx: Context, utilization: float) -> str:
    """The pool's verdict when it is not saturated: against io_max_workers on a self-sizing
    pool (19+), against the fixed io_workers before."""
    server, activity, t = ctx.summary.server, ctx.summary.activity, ctx.thresholds
    queue = (
        f" {units.sessions(activity.queued_ios or 0.0)} I/Os waiting for a worker on average,"
        f" {units.sessions(activity.submission_queue_sessions)} sessions waiting for the"
        " submission queue."
    )
    if server.self_sizing_pool:
        ceiling = server.settings["io_max_workers"]
        share = activity.pool_share(ceiling)
        if utilization > t.max_utilization and share is not None and share < t.min_pool_share:
            # Busy below its ceiling: PostgreSQL 19 is adding workers, not out of them.
            launch = server.settings.get("io_worker_launch_interval_seconds")
            every = "" if launch is None else f" ({units.ms(launch)})"
            return (
                f"The io worker pool is growing: {units.sessions(activity.pool_average or 0.0)}"
                f" of at most {units.count(ceiling)} workers (io_max_workers) running on"
                f" average, busy {units.percent(utilization)}; it adds a worker every"
                f" io_worker_launch_interval{every} while reads queue.{queue}"
            )
        return (
            f"The io worker pool is big enough: {units.sessions(activity.pool_average or 0.0)}"
            f" of at most {units.count(ceiling)} workers (io_max_workers) running on average,"
            f" busy {units.percent(utilization)} of the time, and not pinned at"
            f" io_max_workers while reads queue;{queue}"
        )
    return (
        f"The io worker pool is big enough: {activity.io_workers} workers busy"
        f" {units.percent(utilization)} of the time,{queue}"
    )


def _this_window(work: Workload) -> str:
    """Workload time of this window alone."""
    per_call, total = work.seconds_per_call, work.total
    if per_call is not None and total is not None:
        share = total.read_seconds / total.exec_seconds if total.exec_seconds > 0 else None
        return (
            f"Statements took {units.ms(per_call)} per call on average"
            f" ({units.count(total.calls)} calls of {len(work.statements or {})} statements),"
            f" {units.percent(share)} of it waiting on reads."
        )
    missing = f" (pg_stat_statements: {work.statements_note})" if work.statements_note else ""
    if work.nothing_ended:
        return (
            f"Not judged on work done: {units.sessions(work.client_sessions or 0.0)} client"
            " sessions were busy on average, yet none of their statements or transactions ended"
            " in the window: PostgreSQL counts a statement's calls, rows and blocks when it ends"
            " (or its session goes idle), so no work was counted. Statements outlast the window:"
            f" measure over a longer --duration than they run{missing}."
        )
    db_time = work.db_time_per_transaction
    if db_time is None:
        return f"Not judged: no statement or transaction was counted{missing}. {UNCOUNTED}"
    if db_time == 0:
        return (
            f"DB time not measured: {units.count(work.transactions or 0)} transactions"
            " counted, but no sample saw a client session working (statements shorter than"
            f" the sampling interval){missing}. {SHORT}"
        )
    return (
        f"DB time per transaction {units.ms(db_time)}"
        f" ({units.rate(work.transactions_per_second or 0.0)} transactions/s,"
        f" {units.sessions(work.client_sessions or 0.0)} sessions busy on average){missing}."
    )


UNCOUNTED = (
    "PostgreSQL adds a session's transactions to pg_stat_database when that session reads a"
    " table or disconnects: sessions whose statements read none (SELECT 1, functions alone)"
    " stay uncounted while connected; pg_stat_statements counts their calls."
)
SHORT = (
    "Load pg_stat_statements (it times every call), or sample more often (--sample-interval"
    " 100ms) over a longer --duration."
)


def interval(cmp: WorkloadComparison) -> str:
    """The headline figure with its 90% interval: a speed-up when faster, a time ratio
    otherwise."""
    low, high = cmp.interval
    if cmp.margin.faster:
        return f"{units.ratio(1 / cmp.time_ratio)} ({units.interval(1 / high, 1 / low)})"
    if cmp.margin.slower:
        return f"{units.ratio(cmp.time_ratio)} ({units.interval(low, high)})"
    return f"({units.interval(low, high)})"


def _basis(ctx: Context, cmp: WorkloadComparison) -> str:
    """What the comparison was made by, and how much of the baseline's statements it rests on."""
    if cmp.basis == STATEMENTS:
        share = (
            ""
            if cmp.matched_share is None
            else f", {units.percent(cmp.matched_share)} of the baseline's statement time"
        )
        return (
            f"time per statement call at the baseline's mix ({cmp.matched_statements}"
            f" statements matched{share})"
        )
    name = (
        "DB time per transaction, counted (pg_stat_database's active_time)"
        if cmp.basis == ACTIVE_TIME
        else "DB time per transaction, sampled"
    )
    return f"{name} ({_why_not_statements(ctx, cmp)})"


def _why_not_statements(ctx: Context, cmp: WorkloadComparison) -> str:
    """Why a comparison by DB time was not made by statements (workload._compare's reasons)."""
    if cmp.matched_share is not None:
        return f"{_few_matched(ctx, cmp.matched_share)}; so it falls back to DB time"
    base = ctx.baseline.workload if ctx.baseline is not None else None
    now = ctx.summary.workload
    if base is None or now is None or base.statements is None or now.statements is None:
        return "pg_stat_statements not in both windows"
    return (
        "the statements' execution time was under half of DB time in a window: parse, plan,"
        " commit and round trips took most of it"
    )


def _undecided(cmp: WorkloadComparison) -> str:
    """Why no direction is claimed, and what would tell; empty when one is."""
    if cmp.clients_wait:
        own = cmp.server_margin or cmp.margin
        return (
            f" The clients were working in the server {units.percent(cmp.busy_share)} of the"
            " time they were connected (they wait between transactions: a fixed rate, a pool,"
            " think time): what they spend outside it (round trips, their own work and"
            " schedule) is not seen here, and their latency is known only to lie between the"
            " server's time and their time connected per transaction. The server's own time:"
            f" {units.ratio(own.value)} ({units.interval(*own.interval)})."
        )
    if cmp.margin.decided:
        return ""
    close = ""
    if not cmp.margin.holds_one:
        margin = math.exp(cmp.margin.half_width) - 1
        close = (
            f" the interval clears 1 by less than its margin (±{units.percent(margin)}),"
            " so no direction is claimed;"
        )
    decisive = cmp.decisive_seconds
    if decisive is None:
        return (
            f" Undecided by window length:{close} the interval holds estimates that"
            " disagree (the statements' time, DB time, the clients' time connected per"
            " transaction), and a longer window narrows each one's error, not their"
            " disagreement; repeated runs tell whether it lasts."
        )
    size = max(abs(cmp.time_ratio - 1), MIN_CHANGE - 1)
    return (
        f" Undecided:{close} windows of about {units.duration(decisive)} each (or"
        f" repeated runs) would tell a change of {units.percent(size)}"
        + ("" if cmp.basis == STATEMENTS else "; pg_stat_statements narrows it most")
        + "."
    )


def _against(ctx: Context, cmp: WorkloadComparison) -> str:
    base = ctx.baseline
    assert base is not None
    if cmp.clients_wait:
        head = f"Undecided for the clients {interval(cmp)} against"
    elif cmp.margin.faster:
        head = f"Faster: {interval(cmp)} less time than"
    elif cmp.margin.slower:
        head = f"Slower: {interval(cmp)} the time of"
    elif cmp.margin.holds_one:
        head = f"About as fast {interval(cmp)} as"
    else:
        head = f"Too close to call {interval(cmp)} against"
    reads_part = ""
    if cmp.read_before is not None and cmp.read_after is not None and cmp.before > 0:
        reads_part = (
            f"; read wait {units.percent(cmp.read_before / cmp.before)} ->"
            f" {units.percent(cmp.read_after / cmp.after if cmp.after > 0 else None)} of it"
        )
    return (
        f"{head} the baseline (PostgreSQL {base.server.version}, io_method"
        f" {base.server.io_method_shown}), by {_basis(ctx, cmp)}: {units.ms(cmp.after)} against"
        f" {units.ms(cmp.before)}{reads_part}.{_undecided(cmp)}"
    )


def _few_matched(ctx: Context, share: float) -> str:
    least = units.percent(ctx.thresholds.min_matched_statement_share)
    matched = (
        "no statement of the baseline's matched one run now, 0% of its statement time"
        if share == 0
        else f"the statements both ran took only {units.percent(share)} of the baseline's"
        " statement time"
    )
    return (
        f"{matched}, under the {least} the statements basis needs: the main queries' texts"
        " differ between the two"
    )


def _not_compared(ctx: Context, work: Workload, base: Workload | None) -> str:
    """Why this window has no comparison with the baseline."""
    if base is not None and (base.nothing_ended or base.db_time_per_transaction == 0):
        return "Not compared: the baseline counted no work to compare with."
    if work.nothing_ended or work.db_time_per_transaction == 0 or base is None:
        return "Not compared."
    share = matched_share(base, work)
    if share is not None and share < ctx.thresholds.min_matched_statement_share:
        return (
            f"Not compared: {_few_matched(ctx, share)}, and DB time per transaction was not"
            " measured in both."
        )
    return "Not compared: the baseline has no statement or transaction in common."


def workload(ctx: Context) -> str:
    """The headline: how long the work took, against the baseline when there is one."""
    work = ctx.summary.workload
    if work is None:
        return "Not judged: this saved report predates workload time (schema 1)."
    now = _this_window(work)
    if work.db_time_per_transaction is None and not ctx.summary.read(DATABASE):
        now = now.removesuffix(".") + "; pg_stat_database was not read (Not visible, below)."
    cmp = ctx.workload()
    if cmp is not None:
        return _against(ctx, cmp) + " " + now
    if ctx.baseline is not None:
        return f"{now} {_not_compared(ctx, work, ctx.baseline.workload)}"
    return now + " Run with --baseline FILE to compare with a saved run."


def verdict(ctx: Context, found: list[Finding]) -> Verdict:
    index = _by_id(found)
    return Verdict(workload(ctx), reads(ctx, index), storage(ctx, index), io_workers(ctx, index))

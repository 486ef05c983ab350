"""The recording rules: pg_stat_io's read and write figures, the sampler's, the workload's, WAL,
each target's storage class limits and regime, and the last scrape interval's latency with its
0/1 judgement, each by promql.py's formula of the same name. Beside them, what the alerts read
of them: a recorded series' name at the alert window (`rec`), and the two sides (READS,
WRITES) whose time per byte the regime rules record and the regression alerts compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from alerts.promql import (
    ACTIVE,
    NOT_IO_WORKER,
    TARGET,
    Formula,
    Scope,
    backend_write_share,
    by,
    io_formulas,
    io_worker_pool_share,
    io_worker_queued_ios,
    io_worker_utilization,
    on_target,
    sessions,
    wal_formulas,
    workload_formulas,
    write_formulas,
    write_wait_sessions,
)
from pg_aio_exporter.vocabulary import SUBMISSION_QUEUE

if TYPE_CHECKING:
    # For the annotations only: params.py checks the parameters against alerting.py's alerts,
    # which are built on these rules.
    from alerts.params import Params


# --- PromQL helpers ----------------------------------------------------------------------------


def series(params: Params, name: str, *extra: str) -> str:
    """An exporter metric restricted by the global selector and `extra` matchers."""
    return Scope(params["selector"], "").series(name, *extra)


def indent(expr: str, spaces: int = 2) -> str:
    return "\n".join(" " * spaces + line for line in expr.splitlines())


# --- recording rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    name: str
    labels: str
    meaning: str
    expr: str


def io_rules(params: Params, window: str) -> list[Recording]:
    """The six pg_stat_io read rules, per target. Not per (backend_type, object, context) row:
    no alert reads a row, and the dashboards compute theirs from the raw series."""
    scope = Scope(params["selector"], window)
    return [
        Recording(f"pg_aio_target:{f.name}:rate{window}", "target", f.meaning, f.expr)
        for f in io_formulas(scope, READ_RELATIONS, per_target=True).values()
    ]


# A target's read figures leave out PostgreSQL 18's `wal` rows (WAL read by walsenders and
# recovery, timed by track_wal_io_timing), as the report's do.
READ_RELATIONS = 'object!="wal"'


def sampler_rules(params: Params, window: str) -> list[Recording]:
    """The io worker pool, and the sessions the alerts compare, summed per target: a series
    per wait event and backend type (as many as the samples ever saw) would cost a series
    each that no alert or panel reads."""
    scope = Scope(params["selector"], window)
    io_waits = params["alerts"]["PgAioStorageSaturated"]["io_wait_events"]
    return [
        *(
            Recording(f"pg_aio:{f.name}:rate{window}", "target", f.meaning, f.expr)
            for f in (
                io_worker_utilization(scope),
                io_worker_pool_share(scope),
                io_worker_queued_ios(scope),
            )
        ),
        *(
            Recording(f"pg_aio_target:{f.name}:rate{window}", "target", f.meaning, f.expr)
            for f in (
                sessions(
                    scope,
                    "active_sessions",
                    "average active sessions, io workers and sleeps (Timeout waits) aside",
                    ACTIVE,
                ),
                sessions(
                    scope,
                    "read_wait_sessions",
                    f"average sessions, io workers aside, waiting on reads (IO/{io_waits})",
                    'wait_event_type="IO"',
                    f'wait_event=~"{io_waits}"',
                    NOT_IO_WORKER,
                ),
                sessions(
                    scope,
                    "submission_queue_sessions",
                    "average sessions waiting to hand an I/O to the io workers "
                    f"(LWLock/{SUBMISSION_QUEUE})",
                    'wait_event_type="LWLock"',
                    f'wait_event="{SUBMISSION_QUEUE}"',
                ),
            )
        ),
    ]


def workload_rules(params: Params, window: str) -> list[Recording]:
    scope = Scope(params["selector"], window)
    return [
        Recording(f"pg_aio_target:{f.name}:rate{window}", "target", f.meaning, f.expr)
        for f in workload_formulas(scope).values()
    ]


REGIME = "pg_aio_target:regime"
REGIME_LABELS = ("major", "io_method")


def regime_rules(params: Params) -> list[Recording]:
    """What a target's read wait (and write time) per byte is compared within: its server's
    major version and io_method. The wait per byte measures how much of each read overlapped
    other work, which a new major version or io_method changes with no change in speed; a
    change of either starts a fresh baseline. A minor update (18.6 -> 18.7) keeps it: it
    changes no I/O design, and a fresh baseline would leave the regression alerts blind for a
    day, just when a minor release could have brought a regression."""
    # The newest server_info only: across a restart, the old version's series lingers until
    # Prometheus marks it stale, and two regimes at once would break the joins below. The
    # major version is version_num without its last four digits (10 and later).
    newest = (
        f"topk without (version, version_num) (1, timestamp({series(params, 'pg_server_info')}))"
    )
    version = (
        "group without (version, version_num) (label_replace(\n"
        f'  {newest},\n  "major", "$1", "version_num", "([0-9]+)[0-9]{{4}}"\n))'
    )
    method = f"({series(params, 'pg_aio_io_method')} == 1)"
    joined = f"{version}\n* ignoring ({', '.join(REGIME_LABELS)}) group_left (io_method)\n{method}"
    return [
        Recording(
            REGIME,
            "target, major, io_method",
            "1 per target, labelled with its server's major version and io_method (none before 18)",
            f"{joined}\nor ignoring (io_method)\n{version}",
        ),
        *(
            Recording(
                f"{regime_series(params, what)}",
                "target, major, io_method",
                f"{meaning} per byte labelled with the regime it was measured in",
                f"{rec(params, f'pg_aio_target:{what}_seconds_per_byte')}\n"
                f"* ignoring ({', '.join(REGIME_LABELS)}) group_left"
                f" ({', '.join(REGIME_LABELS)})\n{REGIME}",
            )
            for what, meaning in ((side.what, side.measure) for side in SIDES)
        ),
    ]


def regime_series(params: Params, what: str) -> str:
    """`what` (read or write) time per byte, labelled with its regime."""
    return f"pg_aio_target:{what}_seconds_per_byte_by_regime:rate{params['alert_window']}"


def write_rules(params: Params, window: str) -> list[Recording]:
    """The write side per target: pg_stat_io's write operations, WAL, who writes, write waits."""
    scope = Scope(params["selector"], window)
    saturated = params["alerts"]["PgAioStorageSaturatedByWrites"]
    io_write_events = "|".join(
        saturated[k] for k in ("write_wait_events", "wal_sync_events", "wal_wait_events")
    )
    formulas = [
        *write_formulas(scope, per_target=True).values(),
        *wal_formulas(scope).values(),
        backend_write_share(scope),
        write_wait_sessions(scope, io_write_events, saturated["write_lock_events"]),
    ]
    return [
        Recording(f"pg_aio_target:{f.name}:rate{window}", "target", f.meaning, f.expr)
        for f in formulas
    ]


def interval_series(params: Params, name: str) -> str:
    """A figure of the last scrape interval alone (irate, over interval_window)."""
    return f"pg_aio_target:{name}:irate{params['interval_window']}"


def interval_rules(params: Params) -> list[Recording]:
    """Latency of the last scrape interval, and whether it was above the storage class's
    limit (1) or not (0): the alerts average the latter over time. A count-weighted window,
    rate(time[5m]) / rate(ops[5m]), lets the healthy minutes before an incident that collapses
    throughput (fsync +10 ms: 28x fewer syncs) outweigh it for minutes; here each interval
    counts the same whatever its throughput. An interval with too little traffic to judge (its
    own, below the guard: a 5m rate on a fresh Prometheus is a fraction of the real one) has
    no sample, as one with none at all (the latency's denominator is > 0), so the average is
    the share of the intervals with traffic that were slow: pg_stat_io learns a scan's reads
    when its statement ends, and the exporter's 30 s poll leaves every other 15 s interval
    unchanged; an interval without news is neither slow nor healthy.

    The 0/1 series read the scraped counters themselves, not the interval figures recorded
    beside them: vmalert sees a series recorded in the same evaluation only once
    VictoriaMetrics lets it be queried (2-4 s after it arrived; no flag changes it), so each
    recorded level between the scrapes and the alert would add an evaluation interval, and
    inputs recorded apart would lapse apart. Prometheus computes the same values either way."""
    scope = Scope(params["selector"], params["interval_window"], rate_function="irate")
    reads = io_formulas(scope, READ_RELATIONS, per_target=True)
    syncs = wal_formulas(scope)
    figure = partial(interval_series, params)
    min_syncs = params["alerts"]["PgAioWalSyncLatencyHigh"]["min_syncs_per_second"]
    return [
        *(
            Recording(
                figure(f.name),
                "target",
                f"{f.meaning}, over the last scrape interval alone",
                f.expr,
            )
            for f in (
                reads["read_ops_per_second"],
                reads["read_latency_seconds"],
                reads["read_size_bytes"],
                syncs["wal_syncs_per_second"],
                syncs["wal_sync_latency_seconds"],
            )
        ),
        Recording(
            figure("read_latency_above_limit"),
            "target",
            "1 when the last scrape interval's wait per read was above the storage class's "
            "limit for reads of its size (PgAioReadLatencyHigh's), 0 when not; no sample for "
            f"an interval with fewer than {params['min_read_ops_per_second']} reads/s",
            f"(\n{indent(grouped(reads['read_latency_seconds'].expr))}\n  > bool\n"
            f"{indent(read_allowance(params, grouped(reads['read_size_bytes'].expr)), 2)}\n)\n"
            f"and\n{reads['read_ops_per_second'].expr} >= "
            f"{params['min_read_ops_per_second']}",
        ),
        sync_above_limit(
            figure("wal_sync_latency_above_limit"), syncs, "wal_sync_latency_seconds", min_syncs
        ),
        sync_above_limit(
            figure("wal_sync_sampled_above_limit"), syncs, "wal_sync_sampled_seconds", min_syncs
        ),
    ]


def sync_above_limit(
    name: str, syncs: dict[str, Formula], seconds: str, min_syncs: float
) -> Recording:
    """1 when the last scrape interval's time per WAL sync (`seconds`: timed, or by the
    samples) was above the storage class's seconds_per_sync, 0 when not."""
    return Recording(
        name,
        "target",
        f"1 when the last scrape interval's {syncs[seconds].meaning} was above the storage "
        "class's seconds_per_sync, 0 when not; no sample for an interval with fewer than "
        f"{min_syncs} syncs/s",
        f"(\n{indent(grouped(syncs[seconds].expr))}\n"
        f"  > bool {on_target('group_left ()')}\n"
        f"  {class_limit('seconds_per_sync')}\n)\n"
        f"and\n{syncs['wal_syncs_per_second'].expr} >= {min_syncs}",
    )


def grouped(expr: str) -> str:
    """`expr` as one operand of a binary operator."""
    return f"(\n{indent(expr)}\n)" if "\n" in expr else f"({expr})"


CLASS_INFO = "pg_aio_storage_class_info"
# Per target, what healthy storage of its class delivers (thresholds.yaml storage_classes).
CLASS_LIMITS = {
    "seconds_per_read": "the seconds a read may wait, besides its size at ...",
    "bytes_per_second": "... this many bytes per second",
    "seconds_per_sync": "the seconds a WAL sync may take",
}


def class_limit(what: str) -> str:
    return f"pg_aio_target:storage_class_{what}"


def storage_class_rules(params: Params) -> list[Recording]:
    """Each target's storage class's limits: by its pg_aio_storage_class_info, else (a target
    configured with no class) by default_storage_class."""
    classes, default = params["storage_classes"], params["default_storage_class"]
    up = f"group {by(TARGET)} ({series(params, 'pg_up')})"
    rules = []
    for what, meaning in CLASS_LIMITS.items():
        by_class = "\nor\n".join(
            f"  {series(params, CLASS_INFO, matcher)} * {values[what]}"
            for matcher, values in (
                (f'storage_class="{name}"', values) for name, values in classes.items()
            )
        )
        configured = f"max {by(TARGET)} (\n{by_class}\n)"
        rules.append(
            Recording(
                class_limit(what),
                "target",
                f"{meaning}, by the target's storage class ({default} unless configured)",
                f"{configured}\nor {on_target()}\n{up} * {classes[default][what]}",
            )
        )
    return rules


def recording_rules(params: Params) -> list[Recording]:
    return [
        *(
            rule
            for window in params["rate_windows"]
            for rule in (
                *io_rules(params, window),
                *sampler_rules(params, window),
                *workload_rules(params, window),
                *write_rules(params, window),
            )
        ),
        *regime_rules(params),
        *storage_class_rules(params),
        *interval_rules(params),
    ]


# --- what the alerts read: recorded series, the two sides --------------------------------------


def rec(params: Params, name: str) -> str:
    return f"{name}:rate{params['alert_window']}"


def traffic_guard(params: Params) -> str:
    return (
        f"{rec(params, 'pg_aio_target:read_ops_per_second')} >= {params['min_read_ops_per_second']}"
    )


@dataclass(frozen=True)
class Side:
    """Reads or writes as the regression rules see them: a time per byte compared with the
    target's own baseline, by the settings of the side's own regression alert (factor,
    baseline_window, baseline_quantile), with guards that keep the comparison meaningful."""

    what: str  # read, write: the recording rules' prefix
    measure: str  # what is compared, in words
    regression: str  # the side's regression alert
    figure: str  # its description: "<figure> per byte over the last ..."
    cause: str  # its description's end, after the threshold
    guards: Callable[[Params], list[str]]  # conditions and-ed to the regression
    guard_words: Callable[[Params], str]  # the same for docs/alerts.md


def guard_words(params: Params) -> str:
    return f"at >= {params['min_read_ops_per_second']} reads/s"


def read_allowance(params: Params, size: str) -> str:
    """What healthy storage of each target's class needs per read of the `size` series'."""
    join = on_target("group_left ()")
    return (
        f"{size}\n"
        f"  / {join} {class_limit('bytes_per_second')}\n"
        f"  + {join} {class_limit('seconds_per_read')}"
    )


def write_guard(params: Params) -> str:
    minimum = params["alerts"]["PgAioWriteLatencyRegression"]["min_write_ops_per_second"]
    return f"{rec(params, 'pg_aio_target:write_ops_per_second')} >= {minimum}"


def slower_than_page_cache(params: Params) -> str:
    """Writes slow enough that their ratio to a baseline is about storage, not CPU."""
    floor = params["alerts"]["PgAioWriteLatencyRegression"]["min_seconds_per_write"]
    return f"{rec(params, 'pg_aio_target:write_latency_seconds')} > {floor}"


def write_guard_words(params: Params) -> str:
    p = params["alerts"]["PgAioWriteLatencyRegression"]
    return (
        f"at >= {p['min_write_ops_per_second']} writes/s taking > {p['min_seconds_per_write']} s"
        " each"
    )


READS = Side(
    what="read",
    measure="read wait",
    regression="PgAioReadLatencyRegression",
    figure="Read wait time",
    cause=". Measured per byte, so larger combined reads do not trigger this, and within one"
    " major version and io_method; an upgrade or a switch of io_method starts a fresh baseline"
    " (read wait is no measure of speed across them); storage or contention got slower.",
    guards=lambda params: [traffic_guard(params)],
    guard_words=guard_words,
)
WRITES = Side(
    what="write",
    measure="buffer write time",
    regression="PgAioWriteLatencyRegression",
    figure="Buffer write time",
    cause=": the volume takes longer to absorb writes (dirty page throttling, a saturated or"
    " throttled device).",
    guards=lambda params: [write_guard(params), slower_than_page_cache(params)],
    guard_words=write_guard_words,
)
SIDES = (READS, WRITES)

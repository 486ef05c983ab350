"""PromQL of the pg_stat_io and sampler figures, shared by the recording rules
(alerts/recording.py) and the dashboards (dashboards/figures.py), so that a panel and the rule
of the same name compute the same thing. The names in it (operations, rows, backend types) are
the package's vocabulary (pg_aio_exporter/vocabulary.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pg_aio_exporter import vocabulary
from pg_aio_exporter.vocabulary import IO_LABELS, WAIT_LABELS, WRITE_OPERATIONS

# Matchers of the vocabulary's rows and backend types.
CLIENT_BACKEND = f'backend_type="{vocabulary.CLIENT_BACKEND}"'
NOT_IO_WORKER = f'backend_type!="{vocabulary.IO_WORKER}"'
# The sampled processes whose time is the active time the storage judgement divides by: io
# workers aside (they work for the others), and so are clients asleep (the sampler counts
# no other process asleep): the report's Activity.active_sessions.
ACTIVE = f'{NOT_IO_WORKER}, wait_event_type!="{vocabulary.SLEEP_WAIT_CLASS}"'
# Shared buffers written back to their relation (not bulk rings, not WAL): who writes these
# says whether the background writer keeps up.
BUFFER_WRITES = (
    f'object="{vocabulary.BUFFER_WRITES.object}"',
    f'context="{vocabulary.BUFFER_WRITES.context}"',
)


# A target's whole identity: the exporter (a scrape's job and instance) and its target name.
# The name alone is no identity: every sidecar's default is localhost:5432/postgres. A target's
# extra labels (`labels:`, --label) come with the name (one exporter's names are unique), so
# the left-hand side of each join keeps them.
TARGET = ("job", "instance", "target")


def matchers(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


def without(labels: Sequence[str]) -> str:
    return f"without ({', '.join(labels)})"


def by(labels: Sequence[str]) -> str:
    return f"by ({', '.join(labels)})"


def on_target(modifier: str = "") -> str:
    """The matching of a join per target, e.g. `on (job, instance, target) group_left ()`."""
    return f"on ({', '.join(TARGET)}) {modifier}".rstrip()


def value_span(selector: str, window: str) -> str:
    """How far the value of each series of `selector` moved within `window`: above 0 when it
    changed. Not changes(): MetricsQL's (VictoriaMetrics, vmalert) counts a series' first
    sample in the window as a change, so every new target would look changed. A gap while a
    target is down is no change either way; the same value after it is none."""
    return f"max_over_time({selector}[{window}]) - min_over_time({selector}[{window}])"


def total(expr: str, per_target: bool) -> str:
    """`expr` over pg_stat_io's rows summed per target when `per_target`, else as it is."""
    return f"sum {without(IO_LABELS)} ({expr})" if per_target else expr


@dataclass(frozen=True)
class Scope:
    """How a formula reads the exporter's series: `selector` on every one of them, each range
    over `window`, shifted back by `offset`. The rules use a fixed window; the dashboards use
    the same formulas with Grafana's $__rate_interval and their variables."""

    selector: str
    window: str
    offset: str = ""
    # "irate": each rate is the last scrape interval's (the last two samples in the window), so
    # a ratio of two of them is that interval's alone, whatever the throughput before it.
    rate_function: str = "rate"

    def series(self, name: str, *extra: str) -> str:
        parts = matchers(self.selector, *extra)
        return f"{name}{{{parts}}}" if parts else name

    def range(self, name: str, *extra: str) -> str:
        shift = f" offset {self.offset}" if self.offset else ""
        return f"{self.series(name, *extra)}[{self.window}]{shift}"

    def rate(self, name: str, *extra: str) -> str:
        return f"{self.rate_function}({self.range(name, *extra)})"


@dataclass(frozen=True)
class Formula:
    name: str
    meaning: str
    expr: str


def io_formulas(scope: Scope, *row: str, per_target: bool = False) -> dict[str, Formula]:
    """The pg_stat_io read figures by name, per (backend_type, object, context) row or,
    `per_target`, summed over the rows; `row` are matchers on those row labels."""
    reads = total(scope.rate("pg_stat_io_reads_total", *row), per_target)
    read_bytes = total(scope.rate("pg_stat_io_read_bytes_total", *row), per_target)
    read_time = total(scope.rate("pg_stat_io_read_time_seconds_total", *row), per_target)
    hits = total(scope.rate("pg_stat_io_hits_total", *row), per_target)
    # Hits count blocks, reads operations (on 18 of up to io_combine_limit blocks each): the
    # blocks read are the bytes read in the server's block_size.
    block_size = f"max_over_time({scope.range('pg_settings_block_size_bytes')})"
    blocks_read = f"{read_bytes}\n/ ignoring ({', '.join(IO_LABELS)}) group_left ()\n{block_size}"
    # read_time is 0 while track_io_timing is off: a latency of 0 there would be a lie and
    # would drag down the regression baseline, so latency exists only for windows fully on.
    timing_on = f"min_over_time({scope.range('pg_settings_track_io_timing')}) == 1"
    gate = f"and ignoring ({', '.join(IO_LABELS)})\n  {timing_on}"
    # Denominators are filtered with `> 0` so that idle windows give no sample rather than
    # NaN: a NaN in the recorded series would poison every *_over_time() baseline.
    formulas = (
        Formula("read_ops_per_second", "read operations/s", reads),
        Formula("read_bytes_per_second", "bytes read/s", read_bytes),
        Formula(
            "read_latency_seconds",
            "wait time per read operation (rate(read_time) / rate(reads))",
            f"{read_time}\n/\n({reads} > 0)\n{gate}",
        ),
        Formula(
            "read_seconds_per_byte",
            "wait time per byte read (rate(read_time) / rate(read_bytes))",
            f"{read_time}\n/\n({read_bytes} > 0)\n{gate}",
        ),
        Formula(
            "read_size_bytes",
            "average read size (rate(read_bytes) / rate(reads))",
            f"{read_bytes}\n/\n({reads} > 0)",
        ),
        Formula(
            "hit_ratio",
            "shared buffer hits / (hits + blocks read: read bytes / block_size)",
            f"{hits}\n/\n(({hits} + {blocks_read}) > 0)",
        ),
    )
    return {f.name: f for f in formulas}


def io_worker_pool_share(scope: Scope) -> Formula:
    """PostgreSQL 19 sizes the pool itself up to io_max_workers: the live pool's average size
    as a share of that ceiling. No value before 19 (no io_max_workers)."""
    return Formula(
        "io_worker_pool_share",
        "average io workers running / io_max_workers (PostgreSQL 19; 1 = pinned at the ceiling)",
        f"{scope.rate('pg_aio_io_worker_samples_total')}\n/\n{samples(scope)}\n/\n"
        f"{scope.series('pg_settings_io_max_workers')}",
    )


def io_worker_queued_ios(scope: Scope) -> Formula:
    """I/Os handed to the io worker pool and not picked up, on average: pg_aios keeps a read
    SUBMITTED from its hand-over until a worker has done it, so the SUBMITTED handles beyond
    the busy workers wait in the queue. A busy pool with nothing queued (one read stream, as
    synchronized scans make) is not made faster by more workers (docs/alerts.md)."""
    submitted = scope.rate("pg_aio_in_flight_samples_total", 'state="SUBMITTED"')
    return Formula(
        "io_worker_queued_ios",
        "average I/Os submitted to the io workers and not picked up (pg_aios SUBMITTED beyond"
        " the busy workers)",
        f"clamp_min(\n  (\n    sum {without(('state', 'operation'))} ({submitted})\n"
        f"    -\n    {scope.rate('pg_aio_io_worker_busy_samples_total')}\n  )\n"
        f"  /\n  {samples(scope)},\n  0\n)",
    )


def samples(scope: Scope) -> str:
    return f"({scope.rate('pg_aio_sampler_samples_total')} > 0)"


def per_sample(scope: Scope, metric: str, labels: Sequence[str], *extra: str) -> str:
    """rate(metric) / rate(samples): the average number of `metric`'s things in one sample."""
    return (
        f"{scope.rate(metric, *extra)}\n/ ignoring ({', '.join(labels)}) group_left ()\n"
        f"{samples(scope)}"
    )


def io_worker_utilization(scope: Scope) -> Formula:
    # io_workers is reloadable (and PostgreSQL 19 resizes the pool by itself): the exporter
    # counts io worker samples, so the ratio of the two rates is exact while the pool changes.
    worker_samples = f"({scope.rate('pg_aio_io_worker_samples_total')} > 0)"
    return Formula(
        "io_worker_utilization",
        "share of io worker samples not idle (0..1)",
        f"{scope.rate('pg_aio_io_worker_busy_samples_total')}\n/\n{worker_samples}",
    )


def active_sessions(scope: Scope, *extra: str) -> Formula:
    """`extra`: matchers on the wait event labels."""
    return Formula(
        "active_sessions",
        "average active sessions in that wait (CPU = on CPU)",
        per_sample(scope, "pg_aio_wait_event_samples_total", WAIT_LABELS, *extra),
    )


def sessions(
    scope: Scope, name: str, meaning: str, *extra: str, grouping: str = without(WAIT_LABELS)
) -> Formula:
    """Average sessions of a target in the waits `extra` selects (matchers on the wait event
    labels), summed over them: one series per target, where active_sessions has one per
    backend type and wait event the samples have seen; or summed by `grouping` (a `by (...)`
    or `without (...)` clause)."""
    return Formula(name, meaning, f"sum {grouping} (\n{active_sessions(scope, *extra).expr}\n)")


def in_flight_depth(scope: Scope) -> Formula:
    return Formula(
        "in_flight_depth",
        "average AIO handles in that state (pg_aios)",
        per_sample(scope, "pg_aio_in_flight_samples_total", ("state", "operation")),
    )


def workload_formulas(scope: Scope) -> dict[str, Formula]:
    """Workload time per target: how long the work took, the figure that answers "faster or
    slower" (docs/metrics.md). Statement time needs pg_stat_statements; DB time per
    transaction is always there: client sessions doing work (sampled, on CPU included) per
    transaction of pg_stat_database, less the exporter's own (one per sample)."""
    calls = scope.rate("pg_aio_statements_calls_total")
    clients = (
        f"sum {without(WAIT_LABELS)} "
        f"({scope.rate('pg_aio_wait_event_samples_total', CLIENT_BACKEND)})"
    )
    sessions = f"{clients}\n/\n{samples(scope)}"
    xacts = (
        f"sum without (datname) ({scope.rate('pg_stat_database_xact_commit_total')}"
        f" + {scope.rate('pg_stat_database_xact_rollback_total')})"
    )
    own = scope.rate("pg_aio_sampler_samples_total")
    formulas = (
        Formula(
            "statement_seconds_per_call",
            "mean execution time per statement call (pg_stat_statements)",
            f"{scope.rate('pg_aio_statements_exec_seconds_total')}\n/\n({calls} > 0)",
        ),
        Formula(
            "statement_read_wait_share",
            "share of statement time waiting on shared block reads (pg_stat_statements)",
            f"{scope.rate('pg_aio_statements_shared_block_read_seconds_total')}\n/\n"
            f"({scope.rate('pg_aio_statements_exec_seconds_total')} > 0)",
        ),
        Formula(
            "db_time_per_transaction_seconds",
            "client sessions doing work (sampled) per transaction (pg_stat_database)",
            f"(\n{sessions}\n)\n/\n(({xacts} - {own}) > 0)",
        ),
    )
    return {f.name: f for f in formulas}


# --- the write side ----------------------------------------------------------------------------


def _timed(scope: Scope, setting: str, labels: Sequence[str]) -> str:
    """The gate of a latency: the timing setting was on for the whole window."""
    on = f"min_over_time({scope.range(setting)}) == 1"
    return f"and ignoring ({', '.join(labels)})\n  {on}" if labels else f"and\n  {on}"


def write_formulas(scope: Scope, *row: str, per_target: bool = False) -> dict[str, Formula]:
    """Each write operation's rate and time per operation (and per byte where it moves bytes),
    per (backend_type, object, context) row or, `per_target`, summed over the rows; `row` are
    matchers on those labels. PostgreSQL 18's wal rows are left out (their own timing setting;
    wal_formulas has them)."""
    rows = (*row, f'object!="{vocabulary.WAL_OBJECT}"')

    gate = _timed(scope, "pg_settings_track_io_timing", IO_LABELS)
    out: list[Formula] = []
    for op, operation in WRITE_OPERATIONS.items():
        ops = total(scope.rate(f"pg_stat_io_{operation.count}_total", *rows), per_target)
        seconds = total(scope.rate(f"pg_stat_io_{operation.time}_seconds_total", *rows), per_target)
        out.append(Formula(f"{op}_ops_per_second", f"{op} operations/s", ops))
        out.append(
            Formula(
                f"{op}_latency_seconds",
                f"time per {op} (rate({op}_time) / rate({op}s))",
                f"{seconds}\n/\n({ops} > 0)\n{gate}",
            )
        )
        if operation.bytes is not None:
            moved = total(scope.rate(f"pg_stat_io_{operation.bytes}_total", *rows), per_target)
            out.append(Formula(f"{op}_bytes_per_second", f"bytes/s by {op}", moved))
            out.append(
                Formula(
                    f"{op}_seconds_per_byte",
                    f"time per byte of {op} (rate({op}_time) / rate({op}_bytes))",
                    f"{seconds}\n/\n({moved} > 0)\n{gate}",
                )
            )
    return {f.name: f for f in out}


def wal_formulas(scope: Scope) -> dict[str, Formula]:
    """WAL writes and syncs per target, the same on PostgreSQL 14-18 (pg_stat_wal collector)."""
    gate = _timed(scope, "pg_settings_track_wal_io_timing", ())
    out: list[Formula] = [
        Formula(
            "wal_bytes_per_second", "WAL generated, bytes/s", scope.rate("pg_stat_wal_bytes_total")
        )
    ]
    for op in ("write", "sync"):
        ops = scope.rate(f"pg_aio_wal_{op}s_total")
        seconds = scope.rate(f"pg_aio_wal_{op}_time_seconds_total")
        out.append(Formula(f"wal_{op}s_per_second", f"WAL {op}s/s", ops))
        out.append(
            Formula(
                f"wal_{op}_latency_seconds",
                f"time per WAL {op} (needs track_wal_io_timing)",
                f"{seconds}\n/\n({ops} > 0)\n{gate}",
            )
        )
    # Without track_wal_io_timing (off by default) the time per sync from the samples: the
    # processes in a WAL sync over the syncs per second (Little's law: the syncs in progress
    # are the rate times the time each takes). The exporter advances the sampled seconds at
    # each poll, with the syncs, so that the ratio of one scrape interval is exact (irate).
    out.append(
        Formula(
            "wal_sync_sampled_seconds",
            "time per WAL sync from the samples: processes in a WAL sync / WAL syncs per second",
            f"{scope.rate('pg_aio_wal_sync_sampled_seconds_total')}\n/\n"
            f"({scope.rate('pg_aio_wal_syncs_total')} > 0)",
        )
    )
    return {f.name: f for f in out}


def buffer_writes(scope: Scope, *extra: str) -> str:
    """Shared buffer writes per second, summed per target; `extra`: matchers on the rows."""
    writes = scope.rate("pg_stat_io_writes_total", *BUFFER_WRITES, *extra)
    return f"sum {without(IO_LABELS)} ({writes})"


def backend_write_share(scope: Scope) -> Formula:
    """Client backends' share of the shared buffer writes: above a half, the background writer
    (and checkpointer) leave the backends to clean buffers themselves."""
    return Formula(
        "backend_write_share",
        "client backends' share of shared buffer writes (relation, normal), 0..1",
        f"{buffer_writes(scope, CLIENT_BACKEND)}\n/\n({buffer_writes(scope)} > 0)",
    )


def write_wait_sessions(
    scope: Scope, io_events: str, lock_events: str, grouping: str = without(WAIT_LABELS)
) -> Formula:
    """Average sessions (io workers aside) waiting on writes: the IO wait events `io_events`
    and the LWLock waits `lock_events` (regexes), summed per target or by `grouping` (a
    `by (...)` or `without (...)` clause)."""
    return sessions(
        scope,
        "write_wait_sessions",
        "average sessions waiting on writes (IO write and WAL waits, LWLock WALWrite)",
        NOT_IO_WORKER,
        f'wait_event=~"{io_events}|{lock_events}"',
        'wait_event_type=~"IO|LWLock"',
        grouping=grouping,
    )

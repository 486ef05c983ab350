"""PromQL of the pg_stat_io and sampler figures, shared by the recording rules
(alerts/generate.py) and the dashboards (dashboards/generate.py), so that a panel and the rule
of the same name compute the same thing. Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

IO_LABELS = ("backend_type", "object", "context")
WAIT_LABELS = ("backend_type", "wait_event_type", "wait_event")


def matchers(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


def without(labels: Sequence[str]) -> str:
    return f"without ({', '.join(labels)})"


@dataclass(frozen=True)
class Scope:
    """How a formula reads the exporter's series: `selector` on every one of them, each range
    over `window`, shifted back by `offset`. The rules use a fixed window; the dashboards use
    the same formulas with Grafana's $__rate_interval and their variables."""

    selector: str
    window: str
    offset: str = ""

    def series(self, name: str, *extra: str) -> str:
        parts = matchers(self.selector, *extra)
        return f"{name}{{{parts}}}" if parts else name

    def range(self, name: str, *extra: str) -> str:
        shift = f" offset {self.offset}" if self.offset else ""
        return f"{self.series(name, *extra)}[{self.window}]{shift}"

    def rate(self, name: str, *extra: str) -> str:
        return f"rate({self.range(name, *extra)})"


@dataclass(frozen=True)
class Formula:
    name: str
    meaning: str
    expr: str


def io_formulas(scope: Scope, *row: str, per_target: bool = False) -> dict[str, Formula]:
    """The pg_stat_io read figures by name, per (backend_type, object, context) row or,
    `per_target`, summed over the rows; `row` are matchers on those row labels."""

    def total(expr: str) -> str:
        return f"sum {without(IO_LABELS)} ({expr})" if per_target else expr

    reads = total(scope.rate("pg_stat_io_reads_total", *row))
    read_bytes = total(scope.rate("pg_stat_io_read_bytes_total", *row))
    read_time = total(scope.rate("pg_stat_io_read_time_seconds_total", *row))
    hits = total(scope.rate("pg_stat_io_hits_total", *row))
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
            "shared buffer hits / (hits + reads)",
            f"{hits}\n/\n(({hits} + {reads}) > 0)",
        ),
    )
    return {f.name: f for f in formulas}


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


def in_flight_depth(scope: Scope) -> Formula:
    return Formula(
        "in_flight_depth",
        "average AIO handles in that state (pg_aios)",
        per_sample(scope, "pg_aio_in_flight_samples_total", ("state", "operation")),
    )


def in_flight_bytes(scope: Scope) -> Formula:
    return Formula(
        "in_flight_bytes",
        "average bytes in flight",
        per_sample(scope, "pg_aio_in_flight_bytes_samples_total", ("operation",)),
    )


def workload_formulas(scope: Scope) -> dict[str, Formula]:
    """Workload time per target: how long the work took, the figure that answers "faster or
    slower" (docs/metrics.md). Statement time needs pg_stat_statements; DB time per
    transaction is always there: client sessions doing work (sampled, on CPU included) per
    transaction of pg_stat_database, less the exporter's own (one per sample)."""
    calls = scope.rate("pg_stat_statements_calls_total")
    client = 'backend_type="client backend"'
    clients = (
        f"sum {without(WAIT_LABELS)} ({scope.rate('pg_aio_wait_event_samples_total', client)})"
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
            f"{scope.rate('pg_stat_statements_exec_seconds_total')}\n/\n({calls} > 0)",
        ),
        Formula(
            "statement_read_wait_share",
            "share of statement time waiting on shared block reads (pg_stat_statements)",
            f"{scope.rate('pg_stat_statements_shared_block_read_seconds_total')}\n/\n"
            f"({scope.rate('pg_stat_statements_exec_seconds_total')} > 0)",
        ),
        Formula(
            "db_time_per_transaction_seconds",
            "client sessions doing work (sampled) per transaction (pg_stat_database)",
            f"(\n{sessions}\n)\n/\n(({xacts} - {own}) > 0)",
        ),
    )
    return {f.name: f for f in formulas}

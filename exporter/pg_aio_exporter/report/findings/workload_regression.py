"""workload_regression: the work itself took longer than in the baseline (report/workload.py
measures workload time; this judges it), with the statements that slowed most."""

from __future__ import annotations

from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.report.findings.context import Context, Finding
from pg_aio_exporter.report.workload import STATEMENTS, StatementChange


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
        ctx.severity("workload_regression"),
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

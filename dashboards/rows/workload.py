"""The comparison's first row: workload time now against $offset ago (the rules'
workload_formulas), the figure that answers faster or slower; the I/O rows below explain it."""

from __future__ import annotations

from collections.abc import Callable

from alerts import promql

from dashboards.figures import BEFORE
from dashboards.panels import Grid, Item
from dashboards.rows.offset import change, now_vs_before

WORKLOAD = (
    (
        "Statement time per call",
        "statement_seconds_per_call",
        "Mean execution time per statement call (pg_stat_statements totals): how long the "
        "work took, the figure that answers faster or slower. Empty without pg_stat_statements; "
        "the mean follows the statement mix too: if the mix changed, see DB time per transaction "
        "and the report's time_ratio (docs/report.md).",
    ),
    (
        "DB time per transaction",
        "db_time_per_transaction_seconds",
        "Client sessions doing work (sampled, on CPU included) per transaction of "
        "pg_stat_database: there with or without pg_stat_statements.",
    ),
)


def workload(name: str) -> Callable[[promql.Scope], str]:
    return lambda scope: promql.workload_formulas(scope)[name].expr


def panels(g: Grid) -> list[Item]:
    """The change of each figure over the range, then each now vs before."""
    return [
        g.row(f"Workload time: now vs {BEFORE}"),
        *(
            g.place(
                change(
                    title,
                    "Over the dashboard's whole time range divided by the same over the range "
                    f"{BEFORE}, minus 1: below 0 is faster. {what}",
                    workload(formula),
                    ((None, "green"), (0.15, "orange"), (0.5, "red")),
                ),
                12,
                4,
            )
            for title, formula, what in WORKLOAD
        ),
        *(
            g.place(now_vs_before(title, what, workload(formula), "s", "{{target}}"), 12, 8)
            for title, formula, what in WORKLOAD
        ),
    ]

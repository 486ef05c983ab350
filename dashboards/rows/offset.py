"""The comparison dashboard's two kinds of panel: a figure now against $offset ago (solid and
dashed), and a figure's change over the whole range against the range $offset earlier."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from alerts import promql
from grafana_foundation_sdk.builders import stat, timeseries

from dashboards.figures import BEFORE, now_and_before, relative_change
from dashboards.panels import Q, graph, single


def now_vs_before(
    title: str,
    description: str,
    formula: Callable[[promql.Scope], str],
    unit: str,
    legend: str,
    *,
    maximum: float | None = None,
) -> timeseries.Panel:
    """`formula` over the rate interval now and $offset ago."""
    now, before = now_and_before(formula)
    return graph(
        f"{title}: now vs {BEFORE}",
        f"{description} Solid: now; dashed: the same time {BEFORE} (Prometheus offset).",
        [Q(now, f"{legend} now"), Q(before, f"{legend} {BEFORE}")],
        unit,
        maximum=maximum,
        dashed_refs=("B",),
    )


def change(
    title: str,
    description: str,
    formula: Callable[[promql.Scope], str],
    steps: Sequence[tuple[float | None, str]],
) -> stat.Panel:
    """`formula` over the dashboard's whole range against the same range earlier: one number per
    target that says "n% higher than before", the upgrade question answered at a glance."""
    return single(
        f"{title}: change vs {BEFORE}",
        description,
        [Q(relative_change(formula), "{{target}}", instant=True)],
        "percentunit",
        steps=steps,
    )

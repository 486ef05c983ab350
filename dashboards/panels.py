"""Grafana's building blocks as the dashboards use them: the grid that places panels, a query,
a graph and a single stat. No PromQL is written here: the rows (dashboards/rows/) hand in the
queries, built from the rules' formulas (alerts/promql.py) by dashboards/figures.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, Self, TypeVar

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import (
    GraphThresholdsStyleConfig,
    ReduceDataOptions,
    StackingConfig,
    VizLegendOptions,
    VizTooltipOptions,
)
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# What a row builder returns: its row header and its panels, in the order they were placed.
Item = cogbuilder.Builder[dm.Panel] | db.Row


class Placeable(Protocol):
    def id(self, id_val: int) -> Self: ...

    def grid_pos(self, grid_pos: dm.GridPos) -> Self: ...


P = TypeVar("P", bound=Placeable)


# ---------------------------------------------------------------------------------------------
# Layout: panels flow left to right and wrap, like Grafana's own grid, so a panel is described
# by its size only and positions cannot overlap by construction (the test checks it anyway).


@dataclass
class Grid:
    width: int = 24
    y: int = 0  # top of the current row
    x: int = 0
    line_height: int = 0
    next_id: int = 1

    def row(self, title: str) -> db.Row:
        self._newline()
        pos = dm.GridPos(h=1, w=self.width, x=0, y=self.y)
        self.y += 1
        return db.Row(title).id(self._id()).grid_pos(pos)

    def place(self, panel: P, w: int, h: int) -> P:
        if self.x + w > self.width:
            self._newline()
        panel = panel.id(self._id()).grid_pos(dm.GridPos(h=h, w=w, x=self.x, y=self.y))
        self.x += w
        self.line_height = max(self.line_height, h)
        return panel

    def _newline(self) -> None:
        self.y += self.line_height
        self.x = 0
        self.line_height = 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


@dataclass(frozen=True)
class Q:
    """One panel query: expression, legend, and for stats over the dashboard's whole range an
    instant evaluation (at its end), as a table for table panels."""

    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False


def targets(queries: Sequence[Q]) -> list[cogbuilder.Builder[cogvariants.Dataquery]]:
    out: list[cogbuilder.Builder[cogvariants.Dataquery]] = []
    for i, q in enumerate(queries):
        target = (
            prometheus.Dataquery().expr(q.expr).ref_id(chr(ord("A") + i)).datasource(DATASOURCE)
        )
        if q.legend:
            target.legend_format(q.legend)
        if q.instant:
            target.instant()
            if q.table:
                target.format(PromQueryFormat.TABLE)
        else:
            target.range()
        out.append(target)
    return out


class _Queried(Protocol):
    def title(self, title: str) -> Self: ...

    def description(self, description: str) -> Self: ...

    def datasource(self, datasource: dm.DataSourceRef) -> Self: ...

    def unit(self, unit: str) -> Self: ...

    def targets(self, targets: list[cogbuilder.Builder[cogvariants.Dataquery]]) -> Self: ...


Queried = TypeVar("Queried", bound=_Queried)


def _common(
    panel: Queried, title: str, description: str, queries: Sequence[Q], unit: str
) -> Queried:
    panel.title(title).description(description).datasource(DATASOURCE).unit(unit)
    return panel.targets(targets(queries))


DASHED = [
    dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]})
]


def graph(
    title: str,
    description: str,
    queries: Sequence[Q],
    unit: str,
    *,
    stacked: bool = False,
    minimum: float | None = 0,
    maximum: float | None = None,
    threshold: float | None = None,
    dashed_refs: Sequence[str] = (),
    steps: bool = False,
) -> timeseries.Panel:
    panel = _common(timeseries.Panel(), title, description, queries, unit)
    panel.legend(
        VizLegendOptions()
        .display_mode(common.LegendDisplayMode.TABLE)
        .placement(common.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["mean", "max", "lastNotNull"])
    ).tooltip(
        VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING)
    )
    panel.line_width(1).fill_opacity(25 if stacked else 10).show_points(common.VisibilityMode.NEVER)
    if steps:
        # Settings change in steps; a sloped line would suggest values that never existed.
        panel.line_interpolation(common.LineInterpolation.STEP_AFTER)
    if stacked:
        panel.stacking(StackingConfig().mode(common.StackingMode.NORMAL))
    if minimum is not None:
        panel.min(minimum)
    if maximum is not None:
        panel.max(maximum)
    if threshold is not None:
        panel.thresholds(
            db.ThresholdsConfig()
            .mode(dm.ThresholdsMode.ABSOLUTE)
            .steps(
                [
                    dm.Threshold(value=None, color="green"),
                    dm.Threshold(value=threshold, color="red"),
                ]
            )
        ).thresholds_style(
            GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)
        )
    for ref in dashed_refs:
        # Reference lines and "before" series: dashed, never stacked onto the measured ones.
        panel.override_by_query(
            ref, [*DASHED, dm.DynamicConfigValue(id_val="custom.stacking", value={"mode": "none"})]
        )
    return panel


def single(
    title: str,
    description: str,
    queries: Sequence[Q],
    unit: str,
    *,
    text: bool = False,
    mappings: dict[str, tuple[str, str]] | None = None,
    steps: Sequence[tuple[float | None, str]] = ((None, "blue"),),
) -> stat.Panel:
    """A stat showing the last value per series; `text` shows the legend (a label) instead."""
    panel = _common(stat.Panel(), title, description, queries, unit)
    panel.reduce_options(
        ReduceDataOptions().values(False).calcs(["lastNotNull"]).fields("")
    ).graph_mode(common.BigValueGraphMode.NONE).color_mode(common.BigValueColorMode.BACKGROUND)
    panel.text_mode(common.BigValueTextMode.NAME if text else common.BigValueTextMode.AUTO)
    panel.thresholds(
        db.ThresholdsConfig()
        .mode(dm.ThresholdsMode.ABSOLUTE)
        .steps([dm.Threshold(value=v, color=c) for v, c in steps])
    )
    if mappings:
        options = {
            value: dm.ValueMappingResult(text=label, color=color, index=i)
            for i, (value, (label, color)) in enumerate(mappings.items())
        }
        panel.mappings([dm.ValueMap(options=options)])
    return panel

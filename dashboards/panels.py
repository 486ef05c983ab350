"""Grafana's building blocks as the dashboards use them: the grid that places panels, a query,
a graph and a single stat. No PromQL is written here: the rows (dashboards/rows/) hand in the
queries, built from the rules' formulas (alerts/promql.py) by dashboards/figures.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, Self, TypedDict, TypeVar, Unpack

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


class GraphOptions(TypedDict, total=False):
    """graph()'s options, a type of their own so that a row's table of panels can hold them
    (`Graph`); each left out takes the default after it."""

    stacked: bool  # False
    minimum: float | None  # 0
    maximum: float | None  # None: Grafana's own
    threshold: float | None  # None: no threshold line
    dashed_refs: Sequence[str]  # (): the queries drawn dashed and not stacked
    steps: bool  # False: lines sloped between points


def graph(
    title: str,
    description: str,
    queries: Sequence[Q],
    unit: str,
    **options: Unpack[GraphOptions],
) -> timeseries.Panel:
    stacked = options.get("stacked", False)
    minimum = options.get("minimum", 0)
    maximum = options.get("maximum")
    threshold = options.get("threshold")
    steps = options.get("steps", False)
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
    for ref in options.get("dashed_refs", ()):
        # Reference lines and "before" series: dashed, never stacked onto the measured ones.
        panel.override_by_query(
            ref, [*DASHED, dm.DynamicConfigValue(id_val="custom.stacking", value={"mode": "none"})]
        )
    return panel


class StatOptions(TypedDict, total=False):
    """single()'s options, as `GraphOptions` are graph()'s."""

    text: bool  # False: the value; True: the legend (a label)
    mappings: dict[str, tuple[str, str]] | None  # None: value -> (text, colour)
    steps: Sequence[tuple[float | None, str]]  # ((None, "blue"),): threshold colours


def single(
    title: str,
    description: str,
    queries: Sequence[Q],
    unit: str,
    **options: Unpack[StatOptions],
) -> stat.Panel:
    """A stat showing the last value per series; `text` shows the legend (a label) instead."""
    text = options.get("text", False)
    mappings = options.get("mappings")
    steps = options.get("steps", ((None, "blue"),))
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
        results = {
            value: dm.ValueMappingResult(text=label, color=color, index=i)
            for i, (value, (label, color)) in enumerate(mappings.items())
        }
        panel.mappings([dm.ValueMap(options=results)])
    return panel


# ---------------------------------------------------------------------------------------------
# A row as a table: each panel's arguments and size, placed in order by `place_all`.


@dataclass(frozen=True)
class _Spec:
    title: str
    description: str
    queries: Sequence[Q]
    unit: str
    width: int
    height: int


@dataclass(frozen=True)
class Graph(_Spec):
    options: GraphOptions
    no_value: str = ""  # "": Grafana's own text for a panel without data

    def build(self) -> timeseries.Panel:
        panel = graph(self.title, self.description, self.queries, self.unit, **self.options)
        return panel.no_value(self.no_value) if self.no_value else panel


@dataclass(frozen=True)
class Stat(_Spec):
    options: StatOptions

    def build(self) -> stat.Panel:
        return single(self.title, self.description, self.queries, self.unit, **self.options)


def place_all(g: Grid, specs: Sequence[Graph | Stat]) -> list[Item]:
    return [g.place(spec.build(), spec.width, spec.height) for spec in specs]

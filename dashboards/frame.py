"""What both dashboards share around their rows: the variables (data source, servers, pg_stat_io
row, and the comparison's offset), the annotations of changes, and the dashboard itself."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from alerts import promql
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dm

from dashboards.figures import NOW, ROW_LABELS, SCRAPE_LABELS, SERVER_LABELS, servers
from dashboards.panels import DATASOURCE, Grid, Item
from pg_aio_exporter.collectors import settings

COMPARE_OFFSETS = ("1d", "7d", "30d")


def _label_values(name: str, label: str, selector: str) -> db.QueryVariable:
    return (
        db.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(
            {
                "query": f"label_values({selector}, {name})",
                "refId": "PrometheusVariableQueryEditor-VariableQuery",
            }
        )
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
        .multi(True)
        .include_all(True)
        # A pattern rather than the list of values keeps the query short. `.*` also matches a
        # series without the label: rows of the sampler metrics that pg_stat_io has no reads
        # for (e.g. walwriter waits), a target without a cluster label. job and instance are on
        # every scraped series: `.+`, as Grafana's dashboard linter asks.
        .all_value(".+" if name in SCRAPE_LABELS else ".*")
        .current(dm.VariableOption(selected=True, text=["All"], value=["$__all"]))
    )


def _custom(name: str, label: str, values: Sequence[str], description: str) -> db.CustomVariable:
    return (
        db.CustomVariable(name)
        .label(label)
        .description(description)
        .values(",".join(values))
        .current(dm.VariableOption(selected=True, text=values[0], value=values[0]))
        .options(
            [dm.VariableOption(selected=i == 0, text=v, value=v) for i, v in enumerate(values)]
        )
    )


def server_selector(labels: Sequence[str]) -> str:
    """Our pg_up filtered by the server variables before this one: each lists what the previous
    ones leave."""
    return f"pg_up{{{servers(labels)}}}"


def variables(*, comparison: bool) -> list[cogbuilder.Builder[dm.VariableModel]]:
    reads = "pg_stat_io_reads_total"
    out: list[cogbuilder.Builder[dm.VariableModel]] = [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        *(
            _label_values(label, label.capitalize(), server_selector(SERVER_LABELS[:i]))
            for i, label in enumerate(SERVER_LABELS)
        ),
        _label_values("backend_type", "Backend type", NOW.series(reads)),
        _label_values("object", "Object", NOW.series(reads, *ROW_LABELS[:1])),
        _label_values("context", "Context", NOW.series(reads, *ROW_LABELS[:2])),
    ]
    if comparison:
        out.append(
            _custom(
                "offset",
                "Compare with",
                COMPARE_OFFSETS,
                "How far back the dashed 'before' series are taken from. Type any Prometheus "
                "duration (e.g. 36h) to compare with a period before an upgrade.",
            ).allow_custom_value(True)
        )
    return out


@dataclass(frozen=True)
class Annotation:
    name: str
    color: str
    expr: str
    title: str


def _changed(metric: str) -> str:
    # A value that differs after a restart still counts, a mere gap while a target is down
    # (its series are then absent) does not, and a new target is no change (promql.value_span).
    return f"sum {promql.by(promql.TARGET)} ({promql.value_span(NOW.series(metric), '5m')}) > 0"


def annotation_specs() -> tuple[Annotation, ...]:
    """The changes annotated on every graph. The settings watched are the package's one list
    (collectors/settings.py), read when called."""
    watched = tuple(s.metric for s in settings.AIO_SETTINGS if s.watched)
    return (
        Annotation(
            "PostgreSQL version change",
            "purple",
            # Two version label sets of pg_server_info within 10 minutes: the version changed.
            f"count {promql.by(promql.TARGET)} (max_over_time({NOW.series('pg_server_info')}[10m]))"
            " > 1",
            "PostgreSQL version changed",
        ),
        Annotation("io_method change", "red", _changed("pg_aio_io_method"), "io_method changed"),
        Annotation(
            "AIO setting change",
            "orange",
            # `or`, not `+`: a setting absent on a target must not hide the others' changes.
            " or ".join(f"({_changed(m)})" for m in watched),
            "AIO setting changed",
        ),
        Annotation(
            "Server restart",
            "blue",
            _changed("pg_postmaster_start_time_seconds"),
            "PostgreSQL restarted",
        ),
        Annotation(
            "pg_stat_io reset",
            "yellow",
            _changed("pg_stat_io_stats_reset_timestamp_seconds"),
            "pg_stat_io statistics reset",
        ),
    )


def _annotations(
    specs: Sequence[Annotation],
) -> list[cogbuilder.Builder[dm.AnnotationQuery]]:
    built_in = (
        db.AnnotationQuery()
        .name("Annotations & Alerts")
        .datasource(dm.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
        .enable(True)
        .hide(True)
        .icon_color("rgba(0, 211, 255, 1)")
        .type("dashboard")
        .built_in(1)
    )
    return [
        built_in,
        *(
            db.AnnotationQuery()
            .name(a.name)
            .datasource(DATASOURCE)
            .enable(True)
            .icon_color(a.color)
            .expr(a.expr)
            for a in specs
        ),
    ]


def _prometheus_annotation_options(encoded: dict[str, Any], specs: Sequence[Annotation]) -> None:
    """The SDK's AnnotationQuery has no field for the Prometheus datasource's own annotation
    options (title, tags, step), so they are added to its output."""
    by_name = {a.name: a for a in specs}
    for item in encoded["annotations"]["list"]:
        spec = by_name.get(item["name"])
        if spec:
            item.update(
                step="1m",
                titleFormat=spec.title,
                tagKeys="target",
                textFormat="{{target}}",
                useValueForTime=False,
            )


def dashboard(
    title: str,
    uid: str,
    description: str,
    rows: Sequence[Callable[[Grid], list[Item]]],
    *,
    comparison: bool,
    specs: Sequence[Annotation],
) -> dict[str, Any]:
    """A dashboard of `rows` (dashboards/rows/: each builds its row's header and panels) placed
    one after the other on one grid, as JSON."""
    board = (
        db.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["postgresql", "aio", "pg_aio_exporter"])
        .editable()
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .time("now-3h", "now")
        .refresh("30s")
        .timezone("browser")
        .variables(variables(comparison=comparison))
        .annotations(_annotations(specs))
        .link(
            db.DashboardLink("PostgreSQL AIO")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags(["pg_aio_exporter"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )
    grid = Grid()
    for build in rows:
        for item in build(grid):
            if isinstance(item, db.Row):
                board.with_row(item)
            else:
                board.with_panel(item)
    encoded: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    _prometheus_annotation_options(encoded, specs)
    return encoded

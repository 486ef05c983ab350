"""Builds the shipped Grafana dashboards with Grafana's foundation SDK and writes them as JSON.

    python -m dashboards.generate           # rewrite dashboards/*.json (make dashboards)
    python -m dashboards.generate --check   # exit 1 when the committed JSON is stale

(from the repository's root, with the package installed.)

The JSON files are what users import and what deploy/ provisions; this file is their source.
Panels compute the recording rules' formulas (alerts/promql.py: both read the same PromQL) over
Grafana's $__rate_interval instead of reading the rules' fixed windows: they hold at any scrape
interval (set it as the data source's scrape interval) and need no rules loaded. Every query
carries the rules' selector (alerts/params.yaml), so another exporter's series of the same names
never show.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from alerts import promql
from alerts.generate import THRESHOLDS, load_params
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.builders.common import (
    GraphThresholdsStyleConfig,
    ReduceDataOptions,
    StackingConfig,
    VizLegendOptions,
    VizTooltipOptions,
)
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from pg_aio_exporter import thresholds
from pg_aio_exporter.collectors.settings import AIO_SETTINGS
from pg_aio_exporter.vocabulary import MIB, SUBMISSION_QUEUE, WAIT_LABELS, WRITE_OPERATIONS

HERE = Path(__file__).resolve().parent

OVERVIEW_FILE = HERE / "pg-aio-overview.json"
COMPARISON_FILE = HERE / "pg-aio-comparison.json"


DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
COMPARE_OFFSETS = ("1d", "7d", "30d")

# Every series of ours: the shipped rules' selector (target!="" keeps other exporters out).
OURS = load_params()["selector"]
# Which servers the panels show: Prometheus' scrape labels, the extra labels a target may carry
# (`labels:` / `--label`, or a Prometheus external label; add yours here), then the target. Each
# is a multi-value variable whose "All" is a pattern (_label_values).
SCRAPE_LABELS = ("job", "instance")
EXTRA_LABELS = ("cluster",)
SERVER_LABELS = (*SCRAPE_LABELS, *EXTRA_LABELS, "target")


def servers(labels: Sequence[str]) -> str:
    """Our series of the servers chosen with the variables of `labels`."""
    return promql.matchers(OURS, *(f'{label}=~"${label}"' for label in labels))


T = servers(SERVER_LABELS)
# The exporter's own series carry the target but not its extra labels.
T_SELF = servers([label for label in SERVER_LABELS if label not in EXTRA_LABELS])
# Matchers on pg_stat_io's row labels.
ROW_LABELS = ('backend_type=~"$backend_type"', 'object=~"$object"', 'context=~"$context"')
ROW_LEGEND = "{{target}} {{backend_type}} / {{object}} / {{context}}"
# Matchers for the sampler's wait event series, which have backend_type but no object/context.
BACKEND = 'backend_type=~"$backend_type"'
IO_WAITS = (BACKEND, 'wait_event_type="IO"')
# LWLocks that are waits for I/O: the io worker queue, and another backend's io_uring ring.
QUEUE_WAITS = (BACKEND, f'wait_event=~"{SUBMISSION_QUEUE}|AioUringCompletion"')
# Shown by the io worker panels when a target runs none (io_method sync or io_uring): their
# metrics are absent then, never 0.
NO_IO_WORKERS = "no io workers (io_method sync or io_uring)"
# The formulas over Grafana's rate interval (at least 4 scrapes), now and $offset ago.
NOW = promql.Scope(T, "$__rate_interval")
EARLIER = promql.Scope(T, "$__rate_interval", offset="$offset")
OVER = "over the rate interval"


def io_figure(name: str, scope: Any = NOW, *, per_target: bool = False, scale: int = 1) -> str:
    """A pg_stat_io read figure (alerts/promql.py io_formulas) per row chosen with the
    variables or, `per_target`, summed over all of a target's rows."""
    row = () if per_target else ROW_LABELS
    expr: str = promql.io_formulas(scope, *row, per_target=per_target)[name].expr
    return f"(\n{expr}\n) * {scale}" if scale != 1 else expr


def write_figure(name: str, *, scale: int = 1) -> str:
    """A pg_stat_io write figure (alerts/promql.py write_formulas) per row chosen with the
    variables."""
    expr: str = promql.write_formulas(NOW, *ROW_LABELS)[name].expr
    return f"(\n{expr}\n) * {scale}" if scale != 1 else expr


# The shipped thresholds, judging storage by the default storage class.
SHIPPED = thresholds.load(path=THRESHOLDS)
assert SHIPPED.writes is not None  # the shipped document has the write alerts
WRITE_WAIT_EVENTS = "|".join(SHIPPED.writes.write_wait_events)
WRITE_LOCK_EVENTS = "|".join(SHIPPED.writes.write_lock_events)
DEFAULT_CLASS = SHIPPED.storage.name
MAX_WAL_SYNC = SHIPPED.storage.seconds_per_sync


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

    def place(self, panel: Any, w: int, h: int) -> Any:
        if self.x + w > self.width:
            self._newline()
        panel.id(self._id()).grid_pos(dm.GridPos(h=h, w=w, x=self.x, y=self.y))
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


def _targets(queries: Sequence[Q]) -> list[cogbuilder.Builder[cogvariants.Dataquery]]:
    out = []
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
    # The SDK types a panel's targets as builders of any data query (its Builder is invariant).
    return cast(list[cogbuilder.Builder[cogvariants.Dataquery]], out)


def _common(panel: Any, title: str, description: str, queries: Sequence[Q], unit: str) -> Any:
    panel.title(title).description(description).datasource(DATASOURCE).unit(unit)
    return panel.targets(_targets(queries))


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
    panel: timeseries.Panel = _common(timeseries.Panel(), title, description, queries, unit)
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
    panel: stat.Panel = _common(stat.Panel(), title, description, queries, unit)
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


def _selected(metrics: str) -> str:
    """`a or b` (a setting renamed between versions) with the target selector on each."""
    return " or ".join(f"{name}{{{T}}}" for name in metrics.split(" or "))


def setting_stats(g: Grid, width: int, specs: Sequence[tuple[str, str, str, str]]) -> list[Any]:
    """One stat per (title, metric, unit, description): each target's value of a setting."""
    return [
        g.place(single(title, description, [Q(_selected(metric), "{{target}}")], unit), width, 4)
        for title, metric, unit, description in specs
    ]


# ---------------------------------------------------------------------------------------------
# Variables and annotations, shared by both dashboards.


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


def variables(*, comparison: bool) -> list[Any]:
    reads = "pg_stat_io_reads_total"
    out: list[Any] = [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        *(
            _label_values(label, label.capitalize(), server_selector(SERVER_LABELS[:i]))
            for i, label in enumerate(SERVER_LABELS)
        ),
        _label_values("backend_type", "Backend type", f"{reads}{{{T}}}"),
        _label_values("object", "Object", f'{reads}{{{T}, backend_type=~"$backend_type"}}'),
        _label_values(
            "context",
            "Context",
            f'{reads}{{{T}, backend_type=~"$backend_type", object=~"$object"}}',
        ),
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
    return f"sum by (target) ({promql.value_span(f'{metric}{{{T}}}', '5m')}) > 0"


# The settings whose changes are annotated: the package's one list (collectors/settings.py).
SETTINGS_WATCHED = tuple(s.metric for s in AIO_SETTINGS if s.watched)

ANNOTATIONS = (
    Annotation(
        "PostgreSQL version change",
        "purple",
        # Two version label sets of pg_server_info within 10 minutes: the version changed.
        f"count by (target) (max_over_time(pg_server_info{{{T}}}[10m])) > 1",
        "PostgreSQL version changed",
    ),
    Annotation("io_method change", "red", _changed("pg_aio_io_method"), "io_method changed"),
    Annotation(
        "AIO setting change",
        "orange",
        # `or`, not `+`: a setting absent on a target must not hide the others' changes.
        " or ".join(f"({_changed(m)})" for m in SETTINGS_WATCHED),
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


def annotation_queries() -> list[cogbuilder.Builder[dm.AnnotationQuery]]:
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
            for a in ANNOTATIONS
        ),
    ]


def _prometheus_annotation_options(encoded: dict[str, Any]) -> None:
    """The SDK's AnnotationQuery has no field for the Prometheus datasource's own annotation
    options (title, tags, step), so they are added to its output."""
    by_name = {a.name: a for a in ANNOTATIONS}
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


def _dashboard(
    title: str,
    uid: str,
    description: str,
    build_panels: Callable[[Grid], list[Any]],
    *,
    comparison: bool,
) -> dict[str, Any]:
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
        .annotations(annotation_queries())
        .link(
            db.DashboardLink("PostgreSQL AIO")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags(["pg_aio_exporter"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )
    for panel in build_panels(Grid()):
        if isinstance(panel, db.Row):
            board.with_row(panel)
        else:
            board.with_panel(panel)
    encoded: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    _prometheus_annotation_options(encoded)
    return encoded


# ---------------------------------------------------------------------------------------------
# PostgreSQL AIO overview


def write_panels(g: Grid) -> list[Any]:
    """The write side: time per write and per MiB written, WAL, who writes, write waits."""
    wal = promql.wal_formulas(NOW)
    waits = promql.write_wait_sessions(NOW, WRITE_WAIT_EVENTS, WRITE_LOCK_EVENTS)
    per_wait = waits.expr.replace(
        f"sum {promql.without(WAIT_LABELS)}", "sum by (target, wait_event_type, wait_event)"
    )
    return [
        g.row("Writes: latency, WAL, who writes"),
        g.place(
            graph(
                "Write time per MiB",
                f"Time per MiB of buffer writes and of relation extension {OVER} "
                "(as pg_aio_target:write_seconds_per_byte, per row). Writes land in the OS page "
                "cache: time per MiB rises when the kernel throttles dirty pages or the volume "
                "is saturated. Needs track_io_timing.",
                [
                    Q(write_figure("write_seconds_per_byte", scale=MIB), f"write {ROW_LEGEND}"),
                    Q(write_figure("extend_seconds_per_byte", scale=MIB), f"extend {ROW_LEGEND}"),
                ],
                "s",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Write time per operation",
                f"Time per buffer write, relation extension, writeback request and data file "
                f"fsync {OVER} (as pg_aio_target:<op>_latency_seconds, per row). The "
                "checkpointer's fsyncs at the end of a checkpoint are the slowest.",
                [
                    Q(write_figure(f"{op}_latency_seconds"), f"{op} {ROW_LEGEND}")
                    for op in WRITE_OPERATIONS
                ],
                "s",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "WAL write and sync time",
                f"Time per WAL write and per WAL sync {OVER} (as "
                "pg_aio_target:wal_write_latency_seconds, wal_sync_latency_seconds; the same "
                "names on PostgreSQL 16, 17 and 18). Every commit waits for a sync: the dashed "
                "line is PgAioWalSyncLatencyHigh's threshold for the default storage class "
                f"({DEFAULT_CLASS}). Needs track_wal_io_timing.",
                [
                    Q(wal["wal_write_latency_seconds"].expr, "{{target}} write"),
                    Q(wal["wal_sync_latency_seconds"].expr, "{{target}} sync"),
                ],
                "s",
                threshold=MAX_WAL_SYNC,
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Who writes shared buffers",
                f"Shared buffers written per second by backend type {OVER} (relation, context "
                "normal). checkpointer: at checkpoints; background writer: ahead of need; client "
                "backend: a query had to clean a buffer itself because the background writer "
                "fell behind (PgAioBackendsWritingBuffers).",
                [
                    Q(
                        "sum by (target, backend_type) ("
                        + NOW.rate("pg_stat_io_write_bytes_total", *promql.BUFFER_WRITES)
                        + ")",
                        "{{target}} {{backend_type}}",
                    )
                ],
                "Bps",
                stacked=True,
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Sessions waiting on writes",
                f"Average sessions (io workers aside) in write waits {OVER}: IO/DataFileWrite, "
                "DataFileExtend, DataFileFlush, DataFileSync, WalWrite, WalSync, ... and "
                "LWLock/WALWrite, sessions queueing behind another session's WAL flush (group "
                "commit). Many waiting while WAL sync time climbs: storage saturated by writes "
                "(PgAioStorageSaturatedByWrites).",
                [Q(per_wait, "{{target}} {{wait_event_type}} / {{wait_event}}")],
                "none",
                stacked=True,
            ),
            12,
            8,
        ),
    ]


def overview_panels(g: Grid) -> list[Any]:
    on_off = {"0": ("off", "red"), "1": ("on", "green")}
    return [
        g.row("Server and AIO settings"),
        g.place(
            single(
                "Server reachable",
                "pg_up: 1 when the exporter's last poll reached the server. When it is 0 the "
                "exporter publishes no other PostgreSQL series for that target, so the panels "
                "below go blank instead of showing stale data.",
                [Q(f"pg_up{{{T}}}", "{{target}}")],
                "none",
                mappings={"0": ("DOWN", "red"), "1": ("UP", "green")},
            ),
            4,
            4,
        ),
        g.place(
            single(
                "PostgreSQL version",
                "Server version per target (pg_server_info). AIO and the pg_aio_* sampler "
                "metrics need PostgreSQL 18; on 16 and 17 only pg_stat_io is available.",
                [Q(f"pg_server_info{{{T}}}", "{{version}}")],
                "none",
                text=True,
            ),
            4,
            4,
        ),
        g.place(
            single(
                "io_method",
                "Active io_method (pg_aio_io_method == 1): sync reads in the backend itself, "
                "worker hands reads to io worker processes, io_uring submits them to the kernel. "
                "Changing it needs a restart.",
                [Q(f"pg_aio_io_method{{{T}}} == 1", "{{io_method}}")],
                "none",
                text=True,
            ),
            4,
            4,
        ),
        *setting_stats(
            g,
            3,
            (
                (
                    "io_workers (19: io_max_workers)",
                    "pg_settings_io_workers or pg_settings_io_max_workers",
                    "none",
                    "Configured io worker processes (io_method=worker only): io_workers on "
                    "PostgreSQL 18; on 19 the pool sizes itself and this is its ceiling, "
                    "io_max_workers. Compare with the running count and their utilisation "
                    "below. Reload to change.",
                ),
                (
                    "effective_io_concurrency",
                    "pg_settings_effective_io_concurrency",
                    "none",
                    "How many reads a backend may have in flight ahead of need (read-ahead "
                    "depth of sequential and bitmap scans).",
                ),
                (
                    "io_combine_limit",
                    "pg_settings_io_combine_limit_bytes",
                    "bytes",
                    "Largest single read PostgreSQL 18 builds by combining adjacent blocks. The "
                    "average read size below approaches it when combining works.",
                ),
            ),
        ),
        g.place(
            single(
                "track_io_timing",
                "Without track_io_timing PostgreSQL measures no read time: every latency "
                "panel stays empty. Turn it on (ALTER SYSTEM, reload).",
                [Q(f"pg_settings_track_io_timing{{{T}}}", "{{target}}")],
                "none",
                mappings=on_off,
                steps=((None, "red"), (1, "green")),
            ),
            3,
            4,
        ),
        g.place(
            single(
                "Settings awaiting restart",
                "Number of settings edited but not active until a restart "
                "(pg_settings_pending_restart). 0 is the normal state.",
                [
                    Q(
                        f"sum by (target) (pg_settings_pending_restart{{{T}}}) "
                        f"or on (target) sum by (target) (0 * pg_up{{{T}}})",
                        "{{target}}",
                    )
                ],
                "none",
                steps=((None, "green"), (1, "orange")),
            ),
            4,
            4,
        ),
        *setting_stats(
            g,
            4,
            (
                (
                    "io_max_concurrency",
                    "pg_settings_io_max_concurrency",
                    "none",
                    "Most AIO handles one backend may have in flight (-1 resolved to its value, "
                    "sized from shared_buffers). Caps the in-flight depth below.",
                ),
                (
                    "shared_buffers",
                    "pg_settings_shared_buffers_bytes",
                    "bytes",
                    "Buffer cache size: reads not found here go to the OS or the disk and are "
                    "the reads timed on this dashboard.",
                ),
            ),
        ),
        g.place(
            table.Panel()
            .title("Firing AIO alerts")
            .description(
                "The shipped PgAio* alerts firing now, from Prometheus' ALERTS series (every "
                "target, so that a filter never hides an alert). Empty is the normal state."
            )
            .datasource(DATASOURCE)
            .targets(
                _targets(
                    [
                        Q(
                            'ALERTS{alertname=~"PgAio.*", alertstate="firing"}',
                            instant=True,
                            table=True,
                        )
                    ]
                )
            )
            .with_transformation(
                dm.DataTransformerConfig(
                    id_val="organize",
                    options={
                        "excludeByName": {
                            "Time": True,
                            "Value": True,
                            "__name__": True,
                            "alertstate": True,
                        }
                    },
                )
            )
            .no_value("no PgAio alert firing"),
            12,
            4,
        ),
        g.row("Read latency: time spent waiting for reads"),
        g.place(
            graph(
                "Read wait per operation",
                f"read_time / reads {OVER} (as pg_aio:read_latency_seconds): how long a "
                "backend waited per read operation. Under AIO this is wait time, not device "
                "time. On PostgreSQL 18 one operation covers up to io_combine_limit blocks, so "
                "this rises after a 17 -> 18 upgrade with no storage change: judge storage by "
                "the per-MiB panel next to it.",
                [Q(io_figure("read_latency_seconds"), ROW_LEGEND)],
                "s",
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Read wait per MiB",
                f"read_time / read_bytes {OVER}, scaled to one MiB "
                "(as pg_aio:read_seconds_per_byte x 2^20). Independent of how many blocks each "
                "read combines, hence comparable across PostgreSQL 17 and 18 and across "
                "io_method settings.",
                [Q(io_figure("read_seconds_per_byte", scale=MIB), ROW_LEGEND)],
                "s",
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Average read size",
                f"read_bytes / reads {OVER} (as pg_aio:read_size_bytes), dashed: "
                "io_combine_limit. 8 KiB means no combining (random access, or PostgreSQL 17); "
                "sequential scans on 18 approach io_combine_limit.",
                [
                    Q(io_figure("read_size_bytes"), ROW_LEGEND),
                    Q(f"pg_settings_io_combine_limit_bytes{{{T}}}", "{{target}} io_combine_limit"),
                ],
                "bytes",
                dashed_refs=("B",),
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Buffer hit ratio",
                f"hits / (hits + reads) {OVER} (as pg_aio:hit_ratio). Near 100% almost "
                "nothing is read from storage, so io_method and AIO settings cannot matter "
                "much for that row.",
                [Q(io_figure("hit_ratio"), ROW_LEGEND)],
                "percentunit",
                maximum=1,
            ),
            12,
            8,
        ),
        g.row("Read and write throughput"),
        g.place(
            graph(
                "Read operations per second",
                f"Read operations per second {OVER} (as pg_aio:read_ops_per_second). After "
                "a 17 -> 18 upgrade this falls for the same bytes read because reads are "
                "combined: read throughput next to it is the like-for-like figure.",
                [Q(io_figure("read_ops_per_second"), ROW_LEGEND)],
                "iops",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Read throughput",
                f"Bytes read from outside shared buffers per second {OVER} "
                "(as pg_aio:read_bytes_per_second). Compare with the volume's throughput limit "
                "(cloud volumes often cap it).",
                [Q(io_figure("read_bytes_per_second"), ROW_LEGEND)],
                "Bps",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Write and extend throughput",
                f"Bytes written and bytes added by relation extension per second {OVER} "
                "(pg_stat_io_write_bytes_total, pg_stat_io_extend_bytes_total). Writes by client "
                "backends mean the background writer and checkpointer do not keep up with "
                "dirty buffers.",
                [
                    Q(
                        f"sum by (target, backend_type, context) "
                        f"({NOW.rate('pg_stat_io_write_bytes_total', *ROW_LABELS)})",
                        "{{target}} write {{backend_type}} / {{context}}",
                    ),
                    Q(
                        f"sum by (target, backend_type, context) "
                        f"({NOW.rate('pg_stat_io_extend_bytes_total', *ROW_LABELS)})",
                        "{{target}} extend {{backend_type}} / {{context}}",
                    ),
                ],
                "Bps",
            ),
            8,
            8,
        ),
        *write_panels(g),
        g.row("Sessions waiting, io workers, in-flight I/O"),
        g.place(
            graph(
                "Active sessions by wait event",
                f"Average active sessions in each wait event {OVER} "
                "(as pg_aio:active_sessions, sampled from pg_stat_activity; CPU = running). "
                "IO/AioIoCompletion: waiting for an io worker or the kernel to finish a read; "
                "IO/DataFileRead in a client backend: a synchronous read; "
                "LWLock/AioWorkerSubmissionQueue: contention on the io worker queue; "
                "io_uring: IO/AioIoUringExecution waits for the kernel to complete a read, "
                "IO/AioIoUringSubmit hands reads over (cached ones complete there), "
                "LWLock/AioUringCompletion waits for another backend's ring.",
                [
                    Q(
                        f"sum by (target, wait_event_type, wait_event) "
                        f"({promql.active_sessions(NOW, BACKEND).expr})",
                        "{{target}} {{wait_event_type}} / {{wait_event}}",
                    )
                ],
                "none",
                stacked=True,
            ),
            12,
            9,
        ),
        g.place(
            graph(
                "Sessions waiting on I/O by backend type",
                f"Average sessions in IO wait events, on the io worker submission queue or on "
                f"another backend's io_uring ring {OVER}, per backend type. io workers in "
                "IO/DataFileRead do the reads that client backends wait for in "
                "IO/AioIoCompletion; with io_uring the backends wait themselves, in "
                "IO/AioIoUringExecution. IO waits staying high after raising io_workers mean "
                "the storage, not the pool, is the bottleneck.",
                [
                    Q(
                        "sum by (target, backend_type, wait_event) "
                        f"({promql.active_sessions(NOW, *IO_WAITS).expr})",
                        "{{target}} {{backend_type}} {{wait_event}}",
                    ),
                    Q(
                        "sum by (target, backend_type, wait_event) "
                        f"({promql.active_sessions(NOW, *QUEUE_WAITS).expr})",
                        "{{target}} {{backend_type}} {{wait_event}}",
                    ),
                ],
                "none",
                stacked=True,
            ),
            12,
            9,
        ),
        g.place(
            graph(
                "io worker utilisation",
                f"Share of samples {OVER} in which io workers were not idle "
                "(as pg_aio:io_worker_utilization). Near 100% together with "
                "AioWorkerSubmissionQueue waits: raise io_workers (PostgreSQL 18). On 19 the "
                "pool grows by itself while they are busy: only a pool pinned at "
                "io_max_workers while reads queue needs io_max_workers raised: the second "
                "line, running / io_max_workers (as pg_aio:io_worker_pool_share), at 100% "
                "while the first is high is that. Low while clients wait on "
                "AioIoCompletion: the storage is slow, not the pool.",
                [
                    Q(promql.io_worker_utilization(NOW).expr, "{{target}}"),
                    Q(
                        promql.io_worker_pool_share(NOW).expr,
                        "{{target}} running / io_max_workers (PostgreSQL 19)",
                    ),
                ],
                "percentunit",
                maximum=1,
                threshold=0.9,
            ).no_value(NO_IO_WORKERS),
            8,
            8,
        ),
        g.place(
            graph(
                "io workers: running vs io_workers / io_max_workers",
                "io worker processes seen in the last sample (pg_aio_io_workers) and the "
                "settings (dashed), which only matter with io_method=worker. PostgreSQL 18: "
                "io_workers; fewer running than configured right after a reload is normal, "
                "for long it is not. PostgreSQL 19 sizes the pool itself between "
                "io_min_workers and io_max_workers: the pool pinned at io_max_workers while "
                "reads queue (utilisation near 100% or submission queue waits) is the one to "
                "grow: raise io_max_workers, and io_min_workers for bursty loads.",
                [
                    Q(f"pg_aio_io_workers{{{T}}}", "{{target}} running"),
                    *(
                        Q(
                            f"pg_settings_{name}{{{T}}} and ignoring (io_method)"
                            f' (pg_aio_io_method{{{T}, io_method="worker"}} == 1)',
                            f"{{{{target}}}} {name}",
                        )
                        for name in ("io_workers", "io_max_workers", "io_min_workers")
                    ),
                ],
                "none",
                dashed_refs=("B", "C", "D"),
                steps=True,
            ).no_value(NO_IO_WORKERS),
            8,
            8,
        ),
        g.place(
            graph(
                "In-flight AIO depth",
                f"Average AIO handles in each state {OVER} (as pg_aio:in_flight_depth, "
                "sampled from pg_aios), stacked; dashed: the most seen in one sample during "
                "the last poll interval (pg_aio_in_flight_max). Depth near io_max_concurrency "
                "x sessions means backends queue I/O faster than storage completes it. On fast "
                "storage handles complete between samples and depth stays near 0.",
                [
                    Q(promql.in_flight_depth(NOW).expr, "{{target}} {{state}} {{operation}}"),
                    Q(f"pg_aio_in_flight_max{{{T}}}", "{{target}} max {{operation}}"),
                ],
                "none",
                stacked=True,
                dashed_refs=("B",),
            ),
            8,
            8,
        ),
        g.row("Exporter"),
        g.place(
            graph(
                "Poll and sample duration (p99)",
                "99th percentile of the exporter's poll round trip per collector and of one "
                "sampler round trip. A poll near the poll interval, or a sample near the sample "
                "interval, means the server answers slowly: expect gaps and overruns.",
                [
                    Q(
                        "histogram_quantile(0.99, sum by (target, collector, le) "
                        f"(rate(pg_aio_exporter_poll_duration_seconds_bucket{{{T_SELF}}}[$__rate_interval])))",
                        "{{target}} poll {{collector}}",
                    ),
                    Q(
                        "histogram_quantile(0.99, sum by (target, le) "
                        f"(rate(pg_aio_exporter_sample_duration_seconds_bucket{{{T_SELF}}}[$__rate_interval])))",
                        "{{target}} sample",
                    ),
                ],
                "s",
            ),
            9,
            7,
        ),
        g.place(
            graph(
                "Poll errors and sample overruns",
                "Failed polls per second by collector and kind (the runbook of "
                "PgAioPollsFailing says what each kind means), samples skipped because the "
                "previous one still ran (overruns: the server answers slowly) and samples "
                "skipped because the exporter woke late (stalls: it lacks CPU). All are 0 on a "
                "healthy target.",
                [
                    Q(
                        "sum by (target, collector, kind) "
                        f"(rate(pg_aio_exporter_poll_errors_total{{{T_SELF}}}[$__rate_interval]))",
                        "{{target}} {{collector}} {{kind}}",
                    ),
                    Q(
                        f"rate(pg_aio_exporter_sample_overruns_total{{{T_SELF}}}[$__rate_interval])",
                        "{{target}} sample overruns",
                    ),
                    Q(
                        f"rate(pg_aio_exporter_sample_stalls_total{{{T_SELF}}}[$__rate_interval])",
                        "{{target}} sample stalls",
                    ),
                ],
                "reqps",
            ),
            9,
            7,
        ),
        g.place(
            single(
                "Since last successful poll",
                "Seconds since the exporter last polled every collector successfully. It "
                "should stay below two poll intervals.",
                [
                    Q(
                        f"time() - pg_aio_exporter_last_poll_success_timestamp_seconds{{{T_SELF}}}",
                        "{{target}}",
                    )
                ],
                "s",
                steps=((None, "green"), (90, "orange"), (300, "red")),
            ),
            6,
            7,
        ),
    ]


# ---------------------------------------------------------------------------------------------
# AIO upgrade and io_method comparison


@dataclass(frozen=True)
class Figure:
    title: str
    formula: str  # a name of alerts/promql.py io_formulas
    unit: str
    what: str
    scale: int = 1


FIGURES = (
    Figure(
        "Read wait per operation",
        "read_latency_seconds",
        "s",
        "Wait time per read operation. Rises after a 17 -> 18 upgrade because one operation "
        "reads up to io_combine_limit blocks: read it with the per-MiB panel next to it.",
    ),
    Figure(
        "Read wait per MiB",
        "read_seconds_per_byte",
        "s",
        "Wait time per MiB read: where time goes, not how fast the work ran. Under io_method "
        "worker and io_uring it counts only the part of each read not overlapped with other "
        "work, so across versions and io_method settings it can rise while the workload gets "
        "faster: judge by the workload time row above.",
        scale=MIB,
    ),
    Figure(
        "Average read size",
        "read_size_bytes",
        "bytes",
        "Bytes per read operation: I/O combining at work (8 KiB = none, PostgreSQL 17).",
    ),
    Figure(
        "Read operations per second",
        "read_ops_per_second",
        "iops",
        "Read operations per second. Falls on 18 for the same bytes when reads are combined.",
    ),
    Figure(
        "Read throughput",
        "read_bytes_per_second",
        "Bps",
        "Bytes read from outside shared buffers per second: the same work should read the same "
        "bytes before and after.",
    ),
    Figure(
        "Buffer hit ratio",
        "hit_ratio",
        "percentunit",
        "hits / (hits + reads). If it moved, the workload or the cache changed, and the latency "
        "comparison is between different work.",
    ),
)

BEFORE = "${offset} ago"


def _both(fig: Figure, *, per_target: bool) -> tuple[str, str]:
    """A figure now and $offset ago."""
    now, earlier = (
        io_figure(fig.formula, scope, per_target=per_target, scale=fig.scale)
        for scope in (NOW, EARLIER)
    )
    return now, earlier


def _now_vs_before(
    title: str,
    description: str,
    exprs: tuple[str, str],
    unit: str,
    legend: str,
    *,
    maximum: float | None = None,
) -> timeseries.Panel:
    """`exprs`: the same query now and $offset ago."""
    now, before = exprs
    return graph(
        f"{title}: now vs {BEFORE}",
        f"{description} Solid: now; dashed: the same time {BEFORE} (Prometheus offset).",
        [Q(now, f"{legend} now"), Q(before, f"{legend} {BEFORE}")],
        unit,
        maximum=maximum,
        dashed_refs=("B",),
    )


def _change(fig: Figure) -> stat.Panel:
    # The figure over the whole dashboard range against the same range earlier: one number per
    # target that says "n% higher than before", the upgrade question answered at a glance.
    now, earlier = (
        io_figure(fig.formula, promql.Scope(T, "$__range", offset=offset), per_target=True)
        for offset in ("", "$offset")
    )
    worse_up = fig.formula in {"read_latency_seconds", "read_seconds_per_byte"}
    return single(
        f"{fig.title}: change vs {BEFORE}",
        "The figure over the dashboard's whole time range (from the counters' rates over it) "
        f"divided by the same over the range {BEFORE}, minus 1. {fig.what}",
        [Q(f"(\n{now}\n)\n/\n(\n{earlier}\n)\n- 1", "{{target}}", instant=True)],
        "percentunit",
        steps=((None, "green"), (0.2, "orange"), (0.5, "red")) if worse_up else ((None, "blue"),),
    )


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


def _workload_change(title: str, formula: str, what: str) -> stat.Panel:
    now, earlier = (
        promql.workload_formulas(promql.Scope(T, "$__range", offset=offset))[formula].expr
        for offset in ("", "$offset")
    )
    return single(
        f"{title}: change vs {BEFORE}",
        "Over the dashboard's whole time range divided by the same over the range "
        f"{BEFORE}, minus 1: below 0 is faster. {what}",
        [Q(f"(\n{now}\n)\n/\n(\n{earlier}\n)\n- 1", "{{target}}", instant=True)],
        "percentunit",
        steps=((None, "green"), (0.15, "orange"), (0.5, "red")),
    )


def workload_panels(g: Grid) -> list[Any]:
    """Workload time first: the I/O figures below explain it."""
    return [
        g.row(f"Workload time: now vs {BEFORE}"),
        *(g.place(_workload_change(*spec), 12, 4) for spec in WORKLOAD),
        *(
            g.place(
                _now_vs_before(
                    title,
                    what,
                    (
                        promql.workload_formulas(NOW)[formula].expr,
                        promql.workload_formulas(EARLIER)[formula].expr,
                    ),
                    "s",
                    "{{target}}",
                ),
                12,
                8,
            )
            for title, formula, what in WORKLOAD
        ),
    ]


def comparison_panels(g: Grid) -> list[Any]:
    return [
        *workload_panels(g),
        g.row("What ran when"),
        g.place(
            statetimeline.Panel()
            .title("PostgreSQL version and io_method")
            .description(
                "Which server version (pg_server_info) and which io_method (pg_aio_io_method "
                "== 1) each target ran over time. A change of either is also an annotation on "
                "every graph, so before/after is visible on all of them."
            )
            .datasource(DATASOURCE)
            .targets(
                _targets(
                    [
                        Q(f"pg_server_info{{{T}}}", "{{target}} PostgreSQL {{version}}"),
                        Q(f"pg_aio_io_method{{{T}}} == 1", "{{target}} io_method {{io_method}}"),
                    ]
                )
            )
            .mappings(
                [
                    dm.ValueMap(
                        options={"1": dm.ValueMappingResult(text="active", color="green", index=0)}
                    )
                ]
            )
            .show_value(common.VisibilityMode.NEVER),
            12,
            6,
        ),
        g.place(
            graph(
                "AIO settings over time",
                "io_workers (19: io_min_workers, io_max_workers), effective_io_concurrency, "
                "maintenance_io_concurrency and io_max_concurrency as steps. Their changes are "
                "annotated on every graph: a latency shift that lines up with one is the "
                "setting's effect.",
                [
                    Q(f"pg_settings_{name}{{{T}}}", f"{{{{target}}}} {name}")
                    for name in (
                        "io_workers",
                        "io_min_workers",
                        "io_max_workers",
                        "effective_io_concurrency",
                        "maintenance_io_concurrency",
                        "io_max_concurrency",
                    )
                ],
                "none",
                steps=True,
            ),
            12,
            6,
        ),
        g.row(f"Per target: now vs {BEFORE}"),
        *(g.place(_change(fig), 6, 4) for fig in FIGURES[:4]),
        *(
            g.place(
                _now_vs_before(
                    fig.title,
                    fig.what,
                    _both(fig, per_target=True),
                    fig.unit,
                    "{{target}}",
                    maximum=1 if fig.unit == "percentunit" else None,
                ),
                12,
                8,
            )
            for fig in FIGURES
        ),
        g.place(
            _now_vs_before(
                "io worker utilisation",
                "Share of samples in which io workers were busy (only io_method=worker has "
                "io workers).",
                (
                    promql.io_worker_utilization(NOW).expr,
                    promql.io_worker_utilization(EARLIER).expr,
                ),
                "percentunit",
                "{{target}}",
                maximum=1,
            ).no_value(NO_IO_WORKERS),
            12,
            8,
        ),
        g.place(
            _now_vs_before(
                "Sessions waiting on I/O",
                "Average sessions in IO wait events (all backend types, io workers included).",
                (
                    f"sum by (target) ({promql.active_sessions(NOW, *IO_WAITS).expr})",
                    f"sum by (target) ({promql.active_sessions(EARLIER, *IO_WAITS).expr})",
                ),
                "none",
                "{{target}}",
            ),
            12,
            8,
        ),
        g.row(f"By backend type, object and context: now vs {BEFORE}"),
        *(
            g.place(
                _now_vs_before(
                    f"{fig.title} by pg_stat_io row",
                    f"{fig.what} One series per pg_stat_io row chosen with the variables.",
                    _both(fig, per_target=False),
                    fig.unit,
                    "{{target}} {{backend_type}} / {{object}} / {{context}}",
                ),
                12,
                8,
            )
            for fig in FIGURES[:2]
        ),
    ]


def dashboards() -> dict[Path, dict[str, Any]]:
    return {
        OVERVIEW_FILE: _dashboard(
            "PostgreSQL AIO overview",
            "pg-aio-overview",
            "PostgreSQL 18 asynchronous I/O: read latency per operation and per MiB, read size, "
            "throughput, hit ratio, I/O waits, io workers and in-flight AIO (pg_aio_exporter).",
            overview_panels,
            comparison=False,
        ),
        COMPARISON_FILE: _dashboard(
            "AIO upgrade and io_method comparison",
            "pg-aio-comparison",
            "Before/after a PostgreSQL 17 -> 18 upgrade or an io_method / AIO setting change: "
            "the same read figures now and at an offset, with the changes annotated.",
            comparison_panels,
            comparison=True,
        ),
    }


def render(board: dict[str, Any]) -> str:
    return json.dumps(board, indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the JSON files are stale")
    args = parser.parse_args(argv)
    stale = []
    for path, board in dashboards().items():
        text = render(board)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}; run make dashboards", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

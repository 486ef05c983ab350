"""Draws the README pictures of the dashboards from real data (no Grafana runs here).

    PYTHONPATH=tests python -m dashboards.render_pictures [--phase-seconds 120] [--out docs/img]

(`make screenshots`; tests/ is where the suite's harnesses it drives live: dashboard_stack.py,
prometheus.py.)

Starts an embedded PostgreSQL 18, a read workload, the exporter and a Prometheus with the
shipped rules; runs the workload with io_method=worker, then restarts the server with
io_method=sync and runs it again. The dashboards' own panel and annotation queries (from the
committed JSON, variables set as Grafana would) are then evaluated over the whole run and drawn
with matplotlib, one subplot per panel, annotations as vertical lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt

from dashboard_stack import aio_stack, resolve
from dashboards import dashboard_queries as dq
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from pg_aio_exporter.vocabulary import CLIENT_BACKEND, MIB
from prometheus import Prometheus

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

OVERVIEW = HERE / "pg-aio-overview.json"
COMPARISON = HERE / "pg-aio-comparison.json"
OVERVIEW_PANELS = (
    "Read wait per operation",
    "Read wait per MiB",
    "Average read size",
    "Read throughput",
    "Active sessions by wait event",
    "io worker utilisation",
)
COMPARISON_PANELS = (
    "Read wait per operation: now vs ${offset} ago",
    "Read wait per MiB: now vs ${offset} ago",
    "Average read size: now vs ${offset} ago",
    "Read throughput: now vs ${offset} ago",
)
# The workload's reads, not autovacuum's or the startup process' few: one variable choice, as a
# reader of the dashboard would make it.
SELECTION = {"backend_type": CLIENT_BACKEND, "object": "relation"}
# The panels' Grafana units, as a divisor and a suffix that read naturally at these magnitudes.
UNITS = {
    "s": (1e-3, "ms"),
    "bytes": (1024, "KiB"),
    "Bps": (MIB, "MiB/s"),
    "iops": (1, "ops/s"),
    "percentunit": (0.01, "%"),
    "none": (1, ""),
}
MOST_SERIES = 6  # per panel: more lines than this no longer read in a small picture
STEP = 2
WINDOW = "1m"  # the rate interval of the pictures: long enough to smooth 1 s scrapes
WINDOW_SECONDS = 60
# Grafana's dark theme, so that the picture looks like the dashboard it stands for.
BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
# Grafana's own shades of the annotation colour names, readable on the dark background.
NAMED = {"blue": "#5794f2", "red": "#f2495c", "orange": "#ff9830", "purple": "#b877d9"}
NAMED["yellow"] = "#fade2a"
PALETTE = ["#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#b877d9", "#f2495c", "#8ab8ff"]


def legend(fmt: str, labels: dict[str, str], values: dict[str, str]) -> str:
    text = dq.substitute(fmt, values) if dq.referenced(fmt) else fmt
    for name, value in labels.items():
        text = text.replace("{{" + name + "}}", value)
    return text.replace("default ", "").strip()  # one target: its name adds nothing


def fetch(prom: Prometheus, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = prom.api(
        "query_range", query=expr, start=str(start), end=str(end), step=str(STEP)
    )["result"]
    return result


def dashed_refs(panel: dict[str, Any]) -> set[str]:
    out = set()
    for override in panel["fieldConfig"].get("overrides", []):
        if override["matcher"]["id"] == "byFrameRefID" and any(
            p["id"] == "custom.lineStyle" for p in override["properties"]
        ):
            out.add(override["matcher"]["options"])
    return out


def draw_panel(
    ax: Any,
    prom: Prometheus,
    panel: dict[str, Any],
    values: dict[str, str],
    span: tuple[float, float],
) -> None:
    divisor, suffix = UNITS[panel["fieldConfig"]["defaults"].get("unit", "none")]
    stacked = panel["fieldConfig"]["defaults"].get("custom", {}).get("stacking", {}).get("mode")
    dashed = dashed_refs(panel)
    lines = []
    for target in panel["targets"]:
        expr = dq.substitute(target["expr"], values)
        for series in fetch(prom, expr, *span):
            points = [(float(t), float(v)) for t, v in series["values"]]
            mean = sum(v for _, v in points) / len(points)
            label = legend(target.get("legendFormat", ""), series["metric"], values)
            lines.append((target["refId"] in dashed, mean, label, points))
    # The busiest series first: a picture cannot show 20 lines, and the quiet ones matter least.
    lines.sort(key=lambda line: (line[0], -line[1]))
    solid = [line for line in lines if not line[0]][:MOST_SERIES]
    kept = solid + [line for line in lines if line[0]][:2]
    colors = iter(PALETTE * 3)
    for is_dashed, _, label, points in kept:
        times = [datetime.fromtimestamp(t) for t, _ in points]
        ys = [v / divisor for _, v in points]
        color = next(colors)
        if stacked == "normal" and not is_dashed:
            ax.fill_between(times, ys, alpha=0.35, color=color, step="post")
        ax.plot(times, ys, label=label, color=color, lw=1.4, ls="--" if is_dashed else "-")
    ax.set_title(dq.substitute(panel["title"], values), color=TEXT, loc="left", fontsize=11)
    ax.set_ylabel(suffix, color=TEXT)
    ax.set_ylim(bottom=0)
    if kept:
        ax.legend(fontsize=8, loc="best", facecolor=PANEL, edgecolor=GRID, labelcolor=TEXT)


def draw_annotations(
    axes: Sequence[Any],
    prom: Prometheus,
    board: dict[str, Any],
    values: dict[str, str],
    span: tuple[float, float],
) -> None:
    """An annotation's first sample after a gap is one event; events of several annotations
    at about the same time (a restart that changed io_method) share one line and one label."""
    events: list[tuple[float, str, str]] = []
    for item in board["annotations"]["list"]:
        if "expr" not in item:
            continue
        for series in fetch(prom, dq.substitute(item["expr"], values), *span):
            previous = None
            for t, _ in series["values"]:
                # A run already on at the left edge began before the picture: no event in it.
                starts_run = previous is None or float(t) - previous > 2 * STEP
                if starts_run and float(t) - span[0] > STEP:
                    events.append((float(t), item["titleFormat"], item["iconColor"]))
                previous = float(t)
    events.sort()
    groups: list[list[tuple[float, str, str]]] = []
    for event in events:
        if groups and event[0] - groups[-1][0][0] <= 4 * STEP:
            groups[-1].append(event)
        else:
            groups.append([event])
    for group in groups:
        when = datetime.fromtimestamp(group[0][0])
        for ax in axes:
            ax.axvline(when, color=NAMED.get(group[0][2], group[0][2]), lw=1.5, ls=":")
        axes[0].annotate(
            ", ".join(dict.fromkeys(title for _, title, _ in group)),
            (when, 0.97),
            xycoords=("data", "axes fraction"),
            xytext=(4, 0),
            textcoords="offset points",
            color=TEXT,
            fontsize=8,
            va="top",
        )


def render(
    prom: Prometheus,
    board_path: Path,
    titles: Sequence[str],
    out: Path,
    *,
    span: tuple[float, float],
    caption: str,
    offset: str | None = None,
) -> None:
    board = json.loads(board_path.read_text())
    values = {
        **resolve(board, prom, seconds=span[1] - span[0]),
        **SELECTION,
        "__rate_interval": WINDOW,
    }
    if offset:
        values["offset"] = offset
    by_title = {p["title"]: p for p in dq.panels(board)}
    cols = 2
    rows = (len(titles) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(14, 3.6 * rows + 0.6), squeeze=False)
    fig.patch.set_facecolor(BACKGROUND)
    flat = [ax for row in axes for ax in row]
    for ax, title in zip(flat, titles, strict=False):
        ax.set_facecolor(PANEL)
        ax.tick_params(colors=TEXT, labelsize=8)
        ax.grid(color=GRID, lw=0.6)
        for spine in ax.spines.values():
            spine.set_color(GRID)
        # matplotlib types DateFormatter.__init__ without annotations.
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
        draw_panel(ax, prom, by_title[title], values, span)
    for ax in flat[len(titles) :]:
        ax.set_visible(False)
    draw_annotations(flat[: len(titles)], prom, board, values, span)
    fig.suptitle(f"{board['title']}: {caption}", color=TEXT, fontsize=13, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80, facecolor=BACKGROUND)
    plt.close(fig)
    print(f"wrote {out}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase-seconds", type=int, default=120)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    settings = {"shared_buffers": "16MB", "track_io_timing": "on", "io_method": "worker"}
    server = LocalServer.create(settings=settings)
    try:
        server.start()
        create_table(server.dsn(), 64)
        with aio_stack(server.dsn()) as (_, proms):
            prom = proms["2"]
            # A rate over a window that reaches back before the first scrape ramps up from 0
            # (Prometheus divides by the whole window): draw nothing from that first window.
            time.sleep(WINDOW_SECONDS)
            start = time.time()
            time.sleep(args.phase_seconds)
            # The comparison the second dashboard exists for: same workload, other io_method.
            server.configure({"io_method": "sync"})
            server.restart()
            switched = time.time()
            time.sleep(args.phase_seconds)
            span = (start, time.time())
            render(
                prom,
                OVERVIEW,
                OVERVIEW_PANELS,
                args.out / "dashboard-overview.png",
                span=span,
                caption="io_method=worker, then sync (PostgreSQL 18, 64 MB table, 1m windows)",
            )
            render(
                prom,
                COMPARISON,
                COMPARISON_PANELS,
                args.out / "dashboard-comparison.png",
                # After one more window every "now" point is sync and every dashed one worker.
                span=(switched + WINDOW_SECONDS, span[1]),
                caption="io_method=sync now vs worker before (dashed)",
                offset=f"{round(switched - start)}s",
            )
    finally:
        server.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())

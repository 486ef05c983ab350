"""The report page's charts: the window's series (report/series.py) drawn by matplotlib as
inline SVG, one figure per question, each with its text alternative (a table of what it draws),
and the markup both they and page.py write (escaping, data-value numbers).

matplotlib is the `html` extra, imported here only, when a chart is drawn: the exporter's
daemon never loads it (docs/performance.md).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.report import units
from pg_aio_exporter.report.series import OTHER
from pg_aio_exporter.vocabulary import CLIENT_BACKEND as CLIENT
from pg_aio_exporter.vocabulary import MIB

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

EXTRA = "pip install 'pg-aio-exporter[html]'"
TOP_STATEMENTS = 10
# Colour-blind safe (Okabe-Ito), each at least 3:1 against white (WCAG 1.4.11, graphics).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#8a6d00", "#56359c", "#a33b00", "#555555")


MARKED = 20  # lines of this many points or fewer mark each point (a short window's few polls)


def line_style(points: int) -> dict[str, Any]:
    return {"lw": 1.4, "marker": "o" if points <= MARKED else None, "ms": 3}


class HtmlUnavailable(ConfigError):
    """matplotlib is not installed; str() is one line."""


@dataclass(frozen=True)
class Column:
    """One window on the page: its label (now, baseline, A, B, ...) and its series."""

    label: str
    series: dict[str, Any] | None
    source: str = ""  # the page's data-series paths: "" (the report), "baseline:", "A:", ...

    def path(self, part: str, name: str, i: int) -> str:
        return f"{self.source}series.{part}.{name}.{i}"


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def num(value: float | None) -> str:
    """A JSON number as the page's data-value attribute: repr, so it reads back equal."""
    return "" if value is None else repr(float(value))


# --- charts ---------------------------------------------------------------------------------


@contextmanager
def _pyplot() -> Iterator[Any]:
    try:
        import matplotlib  # noqa: PLC0415 (the html extra, never loaded by the daemon)

        matplotlib.use("svg", force=True)
        import matplotlib.pyplot as plt  # noqa: PLC0415
        from cycler import cycler  # noqa: PLC0415 (matplotlib's own dependency)
    except ImportError:
        raise HtmlUnavailable(f"--format html needs matplotlib: {EXTRA}") from None
    with matplotlib.rc_context(
        {
            "svg.fonttype": "none",  # text stays text: smaller, selectable, the page's font
            # Statement texts and labels are drawn as they are: "SELECT $1 ^ $2" as mathtext
            # is a superscript of nothing, which raises when drawn, after the whole window.
            "text.parse_math": False,
            "text.usetex": False,
            "font.family": "sans-serif",
            "font.size": 9,
            "axes.prop_cycle": cycler(color=PALETTE),
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.color": "#dddddd",
            "svg.hashsalt": "pg-aio",
        }
    ):
        yield plt


class Charts:
    """The page's figures as inline SVG; ids made unique per chart (several SVGs, one page)."""

    def __init__(self, plt: Any) -> None:
        self.plt = plt
        self.count = 0

    def figure(self, panels: int, height: float = 2.4) -> tuple[Figure, list[Axes]]:
        """One panel per measure or window, one above the other: as readable on a phone."""
        fig, axes = self.plt.subplots(
            panels,
            1,
            figsize=(6.4, 0.4 + height * panels),
            squeeze=False,
            sharex=True,
            layout="constrained",
        )
        return fig, [row[0] for row in axes]

    def svg(self, fig: Figure, title: str) -> str:
        self.count += 1
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
        self.plt.close(fig)
        svg = out.getvalue()
        svg = svg[svg.index("<svg") :]
        svg = re.sub(r"<!--.*?-->\s*|<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
        # Every id (and its references) gets the chart's prefix: the page holds several SVGs.
        prefix = f"c{self.count}-"
        svg = re.sub(r'id="([^"]+)"', rf'id="{prefix}\1"', svg)
        svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}\1)", svg)
        svg = re.sub(r'xlink:href="#([^"]+)"', rf'xlink:href="#{prefix}\1"', svg)
        numbered = iter(range(1_000_000))
        svg = re.sub(rf'id="{prefix}data"', lambda _: f'id="{prefix}data-{next(numbered)}"', svg)
        svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", svg, count=1)
        return svg.replace("<svg", f'<svg role="img" aria-label="{esc(title)}" class="chart"', 1)


def _data(artist: Any) -> None:
    """Marks what a chart draws from data (the browser test finds it by this id)."""
    artist.set_gid("data")


MINUTES_FROM = 180.0  # windows longer than this are charted in minutes, shorter in seconds


def _span(columns: Sequence[Column]) -> float:
    return max(
        (
            float(at or 0.0)
            for col in columns
            for part in ("polls", "samples")
            for at in ((col.series or {}).get(part) or {}).get("at_seconds") or []
        ),
        default=0.0,
    )


def _times(values: Sequence[float | None], span: float) -> list[float]:
    per = 60.0 if span > MINUTES_FROM else 1.0
    return [float(v or 0.0) / per for v in values]


def _xlabel(ax: Axes, span: float) -> None:
    ax.set_xlabel(f"{'minutes' if span > MINUTES_FROM else 'seconds'} into the window")


def _floats(values: Sequence[float | None], scale: float = 1.0) -> list[float]:
    return [float("nan") if v is None else float(v) * scale for v in values]


def _lines(
    ax: Axes,
    columns: Sequence[Column],
    *,
    part: str,
    name: str,
    scale: float,
    ylabel: str,
) -> None:
    for col in columns:
        block = (col.series or {}).get(part) or {}
        at, values = block.get("at_seconds") or [], block.get(name) or []
        if at:
            times = _times(at, _span(columns))
            (line,) = ax.plot(
                times, _floats(values, scale), label=col.label, **line_style(len(times))
            )
            _data(line)
    _xlabel(ax, _span(columns))
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    if len(columns) > 1:
        ax.legend(frameon=False, fontsize=8)


@dataclass(frozen=True)
class Chart:
    title: str
    svg: str
    table: str  # the text alternative: what the chart draws, as numbers


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _series_table(
    columns: Sequence[Column],
    part: str,
    fields: Sequence[tuple[str, str, Callable[[float | None], str]]],
) -> str:
    rows = []
    for col in columns:
        block = (col.series or {}).get(part) or {}
        for i, at in enumerate(block.get("at_seconds") or []):
            cells = [esc(col.label), esc(units.duration(float(at or 0.0)))]
            for name, _, show in fields:
                values = block.get(name) or []
                value = values[i] if i < len(values) else None
                cells.append(
                    f'<span data-series="{esc(col.path(part, name, i))}" data-value="{num(value)}">'
                    f"{esc(show(value))}</span>"
                )
            rows.append(cells)
    return _table(["window", "at", *(label for _, label, _ in fields)], rows)


def _wait_name(wait: dict[str, Any]) -> str:
    """A wait event as the chart's legend names it; other processes than clients say which."""
    name = f"{wait['wait_event_type']}: {wait['wait_event']}"
    backend = wait["backend_type"]
    return name if backend in (CLIENT, OTHER[0]) else f"{name} ({backend})"


def _wait_chart(charts: Charts, columns: Sequence[Column]) -> Chart:
    title = "Active sessions by wait event (stacked, per sample)"
    fig, axes = charts.figure(len(columns))
    rows = []
    # One colour per wait event on every panel, in the order they first appear.
    colours: dict[str, str] = {}
    for col in columns:
        for w in ((col.series or {}).get("samples") or {}).get("wait_events") or []:
            colours.setdefault(_wait_name(w), PALETTE[len(colours) % len(PALETTE)])
    for ax, col in zip(axes, columns, strict=True):
        block = (col.series or {}).get("samples") or {}
        at = _times(block.get("at_seconds") or [], _span(columns))
        waits = [w for w in block.get("wait_events") or [] if any(w["sessions"])]
        names = [_wait_name(w) for w in waits]
        if at and waits:
            stacks = ax.stackplot(
                at,
                *[_floats(w["sessions"]) for w in waits],
                labels=names,
                colors=[colours[n] for n in names],
            )
            for s in stacks:
                _data(s)
            ax.legend(frameon=False, fontsize=7, loc="upper left")
        ax.set_title(col.label if len(columns) > 1 else "", fontsize=9)
        _xlabel(ax, _span(columns))
        ax.set_ylabel("active sessions")
        for w in waits:
            values = [v or 0.0 for v in w["sessions"]]
            rows.append(
                [
                    esc(col.label),
                    esc(w["backend_type"]),
                    esc(f"{w['wait_event_type']}: {w['wait_event']}"),
                    esc(units.sessions(sum(values) / len(values))),
                    esc(units.sessions(max(values))),
                ]
            )
    table = _table(["window", "backend", "wait event", "mean sessions", "peak sessions"], rows)
    return Chart(title, charts.svg(fig, title), table)


def _throughput_chart(charts: Charts, columns: Sequence[Column]) -> Chart:
    title = "Read and write throughput, and read wait per MiB (per poll)"
    fig, (ax1, ax2, ax3) = charts.figure(3)
    _lines(
        ax1, columns, part="polls", name="read_bytes_per_second", scale=1 / MIB, ylabel="read MiB/s"
    )
    _lines(
        ax2,
        columns,
        part="polls",
        name="write_bytes_per_second",
        scale=1 / MIB,
        ylabel="write MiB/s",
    )
    _lines(
        ax3,
        columns,
        part="polls",
        name="read_seconds_per_byte",
        scale=MIB * 1000,
        ylabel="read wait ms/MiB",
    )
    table = _series_table(
        columns,
        "polls",
        [
            ("read_bytes_per_second", "read", lambda v: units.mib(v or 0.0) + "/s"),
            ("write_bytes_per_second", "write", lambda v: units.mib(v or 0.0) + "/s"),
            ("read_seconds_per_byte", "read wait", units.per_mib),
            ("write_seconds_per_byte", "write wait", units.per_mib),
        ],
    )
    return Chart(title, charts.svg(fig, title), table)


def _read_size_chart(charts: Charts, columns: Sequence[Column]) -> Chart:
    title = "Read size against io_combine_limit (per poll)"
    fig, (ax,) = charts.figure(1)
    for i, col in enumerate(columns):
        limit = ((col.series or {}).get("polls") or {}).get("io_combine_limit_bytes")
        if limit:
            ax.axhline(limit / 1024, ls="--", lw=1, color=PALETTE[i % len(PALETTE)])
            ax.annotate(
                f"io_combine_limit {units.size(limit)} ({col.label})",
                (0, limit / 1024),
                xycoords=("axes fraction", "data"),
                fontsize=7,
                va="bottom",
            )
    _lines(
        ax,
        columns,
        part="polls",
        name="read_size_bytes",
        scale=1 / 1024,
        ylabel="average read size, kB",
    )
    table = _series_table(columns, "polls", [("read_size_bytes", "read size", units.size)])
    return Chart(title, charts.svg(fig, title), table)


def _io_worker_chart(charts: Charts, columns: Sequence[Column]) -> Chart:
    title = "io worker busy share and in-flight AIO handles (per sample)"
    fig, (ax1, ax2) = charts.figure(2)
    _lines(
        ax1,
        columns,
        part="samples",
        name="io_worker_busy_share",
        scale=100,
        ylabel="io workers busy, %",
    )
    for col in columns:
        block = (col.series or {}).get("samples") or {}
        at = _times(block.get("at_seconds") or [], _span(columns))
        for entry in block.get("in_flight") or []:
            label = f"{entry['operation']}" + (f" ({col.label})" if len(columns) > 1 else "")
            (line,) = ax2.plot(at, _floats(entry["average"]), label=label, **line_style(len(at)))
            _data(line)
    _xlabel(ax2, _span(columns))
    ax2.set_ylabel("in-flight handles")
    ax2.set_ylim(bottom=0)
    if ax2.get_legend_handles_labels()[0]:
        ax2.legend(frameon=False, fontsize=7)
    rows = []
    for col in columns:
        block = (col.series or {}).get("samples") or {}
        for i, at_s in enumerate(block.get("at_seconds") or []):
            busy = (block.get("io_worker_busy_share") or [None] * (i + 1))[i]
            flights = ", ".join(
                f"{e['operation']} {units.fraction(e['average'][i])}"
                for e in block.get("in_flight") or []
            )
            rows.append(
                [
                    esc(col.label),
                    esc(units.duration(float(at_s or 0.0))),
                    f'<span data-series="{esc(col.path("samples", "io_worker_busy_share", i))}"'
                    f' data-value="{num(busy)}">{esc(units.percent(busy))}</span>',
                    esc(flights or "none"),
                ]
            )
    table = _table(["window", "at", "io workers busy", "in-flight handles"], rows)
    return Chart(title, charts.svg(fig, title), table)


def _statements_chart(charts: Charts, docs: Sequence[tuple[str, dict[str, Any]]]) -> Chart | None:
    title = "Statements that took the most time in the window"
    listed = [
        (label, ((doc.get("workload") or {}).get("statements") or [])[:TOP_STATEMENTS])
        for label, doc in docs
    ]
    if not any(statements for _, statements in listed):
        return None
    fig, axes = charts.figure(len(listed), height=3.2)
    rows = []
    for ax, (label, statements) in zip(axes, listed, strict=True):
        names = [f"{s['fingerprint'][:8]} {(s['text'] or '')[:24]}" for s in statements]
        seconds = [float(s["exec_seconds"]) for s in statements]
        if statements:
            for bar in ax.barh(range(len(names)), seconds, color=PALETTE[0]):
                _data(bar)
            ax.set_yticks(range(len(names)), names, fontsize=7)
            ax.invert_yaxis()
        ax.set_xlabel("execution time in the window, s")
        ax.set_title(label if len(listed) > 1 else "", fontsize=9)
        for s in statements:
            rows.append(
                [
                    esc(label),
                    f"<code>{esc(s['fingerprint'])}</code>",
                    esc(s["text"] or "(text not shown)"),
                    esc(units.count(s["calls"])),
                    f'<span data-value="{num(s["exec_seconds"])}">'
                    f"{esc(units.ms(s['exec_seconds']))}</span>",
                ]
            )
    table = _table(["window", "statement", "text", "calls", "time"], rows)
    return Chart(title, charts.svg(fig, title), table)


def charts(columns: Sequence[Column], docs: Sequence[tuple[str, dict[str, Any]]]) -> list[Chart]:
    with _pyplot() as plt:
        made = Charts(plt)
        out = [
            _wait_chart(made, columns),
            _throughput_chart(made, columns),
            _read_size_chart(made, columns),
            _io_worker_chart(made, columns),
        ]
        statements = _statements_chart(made, docs)
    return out if statements is None else [*out, statements]

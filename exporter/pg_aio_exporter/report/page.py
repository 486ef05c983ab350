"""The report as one self-contained HTML page (`report --format html`, `compare --format html`).

Made from the report's JSON (schema 3), never from a second computation: the verdict, each
finding with its evidence and advice, the key figures (baseline and now side by side), then the
charts of the window's series, drawn by matplotlib as inline SVG. Nothing is fetched when the
page is opened: no script, font or stylesheet from elsewhere; the page has no script at all.
Each chart has a text alternative (its title and a table of what it draws).

matplotlib is the `html` extra, imported here only, and this module only when a page is made:
the exporter's daemon never loads it (docs/performance.md).
"""

from __future__ import annotations

import html
import importlib.util
import io
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pg_aio_exporter.collectors.activity import CLIENT
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.report import text, units
from pg_aio_exporter.report.series import OTHER

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

EXTRA = "pip install 'pg-aio-exporter[html]'"
MIB = units.MIB
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


def require() -> None:
    """Raises HtmlUnavailable unless matplotlib can be imported (without importing it)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise HtmlUnavailable(f"--format html needs matplotlib: {EXTRA}")


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


# --- the page -------------------------------------------------------------------------------

CSS = """
:root { color-scheme: light; --ink: #1b1b1b; --muted: #4a4a4a; --line: #d0d0d0; }
* { box-sizing: border-box; }
body { font: 16px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--ink); background: #fff; margin: 0 auto; padding: 1rem; max-width: 80rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin: 1.5rem 0 .5rem; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); margin: 0 0 1rem; }
dl.verdict { display: grid; grid-template-columns: max-content 1fr; gap: .4rem 1rem; }
dl.verdict dt { font-weight: 600; }
dl.verdict dd { margin: 0; }
dl.evidence { display: grid; grid-template-columns: max-content 1fr; gap: 0 .75rem;
  font-size: .9rem; margin: .25rem 0 .5rem; overflow-wrap: anywhere; }
dl.evidence dt { color: var(--muted); }
dl.evidence dd { margin: 0; }
.finding h3 { font-size: 1rem; font-weight: 400; margin: .25rem 0; }
.finding { border-left: 4px solid var(--line); padding: .25rem .75rem; margin: .75rem 0; }
.finding.critical { border-color: #b00020; }
.finding.warning { border-color: #8a5300; }
.finding.info { border-color: #0b5cad; }
.severity { font-weight: 700; text-transform: uppercase; font-size: .8rem; }
.critical .severity { color: #b00020; }
.warning .severity { color: #8a5300; }
.info .severity { color: #0b5cad; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: .9rem; margin: .5rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .2rem .6rem; text-align: left;
  vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.charts { display: grid; gap: 1rem;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 36rem), 1fr)); }
figure { margin: 0; border: 1px solid var(--line); border-radius: 4px; padding: .5rem; }
figcaption { font-weight: 600; margin-bottom: .25rem; }
svg.chart { width: 100%; height: auto; display: block; }
details summary { cursor: pointer; color: var(--muted); }
code { font-size: .85em; }
@media (max-width: 40rem) {
  body { padding: .5rem; font-size: 15px; }
  dl.verdict, dl.evidence { grid-template-columns: 1fr; }
  dl.evidence dd { margin-bottom: .25rem; }
  dl.verdict dd { margin-bottom: .5rem; }
}
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  .charts { display: block; }
  figure, .finding, table { break-inside: avoid; page-break-inside: avoid; }
  figure { margin: 0 0 .5rem; }
  details > summary { display: none; }
}
"""

VERDICT = (
    ("workload", "Workload"),
    ("reads", "Reads"),
    ("storage", "Storage"),
    ("io_workers", "io workers"),
)


def _page(title: str, meta: str, sections: Sequence[str]) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';'
        " style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f'<header><h1>{esc(title)}</h1><p class="meta">{meta}</p></header>\n<main>\n'
        + "\n".join(sections)
        + "\n</main>\n</body>\n</html>\n"
    )


def _verdict(doc: dict[str, Any]) -> str:
    items = "".join(
        f'<dt>{esc(label)}</dt><dd data-json="verdict.{key}">{esc(doc["verdict"][key])}</dd>'
        for key, label in VERDICT
        if key in doc["verdict"]
    )
    return f'<section id="verdict"><h2>Verdict</h2><dl class="verdict">{items}</dl></section>'


def _evidence(i: int, evidence: dict[str, Any]) -> str:
    """The numbers a finding rests on, as the text report words them."""
    items = ""
    for key, value in evidence.items():
        data = ""
        path = f' data-json="findings.{i}.evidence.{esc(key)}"'
        if isinstance(value, str):
            data = path
        elif isinstance(value, int | float) and not isinstance(value, bool):
            data = f'{path} data-value="{num(value)}"'
        items += f"<dt>{esc(key)}</dt><dd{data}>{esc(text.evidence_value(key, value))}</dd>"
    return f'<dl class="evidence">{items}</dl>'


def _findings(doc: dict[str, Any]) -> str:
    if not doc["findings"]:
        return '<section id="findings"><h2>Findings</h2><p>None.</p></section>'
    parts = []
    for i, f in enumerate(doc["findings"]):
        parts.append(
            f'<article class="finding {esc(f["severity"])}" id="finding-{i}">'
            f'<h3><span class="severity">{esc(f["severity"])}</span> '
            f"<code>{esc(f['id'])}</code>: "
            f'<span data-json="findings.{i}.summary">{esc(f["summary"])}</span></h3>'
            f"<p><strong>Evidence:</strong></p>{_evidence(i, f['evidence'])}"
            f'<p><strong>Advice:</strong> <span data-json="findings.{i}.advice">'
            f"{esc(f['advice'])}</span></p></article>"
        )
    return '<section id="findings"><h2>Findings</h2>' + "".join(parts) + "</section>"


# Key figures: (label, path in the reads.total / comparison figures, how to show it)
FIGURES: tuple[tuple[str, str, Callable[[float | None], str]], ...] = (
    ("read wait per MiB", "seconds_per_byte", units.per_mib),
    ("wait per read", "seconds_per_read", units.ms),
    ("read size", "read_size_bytes", units.size),
    ("read throughput", "bytes_per_second", lambda v: units.mib(v or 0.0) + "/s"),
    ("reads per second", "reads_per_second", lambda v: units.rate(v or 0.0)),
    ("hit ratio", "hit_ratio", units.percent),
)


def _cell(value: float | None, show: Callable[[float | None], str], path: str) -> str:
    return (
        f'<td class="n" data-json="{esc(path)}" data-value="{num(value)}">{esc(show(value))}</td>'
    )


def _interval(interval: Any) -> str:
    """A ratio's 90% interval where the report has one (schema 3: workload time)."""
    if isinstance(interval, list) and len(interval) == 2 and None not in interval:
        return units.interval(*interval)
    return ""


def _key_figures(doc: dict[str, Any]) -> str:
    comparison = doc.get("comparison")
    if comparison is None:
        total = doc["reads"]["total"]
        rows = "".join(
            f'<tr><th scope="row">{esc(label)}</th>'
            f"{_cell(total[name], show, f'reads.total.{name}')}</tr>"
            for label, name, show in FIGURES
        )
        head = '<tr><th scope="col">whole server</th><th scope="col" class="n">now</th></tr>'
    else:
        figures = comparison["rows"][0]["figures"]
        rows = ""
        for label, name, show in FIGURES:
            f = figures[name]
            path = f"comparison.rows.0.figures.{name}"
            rows += (
                f'<tr><th scope="row">{esc(label)}</th>'
                f"{_cell(f['before'], show, path + '.before')}"
                f"{_cell(f['after'], show, path + '.after')}"
                f"{_cell(f['ratio'], units.ratio, path + '.ratio')}"
                "<td></td></tr>"
            )
        workload = comparison.get("workload")
        if workload is not None:
            path = "comparison.workload.time_ratio"
            rows = (
                f'<tr><th scope="row">workload time ({esc(workload["basis"])})</th>'
                "<td></td><td></td>"
                f"{_cell(workload['time_ratio'], units.ratio, path)}"
                f'<td class="n">{esc(_interval(workload.get("interval")))}</td></tr>'
            ) + rows
        head = (
            '<tr><th scope="col">whole server</th><th scope="col" class="n">baseline</th>'
            '<th scope="col" class="n">now</th><th scope="col" class="n">now / baseline</th>'
            '<th scope="col" class="n">interval</th></tr>'
        )
    activity = doc["activity"]
    extra = "".join(
        f'<tr><th scope="row">{esc(label)}</th>{_cell(activity[name], show, f"activity.{name}")}'
        + ("<td></td>" * 3 if comparison is not None else "")
        + "</tr>"
        for label, name, show in (
            ("active sessions", "active_sessions", lambda v: units.sessions(v or 0.0)),
            ("read-wait share of active time", "read_wait_share", units.percent),
            ("io worker busy share", "io_worker_utilization", units.percent),
        )
    )
    return (
        '<section id="figures"><h2>Key figures</h2><div class="table-wrap"><table>'
        f"<thead>{head}</thead><tbody>{rows}{extra}</tbody></table></div></section>"
    )


def _charts_section(made: Sequence[Chart]) -> str:
    figures = "".join(
        f'<figure id="chart-{i}"><figcaption>{esc(c.title)}</figcaption>{c.svg}'
        f"<details><summary>The numbers this chart draws</summary>"
        f'<div class="table-wrap">{c.table}</div></details></figure>'
        for i, c in enumerate(made)
    )
    return (
        '<section id="charts"><h2>Over the window</h2>'
        f'<div class="charts">{figures}</div></section>'
    )


def _meta(doc: dict[str, Any]) -> str:
    window, server = doc["window"], doc["server"]
    return esc(
        f"{server['version']}, io_method {server['io_method'] or 'sync'};"
        f" {window['started_at']} + {units.duration(float(window['duration_seconds']))};"
        f" pg-aio-exporter {doc['exporter_version']}, report schema {doc['schema']}"
    )


def render_report(doc: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    """The page of one report; `baseline`: the series of the report it was compared with."""
    now = Column("now", doc.get("series"))
    columns = [now] if baseline is None else [Column("baseline", baseline, "baseline:"), now]
    made = charts(columns, [("now", doc)])
    return _page(
        f"pg-aio-exporter report: {doc['target']}",
        _meta(doc),
        [_verdict(doc), _findings(doc), _key_figures(doc), _charts_section(made)],
    )


COMPARED: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("workload time (x first)", "time_ratio", units.ratio),
    ("90% interval", "interval", lambda v: _interval(v) or units.NONE),
    ("per call / transaction", "workload_seconds", units.ms),
    ("basis", "basis", lambda v: v or units.NONE),
    ("read-wait share", "read_wait_share", units.percent),
    ("read wait per MiB", "seconds_per_byte", units.per_mib),
    ("read size", "read_size_bytes", units.size),
    ("io worker busy", "io_worker_utilization", units.percent),
)


def render_compare(
    table: Sequence[dict[str, Any]], fastest: str | None, docs: Sequence[dict[str, Any]]
) -> str:
    """`compare --format html`: the saved reports side by side (sidebyside.py's table), the
    fastest named, each report's verdict, then the charts with one column per report."""
    letters = [chr(ord("A") + i) for i in range(len(table))]
    head = "".join(
        f'<th scope="col" class="n">{esc(letter)}: {esc(row["version"])}'
        f" {esc(row['io_method'] or 'sync')}</th>"
        for letter, row in zip(letters, table, strict=True)
    )
    body = ""
    for label, name, show in COMPARED:
        cells = ""
        for i, row in enumerate(table):
            value = row[name]
            if isinstance(value, str):
                data = f' data-json="reports.{i}.{name}"'
            elif isinstance(value, int | float):
                data = f' data-json="reports.{i}.{name}" data-value="{num(value)}"'
            else:
                data = ""
            cells += f'<td class="n"{data}>{esc(show(value))}</td>'
        body += f'<tr><th scope="row">{esc(label)}</th>{cells}</tr>'
    files = "".join(
        f"<li>{esc(letter)}: <code>{esc(row['report'])}</code></li>"
        for letter, row in zip(letters, table, strict=True)
    )
    best = (
        "Fastest: not judged: a report has no statement or transaction in common with the"
        " first (or predates workload time)."
        if fastest is None
        else f"Fastest: {letters[[r['report'] for r in table].index(fastest)]} ({fastest})."
    )
    verdicts = "".join(
        f'<h3>{esc(letter)}</h3><dl class="verdict">'
        + "".join(
            f"<dt>{esc(label)}</dt><dd>{esc(doc['verdict'][key])}</dd>"
            for key, label in VERDICT
            if key in doc["verdict"]
        )
        + "</dl>"
        for letter, doc in zip(letters, docs, strict=True)
    )
    columns = [
        Column(letter, doc.get("series"), f"{letter}:")
        for letter, doc in zip(letters, docs, strict=True)
    ]
    made = charts(columns, list(zip(letters, docs, strict=True)))
    sections = [
        f'<section id="verdict"><h2>Verdict</h2><p>{esc(best)}</p>'
        f'<div class="table-wrap"><table><thead><tr><th scope="col">each against A</th>{head}'
        f"</tr></thead><tbody>{body}</tbody></table></div><ul>{files}</ul></section>",
        f'<section id="verdicts"><h2>Each report\'s verdict</h2>{verdicts}</section>',
        _charts_section(made),
    ]
    return _page(f"pg-aio-exporter compare: {len(table)} reports", esc(best), sections)

"""The report as one self-contained HTML page (`report --format html`, `compare --format html`).

Made from the report's JSON (schema 3), never from a second computation: the verdict, each
finding with its evidence and advice, the key figures (baseline and now side by side), then the
charts of the window's series, drawn by matplotlib as inline SVG (charts.py). Nothing is
fetched when the page is opened: no script, font or stylesheet from elsewhere; the page has no
script at all. Each chart has a text alternative (its title and a table of what it draws).

matplotlib is the `html` extra, imported by charts.py only, and this module only when a page is
made: the exporter's daemon never loads it (docs/performance.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

from pg_aio_exporter.report import text, units
from pg_aio_exporter.report.charts import (
    EXTRA,
    Chart,
    Column,
    HtmlUnavailable,
    charts,
    esc,
    num,
)


def require() -> None:
    """Raises HtmlUnavailable unless matplotlib can be imported (without importing it)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise HtmlUnavailable(f"--format html needs matplotlib: {EXTRA}")


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
    """A ratio's 90% interval where the report has one (schema 3: workload time; later, time
    per byte too)."""
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
        shown = [
            (label, figures[name], f"comparison.rows.0.figures.{name}", show)
            for label, name, show in FIGURES
        ]
        written = comparison["writes"]["write_seconds_per_byte"]
        path = "comparison.writes.write_seconds_per_byte"
        shown.append(("buffer write time per MiB", written, path, units.per_mib))
        rows = ""
        for label, f, path, show in shown:
            rows += (
                f'<tr><th scope="row">{esc(label)}</th>'
                f"{_cell(f['before'], show, path + '.before')}"
                f"{_cell(f['after'], show, path + '.after')}"
                f"{_cell(f['ratio'], units.ratio, path + '.ratio')}"
                f'<td class="n">{esc(_interval(f.get("interval")))}</td></tr>'
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

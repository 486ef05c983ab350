"""`pg-aio-exporter compare A.json B.json [C.json ...]`: saved reports side by side, e.g. the
same load under io_method sync, worker and io_uring, or on 17 and 18.

Workload time first (each report against the first, at the first one's statement mix, or DB
time per transaction), then the I/O figures that explain it: read-wait share of active time,
read wait per MiB, read size, io worker busy share. Names the fastest when its margin clears
every other's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.report.reload import load_baseline, load_document
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.workload import WorkloadComparison, compare_workload
from pg_aio_exporter.thresholds import Thresholds


@dataclass(frozen=True)
class Column:
    path: str
    summary: Summary
    workload: WorkloadComparison | None  # against the first report; None: not comparable

    @property
    def time_ratio(self) -> float | None:
        return None if self.workload is None else self.workload.time_ratio

    @property
    def name(self) -> str:
        server = self.summary.server
        method = server.io_method or ("io_method not read" if server.aio else "sync")
        return f"{server.version} {method}"


def columns(paths: list[str]) -> list[Column]:
    """The reports, each judged against the first (the first against itself: 1x)."""
    summaries = [load_baseline(path) for path in paths]
    first = summaries[0]
    return [
        Column(path, s, compare_workload(first.workload, s.workload))
        for path, s in zip(paths, summaries, strict=True)
    ]


def fastest(cols: list[Column]) -> Column | None:
    """The report whose workload took the least time, when it was faster than every other one
    beyond their margins (each other report as its baseline: the 90% interval of its time
    ratio below 1); None when a report does not compare or the fastest is not clear."""
    if any(c.time_ratio is None for c in cols):
        return None
    best = min(cols, key=lambda c: c.time_ratio or 0.0)
    for other in cols:
        if other is best:
            continue
        cmp = compare_workload(other.summary.workload, best.summary.workload)
        if cmp is None or not cmp.margin.faster:
            return None
    return best


def figures(col: Column, thresholds: Thresholds) -> dict[str, Any]:
    s = col.summary
    total = s.total.figures
    cmp = col.workload
    return {
        "report": col.path,
        "version": s.server.version,
        "io_method": s.server.io_method,
        "time_ratio": col.time_ratio,
        "interval": list(cmp.interval) if cmp is not None else None,
        "basis": cmp.basis if cmp is not None else None,
        "matched_statements": cmp.matched_statements if cmp is not None else None,
        "workload_seconds": cmp.after if cmp is not None else None,
        "read_wait_share": s.activity.read_wait_share(thresholds.io_wait_events),
        "seconds_per_byte": total.seconds_per_byte if total is not None else None,
        "read_size_bytes": total.size_bytes if total is not None else None,
        "io_worker_utilization": s.activity.io_worker_utilization,
    }


def _interval(interval: list[float] | None) -> str:
    return units.NONE if interval is None else units.interval(*interval)


ROWS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("workload time (x first)", lambda f: units.ratio(f["time_ratio"])),
    ("  90% interval", lambda f: _interval(f["interval"])),
    ("  per call / transaction", lambda f: units.ms(f["workload_seconds"])),
    ("  basis", lambda f: f["basis"] or "n/a"),
    ("read-wait share", lambda f: units.percent(f["read_wait_share"])),
    ("read wait per MiB", lambda f: units.per_mib(f["seconds_per_byte"])),
    ("read size", lambda f: units.size(f["read_size_bytes"])),
    ("io worker busy", lambda f: units.percent(f["io_worker_utilization"])),
)


def render(paths: list[str], thresholds: Thresholds, output_format: str) -> str:
    cols = columns(paths)
    table = [figures(c, thresholds) for c in cols]
    best = fastest(cols)
    if output_format == "json":
        doc = {"reports": table, "fastest": best.path if best is not None else None}
        return json.dumps(doc, indent=2) + "\n"
    if output_format == "html":
        from pg_aio_exporter.report import page  # noqa: PLC0415 (the html extra)

        docs = [load_document(path) for path in paths]
        return page.render_compare(table, best.path if best is not None else None, docs)
    names = [f"{chr(ord('A') + i)}: {c.name}" for i, c in enumerate(cols)]
    cells = [[show(f) for f in table] for _, show in ROWS]
    width = max(len(text) for text in [*names, *(c for row in cells for c in row)]) + 2
    lines = [f"{'':<26}" + "".join(f"{n:>{width}}" for n in names)]
    for (label, _), row in zip(ROWS, cells, strict=True):
        lines.append(f"{label:<26}" + "".join(f"{c:>{width}}" for c in row))
    lines.append("")
    for i, col in enumerate(cols):
        lines.append(f"{chr(ord('A') + i)}: {col.path}")
    if best is None and all(c.time_ratio is not None for c in cols):
        lines.append(
            "Fastest: undecided: no report is faster than every other beyond the 90% margins"
            " (longer --duration, repeated runs or pg_stat_statements narrow them)."
        )
    elif best is None:
        lines.append(
            "Fastest: not judged: a report has no statement or transaction in common with"
            f" {cols[0].path} (or predates workload time)."
        )
    else:
        letter = chr(ord("A") + cols.index(best))
        lines.append(
            f"Fastest: {letter} ({best.name}, {best.path}): workload time"
            f" {units.ratio(best.time_ratio)} the first report's."
        )
    return units.terminal("\n".join(lines) + "\n")  # paths and names: no control character

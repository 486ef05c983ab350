"""The report for people: plain text that fits 100 columns, for a terminal or a ticket."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Any

from pg_aio_exporter.collectors import settings as aio_settings
from pg_aio_exporter.collectors.intervals import LabelKey
from pg_aio_exporter.report import units
from pg_aio_exporter.report.compare import RowComparison, compare_writes
from pg_aio_exporter.report.findings.writes import write_wait_sessions
from pg_aio_exporter.report.outcome import Report
from pg_aio_exporter.report.side import Shown, change_cells
from pg_aio_exporter.report.summary import Activity, Reads, ServerFacts, Summary
from pg_aio_exporter.thresholds import Thresholds
from pg_aio_exporter.vocabulary import MIB

WIDTH = 100
TOP_WAITS = 8
INDENT = "  "


def _mib_per_second(value: float | None) -> str:
    return f"{units.mib(value)}/s" if value is not None else units.NONE


# How each side's figures are shown (summary.READ_FIGURES, written.WRITE_FIGURES).
READ_SHOWN: Shown = {
    "seconds_per_byte": ("wait per MiB", units.per_mib),
    "seconds_per_read": ("wait per read", units.ms),
    "read_size_bytes": ("read size", units.size),
    "bytes_per_second": ("throughput", _mib_per_second),
    "reads_per_second": ("reads/s", lambda v: units.rate(v) if v is not None else units.NONE),
    "hit_ratio": ("hit ratio", units.fraction),
}
WRITE_SHOWN: Shown = {
    "write_seconds_per_byte": ("write time per MiB", units.per_mib),
    "write_seconds_per_operation": ("time per write", units.ms),
    "write_bytes_per_second": ("write throughput", _mib_per_second),
    "extend_seconds_per_byte": ("extend time per MiB", units.per_mib),
    "fsync_seconds_per_operation": ("time per data fsync", units.ms),
    "wal_seconds_per_sync": ("time per WAL sync", units.ms),
    "wal_seconds_per_write": ("time per WAL write", units.ms),
    "wal_bytes_per_second": ("WAL throughput", _mib_per_second),
    "backend_write_share": ("client share of writes", units.fraction),
}


def _wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text, WIDTH, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    )


def _heading(title: str) -> list[str]:
    return ["", title, "-" * len(title)]


def _pack(items: list[str], indent: str) -> list[str]:
    """Items on as few lines as fit, never split inside an item."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 3 + len(item) <= WIDTH:
            lines[-1] += "   " + item
        else:
            lines.append(indent + item)
    return lines


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "on", False: "off", None: "n/a"}[value]
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) and abs(value) < 1e15 else f"{value:.4g}"
    return str(value)


def evidence_value(name: str, value: Any) -> str:
    if isinstance(value, list):
        if value and isinstance(value[0], dict):
            return "; ".join(
                " ".join(f"{k}={evidence_value(k, v)}" for k, v in item.items()) for item in value
            )
        return ",".join(map(str, value)) or "none"
    if isinstance(value, float | int) and not isinstance(value, bool):
        if name.endswith("seconds_per_byte"):
            return units.per_mib(value)
        if name.endswith("seconds_per_read"):
            return units.ms(value)
        if name.endswith("_bytes"):
            return units.size(value)
    return _number(value)


def _server(server: ServerFacts) -> list[str]:
    method = server.io_method_shown + (" (no AIO before PostgreSQL 18)" if not server.aio else "")
    accepted = f" (this build accepts {', '.join(server.io_methods)})" if server.io_methods else ""
    # The collector's list of AIO settings, but the on/off switches: track_io_timing is
    # stated on its own.
    shown = {"bytes": units.size, "seconds": units.duration}
    settings = [
        f"{s.name} {shown.get(s.unit, units.count)(server.settings[s.key])}"
        for s in aio_settings.AIO_SETTINGS
        if s.unit != "bool" and s.key in server.settings
    ]
    if not server.settings_read:
        settings.append("settings not read (pg_settings)")
    else:
        settings.append(f"track_io_timing {'on' if server.track_io_timing else 'off'}")
    pending = (", ".join(server.pending_restart) or "none") if server.settings_read else "not read"
    return [
        *_heading("Server"),
        f"{INDENT}PostgreSQL {server.version}, io_method {method}{accepted}",
        *_pack(settings, INDENT),
        f"{INDENT}settings pending restart: {pending}",
    ]


def _labels(key: LabelKey | None) -> str:
    return "whole server" if key is None else " / ".join(key)


READ_COLUMNS = ("reads/s", "MiB/s", "size", "ms/read", "ms/MiB", "hit ratio")


def _read_cells(reads: Reads) -> list[str]:
    figures = reads.figures
    return [
        units.rate(reads.reads_per_second),
        units.rate(reads.bytes_per_second / MIB),
        units.size(figures.size_bytes) if figures else "n/a",
        _bare(units.ms(figures.latency_seconds if figures else None)),
        _bare(units.per_mib(figures.seconds_per_byte if figures else None)),
        units.fraction(figures.hit_ratio if figures else None),
    ]


def _bare(text: str) -> str:
    return text.split(" ", maxsplit=1)[0]


def _table(rows: Iterable[tuple[str, list[str]]], header: tuple[str, ...]) -> list[str]:
    rows = list(rows)
    first = max([len(name) for name, _ in rows] + [12])
    widths = [max([len(h)] + [len(cells[i]) for _, cells in rows]) for i, h in enumerate(header)]
    line = f"{INDENT}{'':<{first}}" + "".join(
        f"  {h:>{w}}" for h, w in zip(header, widths, strict=True)
    )
    out = [line.rstrip()]
    for name, cells in rows:
        out.append(
            f"{INDENT}{name:<{first}}"
            + "".join(f"  {c:>{w}}" for c, w in zip(cells, widths, strict=True))
        )
    return out


NOT_READ = "not read: see Not visible to this role"


def _reads(summary: Summary) -> list[str]:
    if summary.server.has_pg_stat_io and not summary.reads_read:
        return [*_heading("Reads (pg_stat_io)"), f"{INDENT}{NOT_READ}"]
    out = _heading(f"Reads (pg_stat_io, counted over {units.duration(summary.read_seconds)})")
    keys = summary.reading_rows()
    if not keys:
        return [*out, f"{INDENT}no read counted"]
    rows = [(_labels(k), _read_cells(summary.reads(k))) for k in keys]
    rows.append(("whole server", _read_cells(summary.total)))
    return out + _table(rows, READ_COLUMNS)


def _activity(summary: Summary, thresholds: Thresholds) -> list[str]:
    activity = summary.activity
    out = _heading(
        f"Sampled activity ({activity.samples} samples,"
        f" every {units.duration(activity.sample_interval)})"
    )
    if not activity.samples:
        return [*out, f"{INDENT}no sample taken"]
    if summary.waits_read:
        out += _waits(activity, thresholds)
    else:
        out.append(f"{INDENT}sessions' waits (pg_stat_activity) {NOT_READ}")
    operations = activity.operations()
    if operations:
        depth = "; ".join(
            f"{op} average {activity.in_flight_average(op):.2f}, max"
            f" {activity.in_flight_max.get(op, 0)}"
            for op in operations
        )
        out.append(f"{INDENT}in-flight AIO handles (pg_aios): {depth}")
    return out


def _waits(activity: Activity, thresholds: Thresholds) -> list[str]:
    out = []
    top = activity.top(TOP_WAITS)
    out.append(f"{INDENT}average active sessions by wait event (CPU = on CPU)")
    if not top:
        out.append(f"{INDENT * 2}none: no process was doing work in any sample")
    for (backend_type, wait_type, wait), sessions in top:
        out.append(f"{INDENT * 2}{backend_type:<24} {wait_type + '/' + wait:<40} {sessions:>8.2f}")
    events = thresholds.io_wait_events
    share = activity.read_wait_share(events)
    out.append(
        f"{INDENT}waiting on reads: {units.sessions(activity.read_wait_sessions(events))} of"
        f" {units.sessions(activity.active_sessions())} active sessions"
        f" ({units.percent(share) if share is not None else 'no active time'})"
    )
    if activity.io_workers is not None:
        out += _pack(
            [
                f"io workers: {activity.io_workers}, busy"
                f" {units.percent(activity.io_worker_utilization)};",
                "sessions waiting for the submission queue:"
                f" {units.sessions(activity.submission_queue_sessions)};",
                f"clients reading by themselves: {units.sessions(activity.sync_read_sessions)}",
            ],
            INDENT,
        )
    return out


def _comparison(report: Report) -> list[str]:
    base, rows = report.baseline, report.comparison
    if base is None or rows is None:
        return []
    out = _heading(
        f"Comparison with the baseline (PostgreSQL {base.server.version}, io_method"
        f" {base.server.io_method_shown}, {units.timestamp(base.started_at)})"
    )
    for row in rows:
        out.append(f"{INDENT}{_labels(row.key)}")
        out += _change_table(row)
    if report.summary.writes is not None or base.writes is not None:
        out.append(f"{INDENT}writes, whole server")
        out += [
            f"{INDENT * 2}{label:<24} {before:>14} {after:>14} {ratio:>8}"
            for label, (before, after, ratio) in change_cells(
                compare_writes(base, report.summary), WRITE_SHOWN
            )
        ]
    return out


def _writes(summary: Summary, thresholds: Thresholds) -> list[str]:
    """The Writes section (none when the write side was not measured)."""
    writes = summary.writes
    if writes is None:
        if summary.server.has_pg_stat_io and not summary.reads_read:
            return [*_heading("Writes (pg_stat_io and WAL)"), f"{INDENT}{NOT_READ}"]
        return []
    out = _heading(f"Writes (pg_stat_io and WAL, over {units.duration(writes.seconds)})")
    for name, value in writes.named().items():
        label, show = WRITE_SHOWN[name]
        out.append(f"{INDENT}{label}: {show(value)}")
    by_type = writes.buffer_writes()
    if by_type:
        out.append(
            f"{INDENT}shared buffers written/s by: "
            + ", ".join(
                f"{k} {units.rate(writes.per_second(v))}" for k, v in sorted(by_type.items())
            )
        )
    if thresholds.writes is not None and summary.waits_read:
        waits = write_wait_sessions(summary.activity, thresholds.writes)
        shown = ", ".join(
            f"{k} {units.sessions(v)}" for k, v in sorted(waits.items(), key=lambda kv: -kv[1])
        )
        out.append(
            f"{INDENT}sessions waiting on writes: {units.sessions(sum(waits.values()))}"
            + (f" ({shown})" if shown else "")
        )
    return out


def _change_table(row: RowComparison) -> list[str]:
    cells = [(INDENT + label, shown) for label, shown in change_cells(row.changes, READ_SHOWN)]
    return _table(cells, ("baseline", "now", "ratio"))


def _workload(summary: Summary) -> list[str]:
    """The statements that took the most time in the window (pg_stat_statements)."""
    work = summary.workload
    if work is None or not work.statements:
        return []
    rows = [
        (
            _short(s.text or s.fingerprint),
            [
                units.count(s.counters.calls),
                units.ms(s.seconds_per_call),
                units.percent(s.read_share),
                f"{s.read_mib_per_call:.3g} MiB",
            ],
        )
        for s in work.listed()
    ]
    return [
        *_heading("Statements that took the most time (pg_stat_statements)"),
        *_table(rows, ("calls", "per call", "read wait", "read/call")),
    ]


def _short(text: str, width: int = 48) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _findings(report: Report) -> list[str]:
    out = _heading("Findings")
    if not report.findings:
        return [*out, f"{INDENT}none"]
    for finding in report.findings:
        head = f"{INDENT}{finding.severity.upper():<8} {finding.id}: "
        out += _wrap(finding.summary, head, INDENT * 2)
        evidence = "  ".join(f"{k}={evidence_value(k, v)}" for k, v in finding.evidence.items())
        out += _wrap(evidence, f"{INDENT * 2}evidence: ", INDENT * 3)
        out += _wrap(finding.advice, f"{INDENT * 2}advice: ", INDENT * 3)
    return out


def render(report: Report, thresholds: Thresholds) -> str:
    summary = report.summary
    verdict = report.verdict
    lines = [
        f"pg-aio-exporter report: target {summary.target}, {units.timestamp(summary.started_at)}"
        f" + {units.duration(summary.duration)}",
        *_heading("Verdict"),
        *_wrap(verdict.workload, f"{INDENT}Workload:   ", INDENT + " " * 12),
        *_wrap(verdict.reads, f"{INDENT}Reads:      ", INDENT + " " * 12),
        *_wrap(verdict.storage, f"{INDENT}Storage:    ", INDENT + " " * 12),
        *_wrap(verdict.io_workers, f"{INDENT}io workers: ", INDENT + " " * 12),
        *_findings(report),
        *_server(summary.server),
        *_workload(summary),
        *_reads(summary),
        *_activity(summary, thresholds),
        *_writes(summary, thresholds),
    ]
    if summary.not_visible:
        lines += _heading("Not visible to this role")
        for what in summary.not_visible:
            lines += _wrap(what, f"{INDENT}- ", INDENT * 2)
    lines += _comparison(report)
    # Statement texts and names come from the server: no control character reaches a terminal.
    return units.terminal("\n".join(lines) + "\n")

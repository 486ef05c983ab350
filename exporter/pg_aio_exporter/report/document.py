"""The report as JSON (`"schema": 3`, docs/report.md, schema.json beside this file), and a
saved report read back as a baseline.

The document keeps the window's counts next to the figures derived from them, so a baseline
reloads exactly and is compared with the same formulas as a live window.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pg_aio_exporter import __version__
from pg_aio_exporter.collectors import pg_wait_events
from pg_aio_exporter.collectors.activity import WaitKey
from pg_aio_exporter.collectors.intervals import (
    WRITE_OPERATIONS,
    LabelKey,
    ReadCounters,
    WalCounters,
    WriteCounters,
)
from pg_aio_exporter.collectors.pg_stat_statements import StatementCounters
from pg_aio_exporter.config import ConfigError, read_text_file
from pg_aio_exporter.report.compare import RowComparison, compare_writes
from pg_aio_exporter.report.findings.writes import write_wait_sessions
from pg_aio_exporter.report.outcome import Report
from pg_aio_exporter.report.summary import Activity, Reads, ServerFacts, Summary
from pg_aio_exporter.report.units import timestamp
from pg_aio_exporter.report.workload import StatementWindow, Workload, WorkloadComparison
from pg_aio_exporter.report.written import Checkpoints, Writes
from pg_aio_exporter.thresholds import Thresholds

# 2: workload time (workload, verdict.workload, comparison.workload); 3: series (the page's
# charts over the window) and the workload's margins (workload.sampled_sessions,
# session_batches, uncounted_seconds, each statement's exec_squares;
# comparison.workload.interval, claim and decisive_seconds)
SCHEMA = 3
READABLE = (1, 2, 3)  # saved reports this version reads as a baseline
KIND = "pg-aio-exporter report"
SCHEMA_FILE = Path(__file__).with_name("schema.json")


class BaselineError(ConfigError):
    """A baseline file that cannot be used; str() is one printable line."""


def _reads(reads: Reads) -> dict[str, Any]:
    figures = reads.figures
    counters = reads.counters
    return {
        "reads": counters.reads,
        "read_bytes": counters.read_bytes,
        "read_time_seconds": counters.read_time_ms / 1000.0 if reads.timed else None,
        "hits": counters.hits,
        "reads_per_second": reads.reads_per_second,
        "bytes_per_second": reads.bytes_per_second,
        "read_size_bytes": figures.size_bytes if figures else None,
        "seconds_per_read": figures.latency_seconds if figures else None,
        "seconds_per_byte": figures.seconds_per_byte if figures else None,
        "hit_ratio": figures.hit_ratio if figures else None,
    }


def _labels(key: LabelKey | None) -> dict[str, str | None]:
    backend_type, obj, context = key if key is not None else (None, None, None)
    return {"backend_type": backend_type, "object": obj, "context": context}


def _activity(activity: Activity, thresholds: Thresholds) -> dict[str, Any]:
    return {
        "samples": activity.samples,
        "sample_interval_seconds": activity.sample_interval,
        "wait_events": [
            {
                "backend_type": key[0],
                "wait_event_type": key[1],
                "wait_event": key[2],
                "samples": activity.wait_samples[key],
                "sessions": sessions,
            }
            for key, sessions in activity.top(len(activity.wait_samples))
        ],
        "active_sessions": activity.active_sessions(),
        "read_wait_sessions": activity.read_wait_sessions(thresholds.io_wait_events),
        "read_wait_share": activity.read_wait_share(thresholds.io_wait_events),
        "submission_queue_sessions": activity.submission_queue_sessions,
        "sync_read_sessions": activity.sync_read_sessions,
        "io_workers": activity.io_workers,
        "io_worker_slots": activity.io_worker_slots,
        "io_worker_busy_samples": activity.io_worker_busy,
        "io_worker_utilization": activity.io_worker_utilization,
        "in_flight": [
            {
                "state": state,
                "operation": op,
                "samples": count,
                "average": count / activity.samples if activity.samples else 0.0,
            }
            for (state, op), count in sorted(activity.in_flight.items())
        ],
        "in_flight_max": [
            {"operation": op, "max": activity.in_flight_max.get(op, 0)}
            for op in activity.operations()
        ],
    }


def _workload(work: Workload | None) -> dict[str, Any] | None:
    if work is None:
        return None
    listed = {s.key for s in work.listed()}
    statements = None
    if work.statements is not None:
        statements = [
            {
                "fingerprint": s.fingerprint,
                "database": s.database,
                "user": s.user,
                "text": s.text if s.key in listed else None,
                "calls": s.counters.calls,
                "exec_seconds": s.counters.exec_seconds,
                "rows": s.counters.rows,
                "shared_blocks_read": s.counters.blocks_read,
                "shared_blocks_hit": s.counters.blocks_hit,
                "read_seconds": s.counters.read_seconds,
                "exec_squares": s.counters.exec_squares,
            }
            for s in work.listed(len(work.statements))
        ]
    return {
        "seconds": work.seconds,
        "seconds_per_call": work.seconds_per_call,
        "transactions": work.transactions,
        "blocks": work.blocks,
        "client_sessions": work.client_sessions,
        "db_time_per_transaction": work.db_time_per_transaction,
        "statements_note": work.statements_note,
        "statements": statements,
        "sampled_sessions": work.sampled_sessions,
        "session_batches": (None if work.session_batches is None else list(work.session_batches)),
        "uncounted_seconds": work.uncounted_seconds,
        "connected_sessions": work.connected_sessions,
    }


def _workload_comparison(cmp: WorkloadComparison | None) -> dict[str, Any] | None:
    if cmp is None:
        return None
    return {
        "time_ratio": cmp.time_ratio,
        "interval": list(cmp.interval),
        "claim": cmp.claim,
        "decisive_seconds": cmp.decisive_seconds,
        "busy_share": cmp.busy_share,
        "basis": cmp.basis,
        "matched_statements": cmp.matched_statements,
        "before_seconds": cmp.before,
        "after_seconds": cmp.after,
        "read_wait_before_seconds": cmp.read_before,
        "read_wait_after_seconds": cmp.read_after,
    }


def _comparison(report: Report) -> dict[str, Any] | None:
    base, rows = report.baseline, report.comparison
    if base is None or rows is None:
        return None
    return {
        "workload": _workload_comparison(report.workload),
        "baseline": {
            "target": base.target,
            "started_at": timestamp(base.started_at),
            "version": base.server.version,
            "io_method": base.server.io_method,
            "io_workers": base.server.settings.get("io_workers"),
        },
        "rows": [_compared(row) for row in rows],
        "writes": {name: c.to_json() for name, c in compare_writes(base, report.summary).items()},
    }


def _compared(row: RowComparison) -> dict[str, Any]:
    return {
        **_labels(row.key),
        "figures": {name: c.to_json() for name, c in row.changes.items()},
    }


# --- the write side ----------------------------------------------------------------------------


def _operations(writes: Writes) -> dict[str, Any]:
    total, figures = writes.total, writes.figures()
    out: dict[str, Any] = {}
    for name, (count_field, bytes_field, _) in WRITE_OPERATIONS.items():
        count = getattr(total, count_field)
        iv = figures.get(name)
        out[name] = {
            "count": count,
            "per_second": writes.per_second(count),
            "bytes_per_second": (
                writes.per_second(getattr(total, bytes_field)) if bytes_field else None
            ),
            "seconds_per_operation": iv.latency_seconds if iv else None,
            "seconds_per_byte": iv.seconds_per_byte if iv else None,
        }
    return out


def _fields(counters: Any) -> dict[str, float]:
    """A dataclass of counters as the document keeps it: every field by name."""
    return {f: getattr(counters, f) for f in counters.__dataclass_fields__}


def _writes(writes: Writes | None, waits: Mapping[str, float] | None) -> dict[str, Any] | None:
    """The document's `writes` block (counts kept, so a baseline reloads exactly)."""
    if writes is None:
        return None
    wal, wal_iv = writes.wal, writes.wal_figures()
    return {
        "counted_seconds": writes.seconds,
        "track_io_timing_throughout": writes.timed,
        "operations": _operations(writes),
        "rows": [
            {
                "backend_type": key[0],
                "object": key[1],
                "context": key[2],
                "counters": _fields(writes.rows[key]),
            }
            for key in sorted(writes.rows)
            if any(v > 0 for v in _fields(writes.rows[key]).values())
        ],
        "buffer_writes_per_second_by_backend_type": {
            k: writes.per_second(v) for k, v in sorted(writes.buffer_writes().items())
        },
        "backend_write_share": writes.backend_share(),
        "wal": None
        if wal is None
        else {
            "counted_seconds": writes.wal_seconds,
            "track_wal_io_timing_throughout": writes.wal_timed,
            "counters": _fields(wal),
            "bytes_per_second": writes.wal_per_second(wal.wal_bytes),
            "syncs_per_second": writes.wal_per_second(wal.syncs),
            "seconds_per_write": wal_iv.write_latency_seconds if wal_iv else None,
            "seconds_per_sync": wal_iv.sync_latency_seconds if wal_iv else None,
        },
        "write_wait_sessions": dict(waits or {}),
        "checkpoints": None if writes.checkpoints is None else _fields(writes.checkpoints),
    }


def to_json(report: Report, thresholds: Thresholds) -> dict[str, Any]:
    summary = report.summary
    server = summary.server
    return {
        "schema": SCHEMA,
        "kind": KIND,
        "exporter_version": __version__,
        "target": summary.target,
        "window": {
            "started_at": timestamp(summary.started_at),
            "ended_at": timestamp(summary.ended_at),
            "duration_seconds": summary.duration,
            "counted_seconds": summary.read_seconds,
            "track_io_timing_throughout": summary.timed,
            "stats_resets": [timestamp(r) for r in summary.resets],
            "restarts": summary.restarts,
        },
        "server": {
            "version": server.version,
            "version_num": server.version_num,
            "io_method": server.io_method,
            "io_methods": list(server.io_methods),
            "io_uring_available": server.io_uring_available,
            "settings": dict(sorted(server.settings.items())),
            "pending_restart": list(server.pending_restart),
        },
        "reads": {
            "total": _reads(summary.total),
            "rows": [
                {**_labels(key), **_reads(summary.reads(key))}
                for key in sorted(summary.rows, key=lambda k: (-summary.rows[k].read_bytes, k))
                if summary.rows[key].reads > 0 or summary.rows[key].hits > 0
            ],
        },
        "activity": _activity(summary.activity, thresholds),
        "workload": _workload(summary.workload),
        "writes": _writes(
            summary.writes,
            None
            if thresholds.writes is None
            else write_wait_sessions(summary.activity, thresholds.writes),
        ),
        "not_visible": list(summary.not_visible),
        "not_read": list(summary.not_read),
        "findings": [
            {
                "id": f.id,
                "severity": f.severity,
                "summary": f.summary,
                "evidence": f.evidence,
                "advice": f.advice,
            }
            for f in report.findings
        ],
        "verdict": {
            "workload": report.verdict.workload,
            "reads": report.verdict.reads,
            "storage": report.verdict.storage,
            "io_workers": report.verdict.io_workers,
        },
        "comparison": _comparison(report),
        "series": None if summary.series is None else dict(summary.series),
    }


def dumps(report: Report, thresholds: Thresholds) -> str:
    return json.dumps(to_json(report, thresholds), indent=2) + "\n"


# --- reading a saved report back ---------------------------------------------------------


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _counters(entry: Mapping[str, Any]) -> ReadCounters:
    read_time = entry["read_time_seconds"]
    return ReadCounters(
        float(entry["reads"]),
        float(entry["read_bytes"]),
        float(read_time) * 1000.0 if read_time is not None else 0.0,
        float(entry["hits"]),
    )


def _text(entry: Mapping[str, Any], *names: str) -> tuple[str, ...]:
    values = tuple(entry[name] for name in names)
    if not all(isinstance(v, str) for v in values):
        raise TypeError(names)
    return values


def _key(row: Mapping[str, Any]) -> LabelKey:
    backend_type, obj, context = _text(row, "backend_type", "object", "context")
    return backend_type, obj, context


def _in_flight_key(entry: Mapping[str, Any]) -> tuple[str, str]:
    state, operation = _text(entry, "state", "operation")
    return state, operation


def _wait_key(entry: Mapping[str, Any]) -> WaitKey:
    backend_type, wait_type, wait = _text(entry, "backend_type", "wait_event_type", "wait_event")
    return backend_type, wait_type, wait


def _statement(entry: Mapping[str, Any]) -> StatementWindow:
    fingerprint, database, user = _text(entry, "fingerprint", "database", "user")
    text = entry["text"]
    return StatementWindow(
        fingerprint,
        database,
        user,
        StatementCounters(
            float(entry["calls"]),
            float(entry["exec_seconds"]),
            float(entry["rows"]),
            float(entry["shared_blocks_read"]),
            float(entry["shared_blocks_hit"]),
            float(entry["read_seconds"]),
            _optional(entry.get("exec_squares")),  # schema 3
        ),
        None if text is None else str(text),
    )


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def workload_from_json(entry: Mapping[str, Any] | None, samples: int) -> Workload | None:
    """A saved window's workload; schema 2 kept no margins: its sampled sessions are the
    average times the samples, and no spread of sub-windows."""
    if entry is None:
        return None
    statements = entry["statements"]
    sessions = _optional(entry["client_sessions"])
    batches = entry.get("session_batches")
    return Workload(
        seconds=float(entry["seconds"]),
        statements=(
            None if statements is None else {s.key: s for s in map(_statement, statements)}
        ),
        transactions=_optional(entry["transactions"]),
        blocks=_optional(entry["blocks"]),
        client_sessions=sessions,
        statements_note=entry["statements_note"],
        sampled_sessions=_optional(
            entry.get("sampled_sessions", None if sessions is None else sessions * samples)
        ),
        session_batches=None if batches is None else tuple(map(float, batches)),
        uncounted_seconds=float(entry.get("uncounted_seconds", 0.0)),
        connected_sessions=_optional(entry.get("connected_sessions")),
    )


def _floats(counters: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in counters.items()}


def _writes_from_json(block: Mapping[str, Any] | None) -> Writes | None:
    """A saved `writes` block read back (None when the document has none: an older report)."""
    if block is None:
        return None
    wal = block["wal"]
    return Writes(
        rows={
            (str(r["backend_type"]), str(r["object"]), str(r["context"])): WriteCounters(
                **_floats(r["counters"])
            )
            for r in block["rows"]
        },
        seconds=float(block["counted_seconds"]),
        timed=bool(block["track_io_timing_throughout"]),
        wal=None if wal is None else WalCounters(**_floats(wal["counters"])),
        wal_seconds=0.0 if wal is None else float(wal["counted_seconds"]),
        wal_timed=False if wal is None else bool(wal["track_wal_io_timing_throughout"]),
        checkpoints=None
        if block.get("checkpoints") is None
        else Checkpoints(**_floats(block["checkpoints"])),
    )


def from_json(doc: Mapping[str, Any]) -> Summary:
    """The summary a document was made from (KeyError, TypeError or ValueError if it is
    incomplete)."""
    window, server, activity = doc["window"], doc["server"], doc["activity"]
    started = _epoch(window["started_at"])
    version_num = int(server["version_num"])
    return Summary(
        target=_text(doc, "target")[0],
        started_at=started,
        ended_at=started + float(window["duration_seconds"]),
        server=ServerFacts(
            version=_text(server, "version")[0],
            version_num=version_num,
            settings={str(k): float(v) for k, v in server["settings"].items()},
            io_method=None if server["io_method"] is None else str(server["io_method"]),
            io_methods=tuple(map(str, server["io_methods"])),
            pending_restart=tuple(map(str, server["pending_restart"])),
        ),
        rows={_key(row): _counters(row) for row in doc["reads"]["rows"]},
        read_seconds=float(window["counted_seconds"]),
        timed=bool(window["track_io_timing_throughout"]),
        activity=Activity(
            samples=int(activity["samples"]),
            sample_interval=float(activity["sample_interval_seconds"]),
            wait_samples={_wait_key(w): int(w["samples"]) for w in activity["wait_events"]},
            # The server's catalogue is not saved: its wait events by version.
            wait_events=pg_wait_events.server_events(version_num, None),
            io_workers=None if activity["io_workers"] is None else int(activity["io_workers"]),
            io_worker_slots=int(activity["io_worker_slots"]),
            io_worker_busy=int(activity["io_worker_busy_samples"]),
            in_flight={_in_flight_key(f): int(f["samples"]) for f in activity["in_flight"]},
            in_flight_max={
                _text(f, "operation")[0]: int(f["max"]) for f in activity["in_flight_max"]
            },
        ),
        resets=tuple(_epoch(r) for r in window["stats_resets"]),
        restarts=int(window["restarts"]),
        not_visible=tuple(map(str, doc["not_visible"])),
        not_read=tuple(map(str, doc.get("not_read", ()))),  # written since schema 2
        # Schema 1 had no workload time.
        workload=(
            workload_from_json(doc["workload"], int(activity["samples"]))
            if doc["schema"] >= 2
            else None
        ),
        writes=_writes_from_json(doc.get("writes")),
        series=doc.get("series"),  # schema 3
    )


def load_document(path: str) -> dict[str, Any]:
    """A saved report's JSON, checked to be one this version reads."""
    text = read_text_file(path, "baseline")
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise BaselineError(f"baseline {path} is corrupt: not valid JSON{where}") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise BaselineError(f"baseline {path} is not a pg-aio-exporter report") from None
    if doc.get("schema") not in READABLE:
        raise BaselineError(
            f"baseline {path} has report schema {doc.get('schema')!r}; this version reads"
            f" schema {', '.join(map(str, READABLE[:-1]))} and {READABLE[-1]}"
        )
    return doc


def load_baseline(path: str) -> Summary:
    doc = load_document(path)
    try:
        return from_json(doc)
    except KeyError as exc:
        raise BaselineError(f"baseline {path} is corrupt: field {exc} missing") from None
    except (TypeError, ValueError, AttributeError):
        raise BaselineError(f"baseline {path} is corrupt: a field has the wrong type") from None

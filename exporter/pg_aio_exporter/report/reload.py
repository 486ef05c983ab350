"""A saved report (document.py's JSON, any schema in READABLE) read back: as the summary it was
made from, exactly (the document keeps the counts), so that a baseline is compared with the same
formulas as a live window; and as the document itself, for `compare`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pg_aio_exporter.collectors import pg_wait_events
from pg_aio_exporter.collectors.activity import WaitKey
from pg_aio_exporter.collectors.intervals import LabelKey, ReadCounters, WalCounters, WriteCounters
from pg_aio_exporter.collectors.pg_stat_statements import StatementCounters
from pg_aio_exporter.config import ConfigError, read_text_file
from pg_aio_exporter.report.document import KIND
from pg_aio_exporter.report.side import Batches
from pg_aio_exporter.report.summary import Activity, ServerFacts, Summary
from pg_aio_exporter.report.workload import StatementWindow, Workload
from pg_aio_exporter.report.written import Checkpoints, Writes

READABLE = (1, 2, 3)  # saved reports this version reads as a baseline


class BaselineError(ConfigError):
    """A baseline file that cannot be used; str() is one printable line."""


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
    active_batches = entry.get("active_batches")
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
        in_transaction_sessions=_optional(entry.get("in_transaction_sessions")),
        active_seconds=_optional(entry.get("active_seconds")),
        own_active_seconds=float(entry.get("own_active_seconds", 0.0)),
        active_batches=None if active_batches is None else tuple(map(float, active_batches)),
    )


def _batches(entry: Any) -> Batches | None:
    """A side's sub-windows as saved (side.Batches); None in a report saved before them."""
    if entry is None:
        return None
    return tuple((float(n), float(d), float(t)) for n, d, t in entry)


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
        batches=_batches(block.get("batches")),
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
        read_batches=_batches(doc["reads"].get("batches")),
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

"""The report as JSON (`"schema": 3`, docs/report.md, schema.json beside this file).

The document keeps the window's counts next to the figures derived from them, so a baseline
reloads exactly (reload.py) and is compared with the same formulas as a live window.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pg_aio_exporter import __version__
from pg_aio_exporter.collectors.intervals import WRITE_OPERATIONS, LabelKey
from pg_aio_exporter.report.compare import RowComparison, compare_writes
from pg_aio_exporter.report.findings.writes import write_wait_sessions
from pg_aio_exporter.report.outcome import Report
from pg_aio_exporter.report.side import Batches
from pg_aio_exporter.report.summary import Activity, Reads
from pg_aio_exporter.report.units import timestamp
from pg_aio_exporter.report.workload import Workload, WorkloadComparison
from pg_aio_exporter.report.written import Writes
from pg_aio_exporter.thresholds import Thresholds

# 2: workload time (workload, verdict.workload, comparison.workload); 3: series (the page's
# charts over the window) and the workload's margins (workload.sampled_sessions,
# session_batches, uncounted_seconds, each statement's exec_squares;
# comparison.workload.interval, claim and decisive_seconds; later, read and write time per
# byte's sub-windows, reads.batches and writes.batches, and the comparison's intervals of
# time per byte: optional, so a report saved before them still reads)
SCHEMA = 3
KIND = "pg-aio-exporter report"
SCHEMA_FILE = Path(__file__).with_name("schema.json")


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


def _batches(batches: Batches | None) -> list[list[float]] | None:
    """A side's sub-windows, [time, bytes, seconds] each (side.Batches)."""
    return None if batches is None else [list(b) for b in batches]


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
        "in_transaction_sessions": work.in_transaction_sessions,
        "active_seconds": work.active_seconds,
        "own_active_seconds": work.own_active_seconds,
        "active_batches": None if work.active_batches is None else list(work.active_batches),
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
        "matched_share": cmp.matched_share,
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
        "batches": _batches(writes.batches),
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
            "batches": _batches(summary.read_batches),
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

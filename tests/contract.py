"""The metric contract the tests hold the exporter to: docs/metrics.md, the users' own list.

Every metric named in the first column of a table of docs/metrics.md is part of the contract;
a name ending in `_total` is a counter, a row whose meaning starts with "histogram" a histogram.
What the docs cannot say in a table is when a metric may be absent for a reason that is no
defect; that is the groups below, each checked against the docs so that it cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"

# Shown only when their condition occurs: never required.
OPTIONAL = frozenset(
    {
        "pg_settings_pending_restart",
        "pg_aio_exporter_poll_errors_total",  # starts at 0 per pair, but only for known pairs
        "pg_aio_in_flight_samples_total",
        "pg_aio_in_flight_bytes_samples_total",
        "pg_aio_in_flight_max",
        "pg_aio_exporter_sample_stalls_total",
        # Only where the pg_stat_statements extension is loaded and created.
        "pg_aio_statements_calls_total",
        "pg_aio_statements_exec_seconds_total",
        "pg_aio_statements_rows_total",
        "pg_aio_statements_shared_blocks_read_total",
        "pg_aio_statements_shared_blocks_hit_total",
        "pg_aio_statements_shared_block_read_seconds_total",
        "pg_aio_statements_entries",
        "pg_aio_statements_deallocations_total",  # 14+
    }
)
# Per-interval gauges: present after two polls with reads in between.
INTERVALS = frozenset(
    {
        "pg_aio_read_latency_seconds",
        "pg_aio_read_seconds_per_byte",
        "pg_aio_read_size_bytes",
        "pg_aio_hit_ratio",
    }
)
# Per-interval write gauges: present after two polls with writes (WAL: writes, syncs) in
# between, and their time counted (track_io_timing, track_wal_io_timing).
WRITE_INTERVALS = frozenset(
    {
        "pg_aio_write_latency_seconds",
        "pg_aio_write_seconds_per_byte",
        "pg_aio_extend_latency_seconds",
        "pg_aio_extend_seconds_per_byte",
        "pg_aio_writeback_latency_seconds",
        "pg_aio_fsync_latency_seconds",
        "pg_aio_wal_write_latency_seconds",
        "pg_aio_wal_sync_latency_seconds",
    }
)
# Present once the sampler has run while work was going on (io workers: io_method=worker).
SAMPLER = frozenset(
    {
        "pg_aio_sampler_samples_total",
        "pg_aio_wait_event_samples_total",
        "pg_aio_io_workers",
        "pg_aio_io_worker_busy_samples_total",
        "pg_aio_io_worker_samples_total",
        "pg_aio_io_worker_utilization_ratio",
        "pg_aio_exporter_sample_duration_seconds",
        "pg_aio_exporter_sample_overruns_total",
    }
)
# PostgreSQL 19's self-sizing io worker pool (io_workers is gone there): absent before 19.
PG19 = frozenset(
    {
        "pg_settings_io_min_workers",
        "pg_settings_io_max_workers",
        "pg_settings_io_worker_idle_timeout_seconds",
        "pg_settings_io_worker_launch_interval_seconds",
    }
)
GROUPS = {
    "optional": OPTIONAL,
    "pg19": PG19,
    "intervals": INTERVALS,
    "write_intervals": WRITE_INTERVALS,
    "sampler": SAMPLER,
}

_ROW = re.compile(r"^\|(?P<names>[^|]*)\|(?P<meaning>[^|]*)")
# A metric's name, not a recording rule's (`pg_aio_target:read_*`: a colon after the prefix).
_NAME = re.compile(r"`(pg_[a-z0-9_]+)(?![a-z0-9_:])")


# The sections of docs/metrics.md whose series the exporter counts itself: they never go back
# while it runs. The others copy PostgreSQL's counters, which a reset or a crash sets back.
OWN_SECTIONS = ("Sampler", "Exporter self-metrics")


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter, histogram, or gauge (anything else: info, state set, untyped)
    section: str = ""  # the heading of docs/metrics.md it is listed under

    @property
    def group(self) -> str:
        return next((g for g, names in GROUPS.items() if self.name in names), "core")


def metrics(doc: Path = DOC) -> list[Metric]:
    """Every metric docs/metrics.md lists in a table, in the order listed."""
    found: dict[str, Metric] = {}
    section = ""
    for line in doc.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        row = _ROW.match(line)
        if row is None:
            continue
        histogram = row["meaning"].strip().startswith("histogram")
        for name in _NAME.findall(row["names"]):
            kind = "counter" if name.endswith("_total") else "histogram" if histogram else "gauge"
            found.setdefault(name, Metric(name, kind, section))
    return list(found.values())


def own_counters(doc: Path = DOC) -> frozenset[str]:
    """Counters and histograms the exporter counts itself (OWN_SECTIONS)."""
    return frozenset(
        m.name for m in metrics(doc) if m.kind != "gauge" and m.section.startswith(OWN_SECTIONS)
    )


def exposed_types(body: str) -> dict[str, str]:
    """Family name as declared by its TYPE line (counters with their _total) -> its type."""
    types = {}
    for line in body.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            counter = kind == "counter" and not name.endswith("_total")
            types[name + "_total" if counter else name] = kind
    return types


def problems(body: str, required: Collection[str] = ("core",), doc: Path = DOC) -> list[str]:
    """Each contract metric of a required group that the exposition `body` lacks or types
    differently from the contract, one line each; empty when it meets the contract."""
    types = exposed_types(body)
    found = []
    for metric in metrics(doc):
        if metric.group not in ("core", *required):
            continue
        exposed = types.get(metric.name)
        if exposed is None:
            found.append(f"MISSING {metric.group} {metric.name}")
        elif metric.kind in ("counter", "histogram") and exposed != metric.kind:
            found.append(f"WRONG-TYPE {metric.name}: {exposed}, want {metric.kind}")
    return found

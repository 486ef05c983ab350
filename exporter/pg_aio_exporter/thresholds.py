"""Stage 0, thresholds.yaml: the one loader of the thresholds the report judges by, the alert
rules (alerts/generate.py) render and the dashboards (dashboards/generate.py) draw, and the
storage classes a target's configuration may name. `document()` reads the file; `Thresholds`
is its typed form (the rules merge a user's overrides into the document first, and check the
result by building it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Shipped in the package, so that an installed report has it.
PATH = Path(__file__).resolve().parent / "thresholds.yaml"

SEVERITIES = ("ok", "info", "warning", "critical")


@dataclass(frozen=True)
class BaselineSettings:
    """How a side of the report (reads, writes) judges a figure against the baseline's: its
    own, from its own alerts (report/side.py)."""

    regression_factor: float  # the side's latency regression: per byte above factor x baseline
    latency_factor: float  # one signal of the side's saturation: per byte above this x baseline


@dataclass(frozen=True)
class StorageClass:
    """What healthy storage of one class delivers (thresholds.yaml storage_classes)."""

    name: str
    seconds_per_read: float  # a read may wait this ...
    bytes_per_second: float  # ... plus its size at this rate
    seconds_per_sync: float  # a WAL sync may take this

    def allowed_seconds_per_read(self, size_bytes: float) -> float:
        return self.seconds_per_read + size_bytes / self.bytes_per_second


def storage_classes(params: Mapping[str, Any]) -> dict[str, StorageClass]:
    """The classes of a parameters document, fastest first (as the file lists them)."""
    return {
        name: StorageClass(
            name,
            float(c["seconds_per_read"]),
            float(c["bytes_per_second"]),
            float(c["seconds_per_sync"]),
        )
        for name, c in params["storage_classes"].items()
    }


def events(pattern: str) -> tuple[str, ...]:
    """Wait event names of a rule's regex alternation ("A|B|C"), in its order."""
    return tuple(pattern.split("|"))


@dataclass(frozen=True)
class WriteThresholds:
    """The write side's alert thresholds (issue 23), the same numbers as the rules'."""

    max_seconds_per_sync: float  # PgAioWalSyncLatencyHigh: the storage class's seconds_per_sync
    min_syncs_per_second: float
    min_slow_sync_share: float  # of the intervals with syncs, those above the limit
    regression_factor: float  # PgAioWriteLatencyRegression: per-byte write time x baseline's
    min_write_ops_per_second: float
    min_seconds_per_write: float  # writes this fast (page cache) are not judged
    max_backend_share: float  # PgAioBackendsWritingBuffers
    min_backend_writes_per_second: float
    write_wait_events: tuple[str, ...]  # PgAioStorageSaturatedByWrites: data file IO waits,
    wal_sync_events: tuple[str, ...]  # WAL syncs,
    wal_wait_events: tuple[str, ...]  # other WAL IO waits ...
    write_lock_events: tuple[str, ...]  # ... and LWLock waits (each in the file's order)
    min_write_wait_sessions: float
    latency_factor: float

    @property
    def io_write_events(self) -> tuple[str, ...]:
        """Every IO wait on writes, the data files' and the WAL's."""
        return self.write_wait_events + self.wal_sync_events + self.wal_wait_events

    @property
    def baseline(self) -> BaselineSettings:
        """The write side's own baseline settings (its regression and saturation alerts')."""
        return BaselineSettings(self.regression_factor, self.latency_factor)

    @classmethod
    def from_alerts(cls, alerts: Mapping[str, Any], storage: StorageClass) -> WriteThresholds:
        wal = alerts["PgAioWalSyncLatencyHigh"]
        regression = alerts["PgAioWriteLatencyRegression"]
        backends = alerts["PgAioBackendsWritingBuffers"]
        saturated = alerts["PgAioStorageSaturatedByWrites"]
        return cls(
            max_seconds_per_sync=storage.seconds_per_sync,
            min_syncs_per_second=float(wal["min_syncs_per_second"]),
            min_slow_sync_share=float(wal["min_share"]),
            regression_factor=float(regression["factor"]),
            min_write_ops_per_second=float(regression["min_write_ops_per_second"]),
            min_seconds_per_write=float(regression["min_seconds_per_write"]),
            max_backend_share=float(backends["max_backend_share"]),
            min_backend_writes_per_second=float(backends["min_backend_writes_per_second"]),
            write_wait_events=events(saturated["write_wait_events"]),
            wal_sync_events=events(saturated["wal_sync_events"]),
            wal_wait_events=events(saturated["wal_wait_events"]),
            write_lock_events=events(saturated["write_lock_events"]),
            min_write_wait_sessions=float(saturated["min_write_wait_sessions"]),
            latency_factor=float(saturated["latency_factor"]),
        )


@dataclass(frozen=True)
class Thresholds:
    # Alert rules (alerts/params.yaml): the same numbers, the same meaning.
    min_read_ops_per_second: float  # below this, latency is noise and nothing is judged
    regression_factor: float  # PgAioReadLatencyRegression: per-byte wait x the baseline's
    storage: StorageClass  # PgAioReadLatencyHigh, PgAioWalSyncLatencyHigh: the target's class
    min_slow_read_share: float  # PgAioReadLatencyHigh: of the intervals with reads, those slow
    io_wait_events: tuple[str, ...]  # PgAioStorageSaturated (in the file's order)
    min_read_wait_share: float  # share of active time waiting on reads
    latency_factor: float
    volume_limit_share: float  # reads at this share of the volume's limits are at them
    max_utilization: float  # PgAioWorkerPoolSaturated
    min_queued_ios: float  # ... I/Os waiting for an io worker while it is busy
    max_submission_queue_sessions: float
    min_pool_share: float  # PostgreSQL 19: running io workers / io_max_workers of a pinned pool
    severities: Mapping[str, str]  # alert name, or report-only finding id -> severity
    # Report only.
    max_uncombined_read_size_bytes: float  # reads_not_combined
    max_sync_read_sessions: float  # io_worker_pool_saturated: clients reading themselves
    min_uncounted_read_sessions: float  # reads_not_yet_counted
    max_io_workers: int  # PostgreSQL's upper bound for io_workers and io_max_workers
    workload_regression_factor: float  # workload_regression: workload time x the baseline's
    # Workload time by statements: the matched ones' least share of the baseline's time.
    min_matched_statement_share: float
    writes: WriteThresholds | None = None  # None: the write side is not judged
    # Every class, fastest first: which one the measurements look like.
    storage_classes: Mapping[str, StorageClass] | None = None
    # The target volume's own limits, when configured (volume_iops, volume_bytes_per_second).
    volume_max_ops: float | None = None
    volume_max_bytes: float | None = None

    @property
    def baseline(self) -> BaselineSettings:
        """The read side's own baseline settings (its regression and saturation alerts')."""
        return BaselineSettings(self.regression_factor, self.latency_factor)

    def allowed_seconds_per_read(self, size_bytes: float) -> float:
        """PgAioReadLatencyHigh's limit for reads of this average size."""
        return self.storage.allowed_seconds_per_read(size_bytes)

    def usual_for_reads(self, seconds_per_read: float, size_bytes: float) -> StorageClass | None:
        """The fastest class for which reads this slow are usual (None: slow for all)."""
        for storage in (self.storage_classes or {}).values():
            if seconds_per_read <= storage.allowed_seconds_per_read(size_bytes):
                return storage
        return None

    def usual_for_syncs(self, seconds_per_sync: float) -> StorageClass | None:
        """The fastest class for which WAL syncs this slow are usual (None: slow for all)."""
        for storage in (self.storage_classes or {}).values():
            if seconds_per_sync <= storage.seconds_per_sync:
                return storage
        return None

    @classmethod
    def from_params(cls, params: Mapping[str, Any], storage_class: str | None = None) -> Thresholds:
        """`storage_class` None: the document's default_storage_class."""
        alerts, report = params["alerts"], params["report"]
        classes = storage_classes(params)
        storage = classes[storage_class or params["default_storage_class"]]
        saturated = alerts["PgAioStorageSaturated"]
        pool = alerts["PgAioWorkerPoolSaturated"]
        return cls(
            min_read_ops_per_second=float(params["min_read_ops_per_second"]),
            regression_factor=float(alerts["PgAioReadLatencyRegression"]["factor"]),
            storage=storage,
            min_slow_read_share=float(alerts["PgAioReadLatencyHigh"]["min_share"]),
            io_wait_events=events(saturated["io_wait_events"]),
            min_read_wait_share=float(saturated["min_read_wait_share"]),
            volume_limit_share=float(saturated["volume_limit_share"]),
            latency_factor=float(saturated["latency_factor"]),
            max_utilization=float(pool["max_utilization"]),
            min_queued_ios=float(pool["min_queued_ios"]),
            max_submission_queue_sessions=float(pool["max_submission_queue_sessions"]),
            min_pool_share=float(pool["min_pool_share"]),
            severities={name: alert["severity"] for name, alert in alerts.items()}
            # The report-only findings' severities sit among the report section's numbers.
            | {name: f["severity"] for name, f in report.items() if isinstance(f, Mapping)},
            max_uncombined_read_size_bytes=float(report["max_uncombined_read_size_bytes"]),
            max_sync_read_sessions=float(report["max_sync_read_sessions"]),
            min_uncounted_read_sessions=float(report["min_uncounted_read_sessions"]),
            max_io_workers=int(report["max_io_workers"]),
            workload_regression_factor=float(report["workload_regression_factor"]),
            min_matched_statement_share=float(report["min_matched_statement_share"]),
            writes=WriteThresholds.from_alerts(alerts, storage),
            storage_classes=classes,
        )


def document(path: Path = PATH) -> dict[str, Any]:
    """The parameters document as written (ints stay ints: the rules render the numbers)."""
    import yaml  # noqa: PLC0415 (RSS: PyYAML only when a file is read, docs/performance.md)

    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def load(storage_class: str | None = None, path: Path = PATH) -> Thresholds:
    """The shipped thresholds (or those of the document at `path`), judging storage by
    `storage_class` (None: the default)."""
    return Thresholds.from_params(document(path), storage_class)


def storage_class_names() -> tuple[str, ...]:
    """The storage classes a target may name, fastest first."""
    return tuple(storage_classes(document()))

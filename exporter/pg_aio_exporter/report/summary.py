"""The report's model: what one window measured, as counts, with the figures derived from them.

Counts (reads, bytes, samples) rather than rates are kept, so that a saved report reloads
exactly and two reports compare with the same formulas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pg_aio_exporter.collectors.activity import CLIENT, IO_WORKER, WaitKey
from pg_aio_exporter.collectors.intervals import (
    IntervalReads,
    LabelKey,
    ReadCounters,
    read_figures,
    total,
)
from pg_aio_exporter.report.workload import Workload
from pg_aio_exporter.report.written import Writes
from pg_aio_exporter.versions import PG16, PG18

BLOCK_BYTES = 8192  # what one uncombined read covers (PostgreSQL's default block size)
SUBMISSION_QUEUE = ("LWLock", "AioWorkerSubmissionQueue")
SYNC_READ = ("IO", "DataFileRead")
SUBMITTED = "SUBMITTED"  # pg_aios state


@dataclass(frozen=True)
class ServerFacts:
    version: str
    version_num: int
    # pg_settings values in base units, keyed like the exporter's gauges without their
    # `pg_settings_` prefix (io_combine_limit_bytes, track_io_timing 0/1, ...); a setting the
    # server does not have is missing.
    settings: Mapping[str, float]
    io_method: str | None  # None before PostgreSQL 18
    io_methods: tuple[str, ...] = ()  # the values this build accepts
    pending_restart: tuple[str, ...] = ()

    @property
    def aio(self) -> bool:
        return self.version_num >= PG18

    @property
    def has_pg_stat_io(self) -> bool:
        return self.version_num >= PG16

    @property
    def track_io_timing(self) -> bool:
        return self.settings.get("track_io_timing") == 1

    @property
    def io_uring_available(self) -> bool:
        return "io_uring" in self.io_methods


@dataclass(frozen=True)
class Reads:
    """Counted reads of one pg_stat_io row, or of the whole server, over the window."""

    counters: ReadCounters
    seconds: float  # the time the counts cover
    timed: bool  # track_io_timing on throughout: read_time measured the waits

    @property
    def figures(self) -> IntervalReads | None:
        return read_figures(self.counters, self.timed)

    @property
    def reads_per_second(self) -> float:
        return self.counters.reads / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_second(self) -> float:
        return self.counters.read_bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def wait_sessions(self) -> float | None:
        """Average sessions waiting in counted reads (read time per second of window)."""
        if not self.timed or self.seconds <= 0:
            return None
        return self.counters.read_time_ms / 1000.0 / self.seconds


@dataclass(frozen=True)
class Activity:
    """What the sampler saw: counts summed over samples."""

    samples: int
    sample_interval: float
    wait_samples: Mapping[WaitKey, int]  # processes doing work, by wait
    io_workers: int | None = None  # in the last sample; None: none could be seen
    io_worker_slots: int = 0  # io workers summed over samples
    io_worker_busy: int = 0  # busy io workers summed over samples
    # pg_aios handles summed over samples, by state and operation; most in one sample, by
    # operation
    in_flight: Mapping[tuple[str, str], int] = field(default_factory=dict)
    in_flight_max: Mapping[str, int] = field(default_factory=dict)

    def sessions(self, key: WaitKey) -> float:
        return self.wait_samples.get(key, 0) / self.samples if self.samples else 0.0

    def client_samples(self) -> int:
        """Client backends doing work, summed over the samples."""
        return sum(n for key, n in self.wait_samples.items() if key[0] == CLIENT)

    def client_sessions(self) -> float:
        """DB time: average client backends doing work (on CPU or waiting), per second."""
        return self.client_samples() / self.samples if self.samples else 0.0

    def top(self, limit: int) -> list[tuple[WaitKey, float]]:
        ranked = sorted(self.wait_samples.items(), key=lambda item: (-item[1], item[0]))
        return [(key, self.sessions(key)) for key, _ in ranked[:limit]]

    def active_sessions(self) -> float:
        """Average sessions doing work, io workers aside (they work for the others)."""
        return sum(self.sessions(k) for k in self.wait_samples if k[0] != IO_WORKER)

    def read_wait_sessions(self, io_wait_events: frozenset[str]) -> float:
        """Average sessions waiting on reads, io workers aside: the storage alert's measure."""
        return sum(
            self.sessions(k)
            for k in self.wait_samples
            if k[0] != IO_WORKER and k[1] == "IO" and k[2] in io_wait_events
        )

    def read_wait_share(self, io_wait_events: frozenset[str]) -> float | None:
        active = self.active_sessions()
        return self.read_wait_sessions(io_wait_events) / active if active > 0 else None

    @property
    def submission_queue_sessions(self) -> float:
        return sum(self.sessions(k) for k in self.wait_samples if k[1:] == SUBMISSION_QUEUE)

    @property
    def sync_read_sessions(self) -> float:
        """Client backends reading by themselves. Under io_method=worker, PostgreSQL 18 does so
        when the io worker queue is full, and also for single-block reads it waits for at once
        (index lookups), whatever the pool's load."""
        return self.sessions((CLIENT, *SYNC_READ))

    @property
    def io_worker_utilization(self) -> float | None:
        return self.io_worker_busy / self.io_worker_slots if self.io_worker_slots else None

    @property
    def busy_io_workers(self) -> float | None:
        return self.io_worker_busy / self.samples if self.io_worker_slots and self.samples else None

    def operations(self) -> list[str]:
        return sorted({op for _, op in self.in_flight} | set(self.in_flight_max))

    def in_flight_average(self, operation: str) -> float:
        total = sum(n for (_, op), n in self.in_flight.items() if op == operation)
        return total / self.samples if self.samples else 0.0

    @property
    def submitted_average(self) -> float:
        """I/Os handed to the io method and not done yet (queued for or in an io worker)."""
        total = sum(n for (state, _), n in self.in_flight.items() if state == SUBMITTED)
        return total / self.samples if self.samples else 0.0


@dataclass(frozen=True)
class Summary:
    """One report window of one target."""

    target: str
    started_at: float  # epoch seconds
    ended_at: float
    server: ServerFacts
    rows: Mapping[LabelKey, ReadCounters]  # counted reads per backend_type, object, context
    read_seconds: float  # the time the counted intervals cover
    timed: bool  # track_io_timing on at every poll of the window
    activity: Activity
    resets: tuple[float, ...] = ()  # pg_stat_io stats_reset values that appeared
    restarts: int = 0
    not_visible: tuple[str, ...] = ()  # what this role could not see, in words
    workload: Workload | None = None  # None: a saved report of schema 1
    writes: Writes | None = None  # the write side (report/writes.py); None: not measured

    @property
    def duration(self) -> float:
        return self.ended_at - self.started_at

    def reads(self, key: LabelKey) -> Reads:
        return Reads(self.rows[key], self.read_seconds, self.timed)

    @property
    def total(self) -> Reads:
        return Reads(total(self.rows.values()), self.read_seconds, self.timed)

    def reading_rows(self) -> list[LabelKey]:
        """The rows that read, most bytes first."""
        keys = [k for k, c in self.rows.items() if c.reads > 0]
        return sorted(keys, key=lambda k: (-self.rows[k].read_bytes, k))

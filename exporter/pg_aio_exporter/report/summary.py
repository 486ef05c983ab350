"""The report's model: what one window measured, as counts, with the figures derived from them.

Counts (reads, bytes, samples) rather than rates are kept, so that a saved report reloads
exactly and two reports compare with the same formulas.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pg_aio_exporter.collectors import pg_wait_events
from pg_aio_exporter.collectors.activity import ActivityCollector, WaitKey
from pg_aio_exporter.collectors.intervals import (
    IntervalReads,
    LabelKey,
    ReadCounters,
    read_figures,
    read_total,
)
from pg_aio_exporter.collectors.pg_stat_io import PgStatIoCollector
from pg_aio_exporter.report.margin import Estimate
from pg_aio_exporter.report.side import Batches, Figures, per_byte, rate
from pg_aio_exporter.report.workload import Workload
from pg_aio_exporter.report.written import Writes
from pg_aio_exporter.versions import PG16, PG18, PG19
from pg_aio_exporter.vocabulary import CLIENT_BACKEND as CLIENT
from pg_aio_exporter.vocabulary import IO_WORKER, SLEEP_WAIT_CLASS, SUBMISSION_QUEUE, SYNC_READ

SUBMITTED = "SUBMITTED"  # pg_aios state


@dataclass(frozen=True)
class ServerFacts:
    version: str
    version_num: int
    # pg_settings values in base units, keyed like the exporter's gauges without their
    # `pg_settings_` prefix (io_combine_limit_bytes, track_io_timing 0/1, ...); a setting the
    # server does not have is missing; all are when pg_settings was not read (settings_read).
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
    def settings_read(self) -> bool:
        """pg_settings was read: every server has track_io_timing, so no settings at all means
        none was read (the role could not see them, or each read failed)."""
        return "track_io_timing" in self.settings

    @property
    def track_io_timing(self) -> bool | None:
        """None: not read, which is neither on nor off."""
        return self.settings["track_io_timing"] == 1 if self.settings_read else None

    @property
    def block_size(self) -> float | None:
        """The server's block size in bytes (what a hit counts); None: not read."""
        return self.settings.get("block_size_bytes")

    @property
    def io_method_shown(self) -> str:
        """io_method in words: "not read" when pg_settings was not, "none" before 18."""
        if self.io_method is not None:
            return self.io_method
        return "not read" if self.aio and not self.settings_read else "none"

    @property
    def io_uring_available(self) -> bool:
        return "io_uring" in self.io_methods

    @property
    def self_sizing_pool(self) -> bool:
        """PostgreSQL 19 sizes the io worker pool itself, up to io_max_workers (no io_workers)."""
        return self.version_num >= PG19 and "io_max_workers" in self.settings

    @property
    def pool_setting(self) -> str:
        """The setting that bounds the io worker pool: what advice names."""
        return "io_max_workers" if self.self_sizing_pool else "io_workers"


# The read side's figures by name, in the order the comparison shows them (Reads.named).
READ_FIGURES = (
    "seconds_per_byte",
    "seconds_per_read",
    "read_size_bytes",
    "bytes_per_second",
    "reads_per_second",
    "hit_ratio",
)


@dataclass(frozen=True)
class Reads:
    """Counted reads of one pg_stat_io row, or of the whole server, over the window: the read
    side (report/side.py)."""

    counters: ReadCounters
    seconds: float  # the time the counts cover
    timed: bool  # track_io_timing on throughout: read_time measured the waits
    block_size: float | None  # the server's, bytes; None: not read (nor is the hit ratio)

    @property
    def figures(self) -> IntervalReads | None:
        return read_figures(self.counters, self.timed, self.block_size)

    @property
    def reads_per_second(self) -> float:
        return rate(self.counters.reads, self.seconds)

    @property
    def bytes_per_second(self) -> float:
        return rate(self.counters.read_bytes, self.seconds)

    @property
    def wait_sessions(self) -> float | None:
        """Average sessions waiting in counted reads (read time per second of window)."""
        if not self.timed or self.seconds <= 0:
            return None
        return self.counters.read_time_ms / 1000.0 / self.seconds

    def seconds_per_byte(self) -> float | None:
        """The figure a side compares with its baseline: wait per byte read."""
        figures = self.figures
        return None if figures is None else figures.seconds_per_byte

    def named(self) -> Figures:
        """The figures by name (READ_FIGURES), as the comparison shows them."""
        figures = self.figures
        return {
            "seconds_per_byte": figures.seconds_per_byte if figures else None,
            "seconds_per_read": figures.latency_seconds if figures else None,
            "read_size_bytes": figures.size_bytes if figures else None,
            "bytes_per_second": self.bytes_per_second,
            "reads_per_second": self.reads_per_second,
            "hit_ratio": figures.hit_ratio if figures else None,
        }


@dataclass(frozen=True)
class Activity:
    """What the sampler saw: counts summed over samples."""

    samples: int
    sample_interval: float
    wait_samples: Mapping[WaitKey, int]  # processes doing work, by wait
    io_workers: int | None = None  # in the last sample; None: none could be seen
    io_worker_slots: int = 0  # io workers summed over samples
    io_worker_busy: int = 0  # busy io workers summed over samples
    client_slots: int = 0  # client backends connected (working or idle), summed over samples
    # client backends idle inside a transaction (between its statements), summed over samples
    client_in_transaction_slots: int = 0
    # pg_aios handles summed over samples, by state and operation; most in one sample, by
    # operation
    in_flight: Mapping[tuple[str, str], int] = field(default_factory=dict)
    in_flight_max: Mapping[str, int] = field(default_factory=dict)
    # The wait events this server reports (pg_wait_events.server_events: its pg_wait_events,
    # else the package's by version): a judgement counts the events it names only as these.
    wait_events: pg_wait_events.WaitEvents = field(kw_only=True)

    def _named(self, key: WaitKey, events: Collection[str]) -> bool:
        """A sampled wait is one of `events`, as this server names and places it."""
        return (key[1], key[2]) in self.wait_events.named(events)

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
        """Average sessions doing work, io workers aside (they work for the others), and so are
        clients asleep (pg_sleep, a throttled VACUUM): busy (DB time) but paced by nothing."""
        return sum(
            self.sessions(k)
            for k in self.wait_samples
            if k[0] != IO_WORKER and k[1] != SLEEP_WAIT_CLASS
        )

    def read_wait_sessions(self, io_wait_events: Collection[str]) -> float:
        """Average sessions waiting on reads, io workers aside: the storage alert's measure."""
        return sum(
            self.sessions(k)
            for k in self.wait_samples
            if k[0] != IO_WORKER and self._named(k, io_wait_events)
        )

    def read_wait_share(self, io_wait_events: Collection[str]) -> float | None:
        active = self.active_sessions()
        return self.read_wait_sessions(io_wait_events) / active if active > 0 else None

    @property
    def submission_queue_sessions(self) -> float:
        return sum(
            self.sessions(k) for k in self.wait_samples if self._named(k, {SUBMISSION_QUEUE})
        )

    @property
    def sync_read_sessions(self) -> float:
        """Client backends reading by themselves. Under io_method=worker, PostgreSQL 18 does so
        when the io worker queue is full, and also for single-block reads it waits for at once
        (index lookups), whatever the pool's load."""
        return sum(self.sessions((CLIENT, *event)) for event in self.wait_events.named({SYNC_READ}))

    @property
    def io_worker_utilization(self) -> float | None:
        return self.io_worker_busy / self.io_worker_slots if self.io_worker_slots else None

    @property
    def pool_average(self) -> float | None:
        """io workers running, on average over the samples (the live pool)."""
        if not (self.io_worker_slots and self.samples):
            return None
        return self.io_worker_slots / self.samples

    def pool_share(self, io_max_workers: float) -> float | None:
        """The live pool's average size against io_max_workers (PostgreSQL 19)."""
        pool = self.pool_average
        return None if pool is None or io_max_workers <= 0 else pool / io_max_workers

    def max_utilization(self, io_max_workers: float) -> float | None:
        """Busy io workers on average against io_max_workers: the pool's room to grow."""
        busy = self.busy_io_workers
        return None if busy is None or io_max_workers <= 0 else busy / io_max_workers

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

    @property
    def queued_ios(self) -> float | None:
        """I/Os handed to the io workers and not picked up, on average: pg_aios keeps an I/O
        SUBMITTED until a worker has done it, so those beyond the busy workers wait for one
        (the rules' pg_aio:io_worker_queued_ios)."""
        busy = self.busy_io_workers
        return None if busy is None else max(0.0, self.submitted_average - busy)


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
    # The collectors never read in the window (their failures are in not_visible): what they
    # measure is not read, neither zero nor off.
    not_read: tuple[str, ...] = ()
    workload: Workload | None = None  # None: a saved report of schema 1
    writes: Writes | None = None  # the write side (report/findings/writes.py); None: not measured
    # The window over time as the JSON has it (report/series.py); None: a saved report of
    # schema 1 or 2
    series: Mapping[str, Any] | None = None
    # Read wait and bytes per sub-window (side.Batches), the error of read wait per byte;
    # None: not kept (a report saved before them).
    read_batches: Batches | None = None

    @property
    def duration(self) -> float:
        return self.ended_at - self.started_at

    def read(self, collector: str) -> bool:
        return collector not in self.not_read

    @property
    def reads_read(self) -> bool:
        """pg_stat_io was read (and is there: PostgreSQL 16+)."""
        return self.server.has_pg_stat_io and self.read(PgStatIoCollector.name)

    @property
    def waits_read(self) -> bool:
        """pg_stat_activity was sampled: the wait figures are measured."""
        return self.activity.samples > 0 and self.read(ActivityCollector.name)

    def reads(self, key: LabelKey) -> Reads:
        return Reads(self.rows[key], self.read_seconds, self.timed, self.server.block_size)

    @property
    def total(self) -> Reads:
        return Reads(read_total(self.rows), self.read_seconds, self.timed, self.server.block_size)

    def read_estimate(self) -> Estimate | None:
        """The whole server's read wait per byte with its error (side.per_byte)."""
        return per_byte(self.total.seconds_per_byte(), self.read_batches, self.read_seconds)

    def reading_rows(self) -> list[LabelKey]:
        """The rows that read, most bytes first."""
        keys = [k for k, c in self.rows.items() if c.reads > 0]
        return sorted(keys, key=lambda k: (-self.rows[k].read_bytes, k))

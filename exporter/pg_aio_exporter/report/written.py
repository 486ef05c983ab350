"""What a report window wrote, as counts (the read side's Reads and Summary keep theirs in
summary.py): pg_stat_io's write operations per row and the WAL counted by the pg_stat_wal
collector, with the figures derived from them by the collectors' interval math."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pg_aio_exporter.collectors.checkpointer import CheckpointerCounts
from pg_aio_exporter.collectors.intervals import (
    NO_WRITES,
    IntervalOperation,
    IntervalWal,
    LabelKey,
    WalCounters,
    WriteCounters,
    wal_figures,
    write_figures,
)
from pg_aio_exporter.report.margin import Estimate
from pg_aio_exporter.report.side import Batches, Figures, per_byte, rate
from pg_aio_exporter.vocabulary import BUFFER_WRITES
from pg_aio_exporter.vocabulary import CLIENT_BACKEND as CLIENT


@dataclass(frozen=True)
class Checkpoints:
    """What the checkpointer and background writer counted over the window (collector
    `checkpointer`)."""

    timed: float  # started by checkpoint_timeout
    requested: float  # WAL reached max_wal_size, or a CHECKPOINT command
    buffers_written: float  # by checkpoints
    buffers_clean: float  # by the background writer
    maxwritten_clean: float  # background writer rounds stopped at bgwriter_lru_maxpages

    @classmethod
    def between(cls, first: CheckpointerCounts, last: CheckpointerCounts) -> Checkpoints | None:
        """last - first, None across a restart or a reset (a counter went backwards)."""
        if first.start_time != last.start_time:
            return None
        delta = [getattr(last, n) - getattr(first, n) for n in cls.__dataclass_fields__]
        return cls(*delta) if min(delta) >= 0 else None


# The write side's figures by name, in the order the comparison shows them (Writes.named).
WRITE_FIGURES = (
    "write_seconds_per_byte",
    "write_seconds_per_operation",
    "write_bytes_per_second",
    "extend_seconds_per_byte",
    "fsync_seconds_per_operation",
    "wal_seconds_per_sync",
    "wal_seconds_per_write",
    "wal_bytes_per_second",
    "backend_write_share",
)


@dataclass(frozen=True)
class Writes:
    """What one window wrote: counts, as the read side keeps them."""

    rows: Mapping[LabelKey, WriteCounters]  # per pg_stat_io row (wal rows aside)
    seconds: float  # the time the pg_stat_io intervals cover
    timed: bool  # track_io_timing on throughout
    wal: WalCounters | None = None  # None: no pg_stat_wal (before 14) or not read
    wal_seconds: float = 0.0
    wal_timed: bool = False  # track_wal_io_timing on throughout
    checkpoints: Checkpoints | None = None  # None: not read, or reset during the window
    # Buffer write time and bytes per sub-window (side.Batches), the error of write time per
    # byte; None: not kept (a report saved before them).
    batches: Batches | None = None

    @property
    def total(self) -> WriteCounters:
        return sum(self.rows.values(), NO_WRITES)

    def figures(self) -> dict[str, IntervalOperation]:
        """Per write operation, over the whole server."""
        return write_figures(self.total, self.timed)

    def per_second(self, count: float) -> float:
        return rate(count, self.seconds)

    def buffer_writes(self) -> dict[str, float]:
        """Shared buffers written back to their relation, per backend type (who writes)."""
        out: dict[str, float] = {}
        for (backend_type, obj, context), counters in self.rows.items():
            if (obj, context) == BUFFER_WRITES and counters.writes > 0:
                out[backend_type] = out.get(backend_type, 0.0) + counters.writes
        return out

    def backend_share(self) -> float | None:
        """Client backends' share of the shared buffer writes (PgAioBackendsWritingBuffers)."""
        by_type = self.buffer_writes()
        every = sum(by_type.values())
        return by_type.get(CLIENT, 0.0) / every if every > 0 else None

    def wal_figures(self) -> IntervalWal | None:
        if self.wal is None or self.wal_seconds <= 0:
            return None
        return wal_figures(self.wal, self.wal_timed)

    def wal_per_second(self, count: float) -> float:
        return rate(count, self.wal_seconds)

    def seconds_per_byte(self) -> float | None:
        """The figure a side compares with its baseline: buffer write time per byte."""
        write = self.figures().get("write")
        return None if write is None else write.seconds_per_byte

    def estimate(self) -> Estimate | None:
        """Buffer write time per byte with its error (side.per_byte)."""
        return per_byte(self.seconds_per_byte(), self.batches, self.seconds)

    def named(self) -> Figures:
        """The whole server's figures by name (WRITE_FIGURES), as the comparison shows them."""
        total, ops, wal_iv, wal = self.total, self.figures(), self.wal_figures(), self.wal
        write, extend, fsync = ops.get("write"), ops.get("extend"), ops.get("fsync")
        return {
            "write_seconds_per_byte": write.seconds_per_byte if write else None,
            "write_seconds_per_operation": write.latency_seconds if write else None,
            "write_bytes_per_second": self.per_second(total.write_bytes),
            "extend_seconds_per_byte": extend.seconds_per_byte if extend else None,
            "fsync_seconds_per_operation": fsync.latency_seconds if fsync else None,
            "wal_seconds_per_sync": wal_iv.sync_latency_seconds if wal_iv else None,
            "wal_seconds_per_write": wal_iv.write_latency_seconds if wal_iv else None,
            "wal_bytes_per_second": self.wal_per_second(wal.wal_bytes) if wal else None,
            "backend_write_share": self.backend_share(),
        }

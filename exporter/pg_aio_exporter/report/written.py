"""What a report window wrote, as counts (the read side's Reads and Summary keep theirs in
summary.py): pg_stat_io's write operations per row and the WAL counted by the pg_stat_wal
collector, with the figures derived from them by the collectors' interval math."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
    def between(cls, first: Mapping[str, float], last: Mapping[str, float]) -> Checkpoints | None:
        """last - first, None across a restart or a reset (a counter went backwards)."""
        if first["start_time"] != last["start_time"]:
            return None
        names = ("timed", "requested", "buffers_written", "buffers_clean", "maxwritten_clean")
        delta = [last[n] - first[n] for n in names]
        return cls(*delta) if min(delta) >= 0 else None


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

    @property
    def total(self) -> WriteCounters:
        return sum(self.rows.values(), NO_WRITES)

    def figures(self) -> dict[str, IntervalOperation]:
        """Per write operation, over the whole server."""
        return write_figures(self.total, self.timed)

    def per_second(self, count: float) -> float:
        return count / self.seconds if self.seconds > 0 else 0.0

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
        return count / self.wal_seconds if self.wal_seconds > 0 else 0.0

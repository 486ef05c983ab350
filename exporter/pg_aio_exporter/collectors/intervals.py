"""Per-interval read figures from two consecutive pg_stat_io snapshots (pure math, no I/O).

An interval counts only when it is trustworthy: same postmaster, same stats_reset, and no
counter went backwards. Anything else yields no value rather than a negative or absurd one.
The exporter turns each interval into gauges; the report sums the intervals of its window.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

LabelKey = tuple[str, str, str]  # backend_type, object, context


@dataclass(frozen=True, slots=True)  # one per pg_stat_io row per target, kept between polls
class ReadCounters:
    reads: float
    read_bytes: float
    read_time_ms: float
    hits: float

    def __add__(self, other: ReadCounters) -> ReadCounters:
        return ReadCounters(
            self.reads + other.reads,
            self.read_bytes + other.read_bytes,
            self.read_time_ms + other.read_time_ms,
            self.hits + other.hits,
        )


NO_READS = ReadCounters(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Snapshot:
    rows: dict[LabelKey, ReadCounters]
    stats_reset: float | None  # epoch seconds
    start_time: float  # postmaster start, epoch seconds
    track_io_timing: bool


@dataclass(frozen=True)
class IntervalReads:
    latency_seconds: float | None  # wait time per read operation
    seconds_per_byte: float | None
    size_bytes: float
    hit_ratio: float


def comparable(prev: Snapshot | None, cur: Snapshot) -> bool:
    """Whether the counters of `cur` continue those of `prev` (no restart, no reset)."""
    return (
        prev is not None
        and prev.start_time == cur.start_time
        and prev.stats_reset == cur.stats_reset
    )


def deltas(prev: Snapshot, cur: Snapshot) -> dict[LabelKey, ReadCounters]:
    """What each row counted between two comparable snapshots; a row whose counters went
    backwards is left out."""
    out: dict[LabelKey, ReadCounters] = {}
    for key, now in cur.rows.items():
        before = prev.rows.get(key)
        if before is None:
            continue
        delta = ReadCounters(
            now.reads - before.reads,
            now.read_bytes - before.read_bytes,
            now.read_time_ms - before.read_time_ms,
            now.hits - before.hits,
        )
        if min(delta.reads, delta.read_bytes, delta.read_time_ms, delta.hits) >= 0:
            out[key] = delta
    return out


def total(counters: Iterable[ReadCounters]) -> ReadCounters:
    return sum(counters, NO_READS)


def read_figures(delta: ReadCounters, timing: bool) -> IntervalReads | None:
    """Per-read figures of counted reads; None without reads. `timing`: track_io_timing was
    on throughout, so read_time measured something."""
    if delta.reads <= 0 or delta.read_bytes <= 0:
        return None
    read_seconds = delta.read_time_ms / 1000.0
    return IntervalReads(
        latency_seconds=read_seconds / delta.reads if timing else None,
        seconds_per_byte=read_seconds / delta.read_bytes if timing else None,
        size_bytes=delta.read_bytes / delta.reads,
        hit_ratio=delta.hits / (delta.hits + delta.reads),
    )


def interval_reads(prev: Snapshot | None, cur: Snapshot) -> dict[LabelKey, IntervalReads]:
    if prev is None or not comparable(prev, cur):
        return {}
    timing = prev.track_io_timing and cur.track_io_timing
    out: dict[LabelKey, IntervalReads] = {}
    for key, delta in deltas(prev, cur).items():
        figures = read_figures(delta, timing)
        if figures is not None:
            out[key] = figures
    return out


@dataclass
class ReadWindow:
    """Counted reads summed over the consecutive intervals of a window (the report's)."""

    rows: dict[LabelKey, ReadCounters] = field(default_factory=dict)
    seconds: float = 0.0  # time covered by the intervals that counted
    timed: bool = True  # track_io_timing was on at every snapshot
    resets: list[float] = field(default_factory=list)  # stats_reset values that appeared
    restarts: int = 0
    _last: tuple[Snapshot, float] | None = None

    def observe(self, cur: Snapshot, at: float) -> None:
        """Add the interval from the previous snapshot to `cur`, taken at `at` (seconds)."""
        self.timed = self.timed and cur.track_io_timing
        last, self._last = self._last, (cur, at)
        if last is None:
            return
        prev, prev_at = last
        if prev.start_time != cur.start_time:
            self.restarts += 1
        elif prev.stats_reset != cur.stats_reset:
            self.resets.append(cur.stats_reset or 0.0)
        if not comparable(prev, cur):
            return
        self.seconds += at - prev_at
        for key, delta in deltas(prev, cur).items():
            self.rows[key] = self.rows.get(key, NO_READS) + delta

    def total(self) -> ReadCounters:
        return total(self.rows.values())

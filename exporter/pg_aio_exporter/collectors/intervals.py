"""Per-interval read and write figures from two consecutive pg_stat_io snapshots (pure math,
no I/O).

An interval counts only when it is trustworthy: same postmaster, same stats_reset, and no
counter went backwards. Anything else yields no value rather than a negative or absurd one.
The exporter turns each interval into gauges; the report sums the intervals of its window.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

from pg_aio_exporter import vocabulary

LabelKey = tuple[str, str, str]  # backend_type, object, context


def counter_values(counters: Any) -> tuple[float, ...]:
    """A counters dataclass's fields in order: dataclasses.astuple deep-copies each float,
    which was most of a poll's CPU once a poll added up a hundred rows."""
    return tuple(getattr(counters, f.name) for f in fields(counters))


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


@dataclass(frozen=True, slots=True)
class WriteCounters:
    """The write side of one pg_stat_io row: writes of dirty buffers, relation extension,
    writeback requests (sync_file_range, in blocks) and fsyncs; times in milliseconds."""

    writes: float = 0.0
    write_bytes: float = 0.0
    write_time_ms: float = 0.0
    extends: float = 0.0
    extend_bytes: float = 0.0
    extend_time_ms: float = 0.0
    writebacks: float = 0.0
    writeback_time_ms: float = 0.0
    fsyncs: float = 0.0
    fsync_time_ms: float = 0.0

    def __add__(self, other: WriteCounters) -> WriteCounters:
        return WriteCounters(
            *(a + b for a, b in zip(counter_values(self), counter_values(other), strict=True))
        )


NO_WRITES = WriteCounters()
# The write operations (vocabulary.py) with their WriteCounters fields: (count, bytes or None,
# time in ms).
WRITE_OPERATIONS: dict[str, tuple[str, str | None, str]] = {
    name: (op.count, op.bytes, f"{op.time}_ms") for name, op in vocabulary.WRITE_OPERATIONS.items()
}


@dataclass(frozen=True)
class Snapshot:
    rows: dict[LabelKey, ReadCounters]
    stats_reset: float | None  # epoch seconds
    start_time: float  # postmaster start, epoch seconds
    track_io_timing: bool
    block_size: float  # the server's block_size, bytes: what one hit counts
    writes: dict[LabelKey, WriteCounters] = field(default_factory=dict)


@dataclass(frozen=True)
class IntervalReads:
    latency_seconds: float | None  # wait time per read operation
    seconds_per_byte: float | None
    size_bytes: float
    hit_ratio: float | None  # None: the server's block size is unknown


def comparable(prev: Snapshot | None, cur: Snapshot) -> bool:
    """Whether the counters of `cur` continue those of `prev` (no restart, no reset)."""
    return (
        prev is not None
        and prev.start_time == cur.start_time
        and prev.stats_reset == cur.stats_reset
    )


Counters = TypeVar("Counters", "ReadCounters", "WriteCounters", "WalCounters")


def _minus(now: Counters, before: Counters) -> Counters | None:
    """now - before, field by field; None when a counter went backwards."""
    delta = [a - b for a, b in zip(counter_values(now), counter_values(before), strict=True)]
    return type(now)(*delta) if min(delta) >= 0 else None


def _row_deltas(
    prev: dict[LabelKey, Counters], cur: dict[LabelKey, Counters]
) -> dict[LabelKey, Counters]:
    """What each row counted between two snapshots; a row new in `cur` or whose counters went
    backwards is left out."""
    out: dict[LabelKey, Counters] = {}
    for key, now in cur.items():
        before = prev.get(key)
        delta = _minus(now, before) if before is not None else None
        if delta is not None:
            out[key] = delta
    return out


def deltas(prev: Snapshot, cur: Snapshot) -> dict[LabelKey, ReadCounters]:
    """What each row read between two comparable snapshots."""
    return _row_deltas(prev.rows, cur.rows)


def write_deltas(prev: Snapshot, cur: Snapshot) -> dict[LabelKey, WriteCounters]:
    """What each row wrote between two comparable snapshots."""
    return _row_deltas(prev.writes, cur.writes)


def total(counters: Iterable[ReadCounters]) -> ReadCounters:
    return sum(counters, NO_READS)


def read_total(rows: Mapping[LabelKey, ReadCounters]) -> ReadCounters:
    """The reads of all rows but PostgreSQL 18's `wal` rows (WAL read by walsenders and
    recovery, timed by track_wal_io_timing): the read figures are of relations, as the rules'
    per-target ones (object!="wal")."""
    return total(c for (_, obj, _), c in rows.items() if obj != vocabulary.WAL_OBJECT)


def read_figures(
    delta: ReadCounters, timing: bool, block_size: float | None
) -> IntervalReads | None:
    """Per-read figures of counted reads; None without reads. `timing`: track_io_timing was
    on throughout, so read_time measured something; `block_size`: the server's, bytes (None:
    unknown, and so is the hit ratio)."""
    if delta.reads <= 0 or delta.read_bytes <= 0:
        return None
    read_seconds = delta.read_time_ms / 1000.0
    # `hits` counts blocks but `reads` operations, which on PostgreSQL 18 cover up to
    # io_combine_limit blocks each: the blocks read are the bytes read in the server's
    # block_size (on 16/17 the bytes are reads x op_bytes, one block each: hits / (hits + reads)).
    blocks_read = delta.read_bytes / block_size if block_size else None
    return IntervalReads(
        latency_seconds=read_seconds / delta.reads if timing else None,
        seconds_per_byte=read_seconds / delta.read_bytes if timing else None,
        size_bytes=delta.read_bytes / delta.reads,
        hit_ratio=None if blocks_read is None else delta.hits / (delta.hits + blocks_read),
    )


@dataclass(frozen=True)
class IntervalOperation:
    """One write operation's figures, like a read's: time per operation and per byte."""

    latency_seconds: float
    seconds_per_byte: float | None  # None for operations that move no bytes of their own


def write_figures(delta: WriteCounters, timing: bool) -> dict[str, IntervalOperation]:
    """Per-operation figures of each write operation that happened, by WRITE_OPERATIONS name;
    nothing without `timing` (track_io_timing on throughout): the times would be 0."""
    if not timing:
        return {}
    out: dict[str, IntervalOperation] = {}
    for name, (count_field, bytes_field, time_field) in WRITE_OPERATIONS.items():
        count = getattr(delta, count_field)
        if count <= 0:
            continue
        seconds = getattr(delta, time_field) / 1000.0
        nbytes = getattr(delta, bytes_field) if bytes_field is not None else 0.0
        out[name] = IntervalOperation(seconds / count, seconds / nbytes if nbytes > 0 else None)
    return out


def _interval_deltas(prev: Snapshot | None, cur: Snapshot) -> tuple[Snapshot, bool] | None:
    """(prev, timing) when the interval from `prev` to `cur` is trustworthy; `timing`:
    track_io_timing was on at both ends."""
    if prev is None or not comparable(prev, cur):
        return None
    return prev, prev.track_io_timing and cur.track_io_timing


def interval_writes(
    prev: Snapshot | None, cur: Snapshot
) -> dict[tuple[LabelKey, str], IntervalOperation]:
    """Write figures per (row, operation) over the interval, when it is trustworthy."""
    found = _interval_deltas(prev, cur)
    if found is None:
        return {}
    before, timing = found
    return {
        (key, name): figures
        for key, delta in write_deltas(before, cur).items()
        for name, figures in write_figures(delta, timing).items()
    }


def interval_reads(prev: Snapshot | None, cur: Snapshot) -> dict[LabelKey, IntervalReads]:
    """Read figures per row over the interval, when it is trustworthy (rows that read)."""
    found = _interval_deltas(prev, cur)
    if found is None:
        return {}
    before, timing = found
    return {
        key: figures
        for key, delta in deltas(before, cur).items()
        if (figures := read_figures(delta, timing, cur.block_size)) is not None
    }


Shot = TypeVar("Shot", "Snapshot", "WalSnapshot")


@dataclass
class Window(ABC, Generic[Shot]):
    """Counts summed over the consecutive intervals of a window (the report's), one shape for
    reads and WAL: each snapshot closes the interval from the previous one, which adds its
    counts and its time when the two are comparable (`_add`)."""

    seconds: float = 0.0  # time covered by the intervals that counted
    timed: bool = True  # the side's timing setting was on at every snapshot
    _last: tuple[Shot, float] | None = None

    def observe(self, cur: Shot, at: float) -> None:
        """Add the interval from the previous snapshot to `cur`, taken at `at` (seconds)."""
        self.timed = self.timed and self._timing(cur)
        last, self._last = self._last, (cur, at)
        if last is not None and self._add(last[0], cur):
            self.seconds += at - last[1]

    @abstractmethod
    def _timing(self, cur: Shot) -> bool:
        """The side's timing setting was on at `cur`."""

    @abstractmethod
    def _add(self, prev: Shot, cur: Shot) -> bool:
        """Add what `cur` counted since `prev`; False when the interval does not count."""


@dataclass
class ReadWindow(Window[Snapshot]):
    """pg_stat_io's reads and writes per row over a window."""

    rows: dict[LabelKey, ReadCounters] = field(default_factory=dict)
    writes: dict[LabelKey, WriteCounters] = field(default_factory=dict)
    resets: list[float] = field(default_factory=list)  # stats_reset values that appeared
    restarts: int = 0

    def _timing(self, cur: Snapshot) -> bool:
        return cur.track_io_timing

    def _add(self, prev: Snapshot, cur: Snapshot) -> bool:
        if prev.start_time != cur.start_time:
            self.restarts += 1
        elif prev.stats_reset != cur.stats_reset:
            self.resets.append(cur.stats_reset or 0.0)
        if not comparable(prev, cur):
            return False
        for key, delta in deltas(prev, cur).items():
            self.rows[key] = self.rows.get(key, NO_READS) + delta
        for key, wrote in write_deltas(prev, cur).items():
            self.writes[key] = self.writes.get(key, NO_WRITES) + wrote
        return True

    def total(self) -> ReadCounters:
        return read_total(self.rows)


# --- WAL ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WalCounters:
    """WAL written and flushed, under one meaning on every version: PostgreSQL 16/17 count the
    writes and syncs in pg_stat_wal, 18 in pg_stat_io's `wal` rows (context `normal`); the
    volume (pg_stat_wal) is the same view throughout. Times in milliseconds."""

    writes: float = 0.0
    write_time_ms: float = 0.0
    syncs: float = 0.0
    sync_time_ms: float = 0.0
    records: float = 0.0
    fpi: float = 0.0  # full page images
    wal_bytes: float = 0.0
    buffers_full: float = 0.0  # writes forced because wal_buffers was full

    def __add__(self, other: WalCounters) -> WalCounters:
        return WalCounters(
            *(a + b for a, b in zip(counter_values(self), counter_values(other), strict=True))
        )


NO_WAL = WalCounters()


@dataclass(frozen=True)
class WalSnapshot:
    counters: WalCounters
    stats_reset: float | None  # of the view the writes and syncs come from
    start_time: float
    track_wal_io_timing: bool


def wal_delta(prev: WalSnapshot | None, cur: WalSnapshot) -> WalCounters | None:
    """What the server's WAL counted between two snapshots; None across a restart or reset, or
    when a counter went backwards (pg_stat_wal and pg_stat_io reset apart on 18)."""
    if prev is None or prev.start_time != cur.start_time or prev.stats_reset != cur.stats_reset:
        return None
    return _minus(cur.counters, prev.counters)


@dataclass(frozen=True)
class IntervalWal:
    write_latency_seconds: float | None  # time per WAL write
    sync_latency_seconds: float | None  # time per WAL sync (every commit waits for one)


def wal_figures(delta: WalCounters, timing: bool) -> IntervalWal | None:
    """Per-operation WAL figures; None without `timing` (track_wal_io_timing on throughout)."""
    if not timing:
        return None
    write = delta.write_time_ms / 1000.0 / delta.writes if delta.writes > 0 else None
    sync = delta.sync_time_ms / 1000.0 / delta.syncs if delta.syncs > 0 else None
    return IntervalWal(write, sync)


@dataclass
class WalWindow(Window[WalSnapshot]):
    """WAL counted over a window."""

    counters: WalCounters = NO_WAL

    def _timing(self, cur: WalSnapshot) -> bool:
        return cur.track_wal_io_timing

    def _add(self, prev: WalSnapshot, cur: WalSnapshot) -> bool:
        delta = wal_delta(prev, cur)
        if delta is not None:
            self.counters += delta
        return delta is not None

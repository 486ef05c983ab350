"""Per-interval read gauges from two consecutive pg_stat_io snapshots (pure math, no I/O).

A gauge is defined only when the interval is trustworthy: same postmaster, same stats_reset,
reads happened, and no counter went backwards. Anything else yields no value rather than a
negative or absurd one.
"""

from __future__ import annotations

from dataclasses import dataclass

LabelKey = tuple[str, str, str]  # backend_type, object, context


@dataclass(frozen=True, slots=True)  # one per pg_stat_io row per target, kept between polls
class ReadCounters:
    reads: float
    read_bytes: float
    read_time_ms: float
    hits: float


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


def interval_reads(prev: Snapshot | None, cur: Snapshot) -> dict[LabelKey, IntervalReads]:
    if prev is None or prev.start_time != cur.start_time or prev.stats_reset != cur.stats_reset:
        return {}
    timing = prev.track_io_timing and cur.track_io_timing
    out: dict[LabelKey, IntervalReads] = {}
    for key, now in cur.rows.items():
        before = prev.rows.get(key)
        if before is None:
            continue
        reads = now.reads - before.reads
        read_bytes = now.read_bytes - before.read_bytes
        read_ms = now.read_time_ms - before.read_time_ms
        hits = now.hits - before.hits
        if reads <= 0 or read_bytes <= 0 or read_ms < 0 or hits < 0:
            continue
        read_seconds = read_ms / 1000.0
        out[key] = IntervalReads(
            latency_seconds=read_seconds / reads if timing else None,
            seconds_per_byte=read_seconds / read_bytes if timing else None,
            size_bytes=read_bytes / reads,
            hit_ratio=hits / (hits + reads),
        )
    return out

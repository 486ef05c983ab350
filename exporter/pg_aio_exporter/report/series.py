"""The report's window over time: the series its page charts (report/charts.py), in the JSON.

The recorder keeps the window's running totals (the same counted reads and sample sums the
report's figures come from) at most every `every` seconds, so a 24 h window keeps as few points
as a 2 minute one: MAX_POINTS. Each point of a series is then the difference between two kept
totals: what happened between them, averaged, with the report's own formulas.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, TypeVar

from pg_aio_exporter.collectors.activity import WaitKey
from pg_aio_exporter.collectors.intervals import (
    NO_WAL,
    ReadCounters,
    WalCounters,
    WriteCounters,
    counter_values,
    read_figures,
    wal_figures,
    write_figures,
)
from pg_aio_exporter.vocabulary import IO_WORKER

MAX_POINTS = 120  # per series: a chart's width in points, and the JSON stays small
TOP_WAITS = 8  # wait events charted by name; the rest are summed as "other"
OTHER: WaitKey = ("other", "other", "other")


def spacing(duration: float) -> float:
    """How far apart kept totals are for a window of `duration` seconds: at most MAX_POINTS
    differences between them (kept totals are at least this far apart, but for the last)."""
    return duration / (MAX_POINTS - 1)


C = TypeVar("C", ReadCounters, WriteCounters, WalCounters)


def _minus(after: C, before: C) -> C:
    return type(after)(
        *(a - b for a, b in zip(counter_values(after), counter_values(before), strict=True))
    )


@dataclass(frozen=True)
class PollTotal:
    at: float  # seconds since the window started
    seconds: float  # counted seconds so far (intervals across a reset or restart do not count)
    timed: bool
    reads: ReadCounters
    writes: WriteCounters
    # The WAL's running totals as of this poll (pg_stat_wal, or 18's wal rows: read right
    # after pg_stat_io in a round) and the seconds they cover, timed when
    # track_wal_io_timing was on at every poll so far.
    wal: WalCounters = NO_WAL
    wal_seconds: float = 0.0
    wal_timed: bool = False


@dataclass(frozen=True)
class SampleTotal:
    at: float
    samples: int
    waits: Mapping[WaitKey, int]
    io_worker_busy: int
    io_worker_slots: int
    in_flight: Mapping[str, int]  # pg_aios handles summed over samples, by operation


class SeriesRecorder:
    """Running totals, kept at most every `every` seconds (and always the last one)."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.polls: list[PollTotal] = []
        self.samples: list[SampleTotal] = []

    def _keep(self, points: list[Any], point: Any) -> None:
        # The last point is always replaced by the newest, so the window's end is kept; the
        # one before it stays when it is at least `every` older than the newest.
        if len(points) >= 2 and point.at - points[-2].at < self.every:
            points[-1] = point
        else:
            points.append(point)

    def poll(self, point: PollTotal) -> None:
        self._keep(self.polls, point)

    def wal(self, counters: WalCounters, seconds: float, timed: bool) -> None:
        """The WAL's totals, read in the same round as the last poll's pg_stat_io."""
        if self.polls:
            self.polls[-1] = replace(
                self.polls[-1], wal=counters, wal_seconds=seconds, wal_timed=timed
            )

    def sample(self, at: float, samples: int, totals: Mapping[str, Any]) -> None:
        by_operation: Counter[str] = Counter()
        for (_, operation), count in totals.get("in_flight", {}).items():
            by_operation[operation] += count
        point = SampleTotal(
            at,
            samples,
            dict(totals.get("wait_samples", {})),
            int(totals.get("io_worker_busy", 0)),
            int(totals.get("io_worker_slots", 0)),
            dict(by_operation),
        )
        self._keep(self.samples, point)


P = TypeVar("P", PollTotal, SampleTotal)


def even(points: list[P]) -> list[P]:
    """The kept totals without those that would make an interval shorter than half the usual
    one (the window's first poll right after its start, its last right after a regular one):
    such an interval is merged into its neighbour, as a handful of reads in 0.1 s would chart
    noise. The window's first and last totals stay."""
    if len(points) < 3:
        return points
    gaps = sorted(b.at - a.at for a, b in pairwise(points))
    half = gaps[len(gaps) // 2] / 2
    kept = [points[0]]
    for point in points[1:-1]:
        if point.at - kept[-1].at >= half:
            kept.append(point)
    last = points[-1]
    if last.at - kept[-1].at < half and len(kept) > 1:
        kept[-1] = last
    else:
        kept.append(last)
    return kept


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else float(f"{value:.{digits}g}")


def polls_json(points: list[PollTotal], io_combine_limit: float | None) -> dict[str, Any]:
    """Per kept poll: read and write throughput, wait per byte and per read, and read size;
    WAL syncs and the time per sync (the intervals the latency findings judge, as the rules
    judge scrape intervals: report/findings/intervals.py)."""
    out: dict[str, list[float | None]] = {
        name: []
        for name in (
            "at_seconds",
            "read_bytes_per_second",
            "read_seconds_per_byte",
            "read_size_bytes",
            "read_ops_per_second",
            "read_latency_seconds",
            "write_bytes_per_second",
            "write_seconds_per_byte",
            "wal_syncs_per_second",
            "wal_seconds_per_sync",
        )
    }
    for before, after in pairwise(even(points)):
        seconds = after.seconds - before.seconds
        if seconds <= 0:
            continue
        reads = _minus(after.reads, before.reads)
        wrote = _minus(after.writes, before.writes)
        figures = read_figures(reads, after.timed, block_size=None)  # no hit ratio charted
        write = write_figures(wrote, after.timed).get("write")
        out["at_seconds"].append(_round(after.at, 4))
        out["read_bytes_per_second"].append(_round(reads.read_bytes / seconds))
        out["read_seconds_per_byte"].append(_round(figures.seconds_per_byte if figures else None))
        out["read_size_bytes"].append(_round(figures.size_bytes if figures else None))
        out["read_ops_per_second"].append(_round(reads.reads / seconds))
        out["read_latency_seconds"].append(_round(figures.latency_seconds if figures else None))
        out["write_bytes_per_second"].append(_round(wrote.write_bytes / seconds))
        out["write_seconds_per_byte"].append(_round(write.seconds_per_byte if write else None))
        wal_seconds = after.wal_seconds - before.wal_seconds
        wal = _minus(after.wal, before.wal)
        synced = wal_figures(wal, after.wal_timed) if wal_seconds > 0 else None
        out["wal_syncs_per_second"].append(_round(wal.syncs / wal_seconds) if wal_seconds else None)
        out["wal_seconds_per_sync"].append(_round(synced.sync_latency_seconds if synced else None))
    return {"io_combine_limit_bytes": io_combine_limit, **out}


def samples_json(points: list[SampleTotal]) -> dict[str, Any]:
    """Per kept sample point: average sessions by wait event (the TOP_WAITS of the window by
    name, io workers aside as in active sessions), io worker busy share, in-flight handles."""
    last = points[-1] if points else None
    ranked = sorted(
        ((k, n) for k, n in (last.waits if last else {}).items() if k[0] != IO_WORKER and n > 0),
        key=lambda item: (-item[1], item[0]),
    )
    named = [k for k, _ in ranked[:TOP_WAITS]]
    operations = sorted(last.in_flight) if last else []
    at: list[float | None] = []
    busy: list[float | None] = []
    waits: dict[WaitKey, list[float | None]] = {k: [] for k in [*named, OTHER]}
    in_flight: dict[str, list[float | None]] = {op: [] for op in operations}
    for before, after in pairwise(even(points)):
        samples = after.samples - before.samples
        if samples <= 0:
            continue
        at.append(_round(after.at, 4))
        slots = after.io_worker_slots - before.io_worker_slots
        busy.append(
            _round((after.io_worker_busy - before.io_worker_busy) / slots) if slots else None
        )
        other = 0.0
        for key, count in after.waits.items():
            if key[0] == IO_WORKER:
                continue
            sessions = (count - before.waits.get(key, 0)) / samples
            if key in waits and key != OTHER:
                waits[key].append(_round(sessions))
            else:
                other += sessions
        for key in named:
            if len(waits[key]) < len(at):
                waits[key].append(0.0)
        waits[OTHER].append(_round(other))
        for op, values in in_flight.items():
            values.append(
                _round((after.in_flight.get(op, 0) - before.in_flight.get(op, 0)) / samples)
            )
    return {
        "at_seconds": at,
        "wait_events": [
            {
                "backend_type": k[0],
                "wait_event_type": k[1],
                "wait_event": k[2],
                "sessions": values,
            }
            for k, values in waits.items()
        ],
        "io_worker_busy_share": busy,
        "in_flight": [{"operation": op, "average": v} for op, v in in_flight.items()],
    }


def to_json(recorder: SeriesRecorder, io_combine_limit: float | None) -> dict[str, Any]:
    return {
        "points_at_most": MAX_POINTS,
        "polls": polls_json(recorder.polls, io_combine_limit),
        "samples": samples_json(recorder.samples),
    }

"""The report's series (report/series.py): bounded however long the window, and each point the
report's own formula over what happened since the point before."""

from __future__ import annotations

import itertools
import math

import pytest

from pg_aio_exporter.collectors.intervals import NO_WRITES, ReadCounters, WriteCounters
from pg_aio_exporter.report import series
from pg_aio_exporter.report.runner import in_spans, span_sums
from pg_aio_exporter.report.series import MAX_POINTS, PollTotal, SeriesRecorder

pytestmark = pytest.mark.unit

MIB = 1024 * 1024
READ = ("client backend", "IO", "DataFileRead")
CPU = ("client backend", "CPU", "CPU")
WORKER = ("io worker", "IO", "DataFileRead")


def sampled_for(seconds: int, every: float) -> SeriesRecorder:
    """One sample a second: 2 sessions reading, 1 on CPU, an io worker busy 1 sample in 3,
    4 readv handles in flight."""
    rec = SeriesRecorder(every)
    for k in range(1, seconds + 1):
        rec.sample(
            float(k),
            k,
            {
                "wait_samples": {READ: 2 * k, CPU: k, WORKER: k},
                "io_worker_busy": k,
                "io_worker_slots": 3 * k,
                "in_flight": {("SUBMITTED", "readv"): 3 * k, ("COMPLETED_IO", "readv"): k},
            },
        )
    return rec


@pytest.mark.parametrize("seconds", [10, 120, 86_400])
def test_samples_are_bounded_and_exact(seconds: int) -> None:
    rec = sampled_for(seconds, series.spacing(seconds))
    assert len(rec.samples) <= MAX_POINTS + 1
    out = series.samples_json(rec.samples)
    assert 1 <= len(out["at_seconds"]) <= MAX_POINTS
    assert out["at_seconds"][-1] == seconds  # the window's end is kept
    waits = {(w["wait_event_type"], w["wait_event"]): w["sessions"] for w in out["wait_events"]}
    # io workers are not active sessions (they work for the others), as in the report.
    assert set(waits) == {("IO", "DataFileRead"), ("CPU", "CPU"), ("other", "other")}
    assert set(waits["IO", "DataFileRead"]) == {2.0}
    assert set(waits["CPU", "CPU"]) == {1.0}
    assert set(waits["other", "other"]) == {0.0}
    assert out["io_worker_busy_share"] == pytest.approx([1 / 3] * len(out["at_seconds"]))
    assert out["in_flight"] == [{"operation": "readv", "average": [4.0] * len(out["at_seconds"])}]


def test_only_the_top_wait_events_are_named() -> None:
    rec = SeriesRecorder(0.0)
    events = [("client backend", "LWLock", f"Lock{i}") for i in range(series.TOP_WAITS + 3)]
    for k in range(3):
        waits = {e: k * (i + 1) for i, e in enumerate(events)}
        rec.sample(float(k), k, {"wait_samples": waits})
    out = series.samples_json(rec.samples)
    names = [w["wait_event"] for w in out["wait_events"]]
    assert len(names) == series.TOP_WAITS + 1 and names[-1] == "other"
    assert names[0] == f"Lock{len(events) - 1}"  # most samples first
    assert out["wait_events"][-1]["sessions"] == [1.0 + 2.0 + 3.0] * 2  # the 3 least


def rounded(values: list[float]) -> object:
    """Series values keep 6 significant digits (the JSON stays small)."""
    return pytest.approx(values, rel=1e-5)


def poll(at: float, seconds: float, mib: float, wait_ms: float, written: float) -> PollTotal:
    reads = ReadCounters(mib * 16, mib * MIB, wait_ms, 0.0)
    writes = WriteCounters(writes=written / 8192, write_bytes=written, write_time_ms=written / MIB)
    return PollTotal(at, seconds, True, reads, writes)


def test_polls_give_throughput_wait_per_byte_and_read_size() -> None:
    # 1 MiB/s read at 2 ms per MiB in 16 reads per MiB; 0.5 MiB/s written; a reset at 40 s
    # costs its interval (the counted seconds do not move), not a point of nonsense.
    points = [poll(0, 0, 0, 0, 0)]
    for at in range(10, 70, 10):
        counted = at if at < 40 else at - 10
        points.append(poll(at, counted, counted, 2 * counted, counted * MIB / 2))
    out = series.polls_json(points, 131072.0)
    assert out["io_combine_limit_bytes"] == 131072.0
    assert out["at_seconds"] == [10, 20, 30, 50, 60]
    assert out["read_bytes_per_second"] == rounded([MIB] * 5)
    assert out["read_seconds_per_byte"] == rounded([0.002 / MIB] * 5)
    assert out["read_size_bytes"] == rounded([MIB / 16] * 5)
    assert out["write_bytes_per_second"] == rounded([MIB / 2] * 5)
    assert out["write_seconds_per_byte"] == rounded([1 / 1000 / MIB] * 5)


# Without reads, read_time stays 0; on PostgreSQL 19 it counts the wait for a read another
# backend issued while reads stay 0 (issue 45): no division by 0 either way.
@pytest.mark.parametrize("read_time_ms", [0, 40])
def test_no_reads_no_figures(read_time_ms: float) -> None:
    points = [PollTotal(0, 0, True, ReadCounters(0, 0, 0, 0), NO_WRITES)]
    points.append(PollTotal(10, 10, True, ReadCounters(0, 0, read_time_ms, 5), NO_WRITES))
    out = series.polls_json(points, None)
    assert out["read_bytes_per_second"] == [0.0]
    assert out["read_seconds_per_byte"] == [None] and out["read_size_bytes"] == [None]
    assert out["read_latency_seconds"] == [None]
    assert out["write_seconds_per_byte"] == [None]


def test_short_intervals_at_the_ends_are_merged() -> None:
    # The window's first poll 0.3 s after its start, its last 0.1 s after a regular one: two
    # intervals of a few reads each would chart noise; they are merged into their neighbours.
    ats = [0.0, 0.3, 10.3, 20.3, 30.3, 30.4]
    points = [poll(at, at, at, 2 * at, 0) for at in ats]
    points[-1] = poll(30.4, 30.4, 30.4 + 5, 2 * 30.4, 0)  # 5 MiB more in the last 0.1 s
    out = series.polls_json(points, None)
    assert out["at_seconds"] == [10.3, 20.3, 30.4]
    assert out["read_bytes_per_second"] == rounded([MIB, MIB, (10.1 + 5) * MIB / 10.1])


class Counted(float):
    """A span's start that counts the comparisons made with it."""

    made = 0

    def __lt__(self, other: object) -> bool:
        Counted.made += 1
        return float(self) < float(other)  # type: ignore[arg-type]


def test_samples_are_placed_in_the_polls_spans_in_n_log_n() -> None:
    """A 24 h window sampled every second, read every 15 s, with a stats reset's gap: each
    sample is found in its span (or the gap) as a scan of every span finds it, with at most
    log2(spans) + 2 comparisons a sample (the scan made spans x samples: minutes of CPU)."""
    reads = [15.0 * i for i in range(5761)]
    spans = [(Counted(a), u) for a, u in itertools.pairwise(reads) if not 3600 <= a < 3630]
    points = [(0.5 * i, i % 7) for i in range(2 * 86_400)]
    Counted.made = 0
    found = in_spans(points, spans)
    assert Counted.made <= len(points) * (math.log2(len(spans)) + 2)
    # The same as the scan, on every 97th sample (all of them would be the quadratic run).
    some = points[::97]
    assert in_spans(some, spans) == [n for t, n in some if any(a < t <= u for a, u in spans)]
    assert len(found) == len(points) - 1 - 2 * 30  # none at 0, none in the gap's 30 s


def test_round_trips_are_summed_per_span_in_one_pass() -> None:
    """A day's round trips (a sample a second, a poll every 10 s) summed per poll span, with
    a reset's gap: as a scan of every span finds them, in log2(spans) + 2 comparisons a round
    trip (a scan per span made spans x round trips: minutes of CPU)."""
    reads = [10.0 * i for i in range(8641)]
    spans = [(Counted(a), u) for a, u in itertools.pairwise(reads) if not 3600 <= a < 3630]
    trips = [(0.5 + i, 1.0 + i % 3) for i in range(86_400)]
    Counted.made = 0
    sums = span_sums(trips, spans)
    assert Counted.made <= len(trips) * (math.log2(len(spans)) + 2)
    for (a, u), total in list(zip(spans, sums, strict=True))[::97]:
        assert total == sum(n for t, n in trips if a < t <= u)
    assert sum(sums) == sum(n for t, n in trips if not 3600 < t <= 3630)

"""The report's pure parts on fixed inputs: window sums, findings (each shown firing and
staying quiet at its threshold), verdict, comparison, JSON schema, baseline files, exit codes
and the 100-column text. Expected values are worked out by hand in each test."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pg_aio_exporter import thresholds
from pg_aio_exporter.collectors.activity import WaitKey
from pg_aio_exporter.collectors.intervals import LabelKey, ReadCounters, ReadWindow, Snapshot
from pg_aio_exporter.collectors.pg_wait_events import server_events
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.report import document, reload, text, units
from pg_aio_exporter.report.findings.context import Finding
from pg_aio_exporter.report.findings.registry import CHECKS, WRITE_CHECKS
from pg_aio_exporter.report.outcome import Report, exit_code, judge
from pg_aio_exporter.report.summary import Activity, ServerFacts, Summary
from pg_aio_exporter.thresholds import StorageClass, Thresholds

pytestmark = pytest.mark.unit

BULK = ("client backend", "relation", "bulkread")
NORMAL = ("client backend", "relation", "normal")
CLIENT_IO = ("client backend", "IO", "AioIoCompletion")
CLIENT_SYNC = ("client backend", "IO", "DataFileRead")
WORKER_IO = ("io worker", "IO", "DataFileRead")
QUEUE = ("client backend", "LWLock", "AioWorkerSubmissionQueue")
CLIENT_CPU = ("client backend", "CPU", "CPU")
KB = 1024
MS = 0.001

# The shipped numbers at the time of writing, spelled out so that each test's arithmetic can be
# followed here; tests/test_report_alerts_agree.py reads the real file.
T = Thresholds(
    min_read_ops_per_second=10,
    regression_factor=3,
    # PgAioReadLatencyHigh: 5 ms plus the read size at 125 MiB/s (8 kB: 5.0625 ms), a class of
    # this file's own between the shipped network-ssd and hdd.
    storage=StorageClass("slow-ssd", 0.005, 125 * KB * KB, 0.005),
    min_slow_read_share=0.16,
    io_wait_events=("DataFileRead", "AioIoCompletion"),
    min_read_wait_share=0.5,
    latency_factor=2,
    volume_limit_share=0.9,
    max_utilization=0.8,
    min_queued_ios=1,
    max_submission_queue_sessions=0.1,
    min_pool_share=0.9,
    severities={
        "PgAioReadLatencyRegression": "warning",
        "PgAioReadLatencyHigh": "warning",
        "PgAioStorageSaturated": "warning",
        "PgAioWorkerPoolSaturated": "warning",
        "PgAioTrackIoTimingOff": "warning",
        "PgAioPendingRestart": "info",
        "PgAioStatsReset": "info",
        "workload_regression": "warning",
        "reads_not_combined": "warning",
        "no_read_activity": "info",
        "reads_not_yet_counted": "info",
        "wait_per_read_rose_with_read_size": "info",
        "baseline_not_a_storage_signal": "info",
        "io_uring_available": "info",
    },
    max_uncombined_read_size_bytes=10 * KB,
    max_sync_read_sessions=0.1,
    min_uncounted_read_sessions=0.5,
    max_io_workers=32,
    workload_regression_factor=1.2,
    min_matched_statement_share=0.5,
)
SETTINGS_18 = {
    "io_workers": 3,
    "effective_io_concurrency": 16,
    "maintenance_io_concurrency": 16,
    "io_combine_limit_bytes": 128 * KB,
    "io_max_combine_limit_bytes": 128 * KB,
    "io_max_concurrency": 64,
    "shared_buffers_bytes": 128 * KB * KB,
    "track_io_timing": 1,
    "block_size_bytes": 8192,
}


def server(**changes: Any) -> ServerFacts:
    facts: dict[str, Any] = {
        "version": "18.6",
        "version_num": 180006,
        "settings": SETTINGS_18,
        "io_method": "worker",
        "io_methods": ("sync", "worker"),
    }
    facts.update(changes)
    return ServerFacts(**facts)


def activity(samples: int = 100, waits: dict[WaitKey, int] | None = None, **more: Any) -> Activity:
    """By default three io workers, idle in every sample."""
    facts: dict[str, Any] = {
        "io_workers": 3,
        "io_worker_slots": 3 * samples,
        "wait_events": server_events(180006, None),  # server()'s 18.6
    }
    facts.update(more)
    return Activity(samples, 1.0, waits or {}, **facts)


def reads(count: float, size: float, ms_each: float, hits: float = 0) -> ReadCounters:
    return ReadCounters(count, count * size, count * ms_each, hits)


def summary(
    rows: dict[LabelKey, ReadCounters] | None = None,
    seconds: float = 100.0,
    *,
    act: Activity | None = None,
    facts: ServerFacts | None = None,
    timed: bool = True,
    **more: Any,
) -> Summary:
    return Summary(
        target="db1",
        started_at=1_700_000_000.0,
        ended_at=1_700_000_000.0 + seconds,
        server=facts or server(),
        rows=rows if rows is not None else {},
        read_seconds=seconds,
        timed=timed,
        activity=act or activity(),
        **more,
    )


def found(
    s: Summary, baseline: Summary | None = None, *, t: Thresholds | None = None
) -> dict[str, Finding]:
    return {f.id: f for f in judge(s, t or T, baseline).findings}


# 100 s of healthy sequential reads: 2000 reads/s of 24 kB at 0.1 ms.
HEALTHY = {BULK: reads(200_000, 24 * KB, 0.1, hits=50_000)}


# --- window sums -------------------------------------------------------------------------------


def snap(
    rows: dict[LabelKey, ReadCounters], reset: float = 1.0, start: float = 5.0, timing: bool = True
) -> Snapshot:
    return Snapshot(rows, reset, start, timing, 8192)


def test_window_sums_intervals_and_skips_resets_and_restarts() -> None:
    window = ReadWindow()
    window.observe(snap({BULK: ReadCounters(100, 800_000, 10, 5)}), at=0)
    window.observe(snap({BULK: ReadCounters(150, 1_200_000, 16, 9)}), at=10)
    # A reset: its interval counts nothing, the next one counts again.
    window.observe(snap({BULK: ReadCounters(20, 160_000, 2, 1)}, reset=2.0), at=20)
    window.observe(snap({BULK: ReadCounters(50, 400_000, 5, 3)}, reset=2.0), at=30)
    # A restart (new postmaster start): the same.
    window.observe(snap({BULK: ReadCounters(1, 8192, 1, 0)}, reset=2.0, start=6.0), at=40)
    assert window.rows[BULK] == ReadCounters(50 + 30, 400_000 + 240_000, 6 + 3, 4 + 2)
    assert window.seconds == 20
    assert window.resets == [2.0]
    assert window.restarts == 1
    assert window.timed


def test_window_drops_a_row_that_went_backwards_and_remembers_timing_off() -> None:
    window = ReadWindow()
    window.observe(
        snap({BULK: ReadCounters(100, 800_000, 10, 5), NORMAL: ReadCounters(10, 1, 1, 1)}), 0
    )
    window.observe(
        snap(
            {BULK: ReadCounters(90, 700_000, 10, 5), NORMAL: ReadCounters(12, 3, 2, 4)},
            timing=False,
        ),
        5,
    )
    window.observe(
        snap({BULK: ReadCounters(95, 740_000, 11, 5), NORMAL: ReadCounters(12, 3, 2, 4)}), 10
    )
    assert window.rows[BULK] == ReadCounters(5, 40_000, 1, 0)
    assert window.rows[NORMAL] == ReadCounters(2, 2, 1, 3)
    assert not window.timed
    assert window.total() == ReadCounters(7, 40_002, 2, 3)


# --- figures -----------------------------------------------------------------------------------


def test_read_figures_over_the_window() -> None:
    s = summary(HEALTHY)
    total = s.total
    assert total.reads_per_second == 2000
    assert total.bytes_per_second == 2000 * 24 * KB
    figures = total.figures
    assert figures is not None
    assert figures.size_bytes == 24 * KB
    assert figures.latency_seconds == pytest.approx(0.1 * MS)
    assert figures.seconds_per_byte == pytest.approx(0.1 * MS / (24 * KB))
    # By blocks: 200,000 reads of 24 kB are 600,000 blocks of 8 kB beside 50,000 hits.
    assert figures.hit_ratio == pytest.approx(50_000 / 650_000)
    assert total.wait_sessions == pytest.approx(200_000 * 0.1 * MS / 100)


def test_read_time_without_reads_never_divides_by_zero() -> None:
    """PostgreSQL 19 counts in read_time the wait for a read another backend issued, while the
    waiting row's reads stay 0 (issue 45): that row has no per-read figure, its wait counts
    in the sessions waiting, and judging, comparing and writing it raise nothing."""
    waited = ReadCounters(0, 0, 500, 100)  # 0.5 s of waiting, no read of its own
    rows = {NORMAL: waited, **HEALTHY}
    s = summary(rows)
    alone = s.reads(NORMAL)
    assert alone.figures is None
    assert alone.named()["seconds_per_read"] is None and alone.named()["seconds_per_byte"] is None
    assert alone.wait_sessions == pytest.approx(0.5 / 100)
    # The whole server: both rows' wait over the reads counted (20 s + 0.5 s over 200,000).
    figures = s.total.figures
    assert figures is not None
    assert figures.latency_seconds == pytest.approx(20.5 / 200_000)
    # The waiting row alone on both sides, and against a window where it read.
    for now, before in ((summary({NORMAL: waited}), summary({NORMAL: waited})), (s, summary())):
        report = judge(now, T, before)
        json.loads(document.dumps(report, T))
        text.render(report, T)


def test_activity_figures() -> None:
    a = activity(
        200,
        {
            CLIENT_IO: 300,
            CLIENT_SYNC: 100,
            WORKER_IO: 150,
            QUEUE: 40,
            ("client backend", "CPU", "CPU"): 60,
        },
        io_workers=2,
        io_worker_slots=400,
        io_worker_busy=300,
        in_flight={("SUBMITTED", "readv"): 800, ("COMPLETED_SHARED", "readv"): 200},
        in_flight_max={"readv": 12},
    )
    # io workers are left out of the sessions that wait: they do the reads for the others.
    assert a.read_wait_sessions(T.io_wait_events) == pytest.approx((300 + 100) / 200)
    assert a.active_sessions() == pytest.approx((300 + 100 + 40 + 60) / 200)
    assert a.read_wait_share(T.io_wait_events) == pytest.approx(400 / 500)
    assert a.submission_queue_sessions == pytest.approx(0.2)
    assert a.sync_read_sessions == pytest.approx(0.5)
    assert a.io_worker_utilization == 0.75
    assert a.busy_io_workers == 1.5
    assert a.in_flight_average("readv") == 5
    assert a.submitted_average == 4
    assert [k for k, _ in a.top(2)] == [CLIENT_IO, WORKER_IO]


# --- findings ----------------------------------------------------------------------------------


def test_healthy_window_has_no_warning_and_says_not_storage_bound() -> None:
    report = judge(summary(HEALTHY, act=activity(waits={CLIENT_IO: 20})), T)
    assert [f.id for f in report.findings] == []
    assert report.verdict.storage.startswith("Reads are not storage-bound")
    assert "0.20 sessions" in report.verdict.storage
    assert "big enough" in report.verdict.io_workers


@pytest.mark.parametrize(
    ("timed", "setting", "fires"), [(True, 1, False), (False, 1, True), (True, 0, True)]
)
def test_track_io_timing_off(timed: bool, setting: int, fires: bool) -> None:
    facts = server(settings={**SETTINGS_18, "track_io_timing": setting})
    report = judge(summary(HEALTHY, facts=facts, timed=timed), T)
    ids = {f.id: f for f in report.findings}
    assert ("track_io_timing_off" in ids) is fires
    if not timed:
        # No latency is invented: the figures and the verdict say none was measured.
        assert report.summary.total.figures is not None
        assert report.summary.total.figures.seconds_per_byte is None
        assert "not measured" in report.verdict.reads
        assert "storage_saturated" not in ids and "read_latency_high" not in ids


@pytest.mark.parametrize(("reads_per_second", "fires"), [(0, True), (9.9, True), (10, False)])
def test_no_read_activity_below_the_alerts_traffic_guard(
    reads_per_second: float, fires: bool
) -> None:
    s = summary({BULK: reads(reads_per_second * 100, 8 * KB, 5)})
    ids = found(s)
    assert ("no_read_activity" in ids) is fires
    if fires:
        assert ids["no_read_activity"].evidence["reads_per_second"] == pytest.approx(
            reads_per_second
        )
        assert set(ids) == {"no_read_activity"}


def test_reads_not_yet_counted_instead_of_no_read_activity() -> None:
    # One session waited on reads in every sample, but pg_stat_io counted none: a long scan.
    s = summary({}, act=activity(waits={CLIENT_IO: 100}))
    ids = found(s)
    assert "reads_not_yet_counted" in ids
    assert "no_read_activity" not in ids
    assert ids["reads_not_yet_counted"].evidence["read_wait_sessions"] == 1.0
    # Half a session is the threshold; below it, too little to say.
    assert "reads_not_yet_counted" not in found(summary({}, act=activity(waits={CLIENT_IO: 49})))


def test_counted_reads_are_not_flagged_whatever_their_read_time() -> None:
    # 1000 reads/s at 1 ms: 1.0 session waiting in counted reads; 1.2 sampled.
    rows = {BULK: reads(100_000, 24 * KB, 1.0)}
    assert "reads_not_yet_counted" not in found(summary(rows, act=activity(waits={CLIENT_IO: 120})))
    # 0.1 counted against 1.2 sampled: what io_method=worker shows for reads all counted (a
    # session's wait for its io workers is several times pg_stat_io's read time).
    rows = {BULK: reads(100_000, 24 * KB, 0.1)}
    assert "reads_not_yet_counted" not in found(summary(rows, act=activity(waits={CLIENT_IO: 120})))
    # The same waits with reads below the guard (10/s): the reads are still running.
    rows = {BULK: reads(900, 24 * KB, 0.1)}
    assert "reads_not_yet_counted" in found(summary(rows, act=activity(waits={CLIENT_IO: 120})))


SLOW = {BULK: reads(2_000, 8 * KB, 25)}  # 20 reads/s at 25 ms: above the alert's 5.0625 ms


@pytest.mark.parametrize(
    ("rows", "waiting", "on_cpu", "fires"),
    [
        (SLOW, 250, 0, True),
        (SLOW, 100, 0, True),  # one session, all its active time waiting on slow reads
        (SLOW, 250, 250, False),  # half the active time: the alert wants more than half
        (SLOW, 250, 240, True),
        ({BULK: reads(2_000, 8 * KB, 5)}, 250, 0, False),  # 5 ms: below 5.0625 ms
        ({BULK: reads(900, 8 * KB, 25)}, 250, 0, False),  # 9 reads/s: below the traffic guard
    ],
)
def test_storage_saturated_without_baseline(
    rows: dict[LabelKey, ReadCounters], waiting: int, on_cpu: int, fires: bool
) -> None:
    waits = {CLIENT_IO: waiting, WORKER_IO: 300, CLIENT_CPU: on_cpu}
    ids = found(summary(rows, act=activity(waits=waits)))
    assert ("storage_saturated" in ids) is fires
    if fires:
        evidence = ids["storage_saturated"].evidence
        # The io workers' 3.0 sessions are left out of the active time too.
        assert evidence["read_wait_share"] == pytest.approx(waiting / (waiting + on_cpu))
        assert evidence["seconds_per_read"] == pytest.approx(0.025)
        assert evidence["seconds_per_byte"] == pytest.approx(0.025 / (8 * KB))
        assert evidence["reads_per_second"] == 20
        assert (
            "Storage is saturated (reads are storage-bound)"
            in judge(summary(rows, act=activity(waits=waits)), T).verdict.storage
        )


def test_storage_bound_by_share_of_active_time_not_by_head_count() -> None:
    """Issue 30: two sessions, 99% of their active time on 4 ms reads of 20 kB, are
    storage-bound (1.98 sessions: the old head count of more than 2 missed it), slow for the
    default class (network-ssd) and usual for hdd; half the time on 0.01 ms page-cache reads is
    not storage-bound, whatever the class."""
    classes = thresholds.load().storage_classes
    assert classes is not None
    network = replace(T, storage=classes["network-ssd"], storage_classes=classes)
    slow = {BULK: reads(15_000, 20 * KB, 4.08)}
    waits = {CLIENT_IO: 198, CLIENT_CPU: 2}
    report = judge(summary(slow, act=activity(waits=waits)), network)
    ids = {f.id: f for f in report.findings}
    assert "storage_saturated" in ids
    assert ids["storage_saturated"].evidence["read_wait_share"] == pytest.approx(0.99)
    assert "4.08 ms per 20 kB read: slow for network-ssd" in report.verdict.storage
    assert "usual for hdd" in report.verdict.storage
    hdd = replace(network, storage=classes["hdd"])
    assert "storage_saturated" not in found(summary(slow, act=activity(waits=waits)), t=hdd)
    cached = {BULK: reads(1_000_000, 8 * KB, 0.01)}
    half = {CLIENT_IO: 100, CLIENT_CPU: 100}
    for storage in classes.values():
        fast = replace(network, storage=storage)
        report = judge(summary(cached, act=activity(waits=half)), fast)
        assert "storage_saturated" not in {f.id for f in report.findings}
        assert report.verdict.storage.startswith("Reads are not storage-bound")


def test_storage_saturated_at_the_volume_limit() -> None:
    # 3,000 reads/s at 1 ms each on a volume of 3,000 IOPS: fast per read, but at the limit.
    capped = {BULK: reads(300_000, 8 * KB, 1)}
    waits = {CLIENT_IO: 300, CLIENT_CPU: 10}
    assert "storage_saturated" not in found(summary(capped, act=activity(waits=waits)))
    at_limit = replace(T, volume_max_ops=3000.0)
    ids = found(summary(capped, act=activity(waits=waits)), t=at_limit)
    assert "reads run at the volume's limit" in ids["storage_saturated"].summary
    roomy = replace(T, volume_max_ops=4000.0)
    assert "storage_saturated" not in found(summary(capped, act=activity(waits=waits)), t=roomy)


@pytest.mark.parametrize(("before_ms", "fires"), [(10, True), (12.5, False)])
def test_storage_saturated_against_a_baseline(before_ms: float, fires: bool) -> None:
    # 25 ms per 8 kB read now; 2x the baseline's per byte is the alert's latency_factor. The
    # class allows 30 ms per read: only the baseline can make these reads slow.
    disk = replace(T, storage=StorageClass("disk", 0.030, 100 * KB * KB, 0.03))
    baseline = summary({BULK: reads(2_000, 8 * KB, before_ms)})
    ids = found(summary(SLOW, act=activity(waits={CLIENT_IO: 300})), baseline, t=disk)
    assert ("storage_saturated" in ids) is fires
    if fires:
        assert ids["storage_saturated"].evidence["baseline_seconds_per_byte"] == pytest.approx(
            0.010 / (8 * KB)
        )


@pytest.mark.parametrize(
    ("then", "signal"),
    [
        (server(version="18.4", version_num=180004), True),  # a minor update: the same regime
        (server(version="17.10", version_num=170010, io_method=None), False),
        (server(io_method="sync"), False),
    ],
)
def test_a_baseline_of_another_regime_is_no_storage_signal(then: ServerFacts, signal: bool) -> None:
    """The same windows as above (5x the baseline's wait per byte, within the class's limit):
    a baseline from another major version or io_method is left out, as the rules' regime label
    leaves it out (issue 49), and the report says so instead."""
    disk = replace(T, storage=StorageClass("disk", 0.030, 100 * KB * KB, 0.03))
    baseline = summary({BULK: reads(2_000, 8 * KB, 5)}, facts=then)
    ids = found(summary(SLOW, act=activity(waits={CLIENT_IO: 300})), baseline, t=disk)
    assert ("storage_saturated" in ids) is signal
    assert ("baseline_not_a_storage_signal" in ids) is not signal
    if not signal:
        left_out = ids["baseline_not_a_storage_signal"]
        assert left_out.severity == "info"
        assert left_out.evidence["baseline_version"] == then.version
        assert left_out.evidence["baseline_io_method"] == then.io_method
        assert left_out.evidence["left_out"] == ["reads wait 5.00x the baseline's per MiB"]
        assert f"the baseline ran PostgreSQL {then.version}" in left_out.summary


def test_storage_busy_but_fast_is_not_saturated() -> None:
    # 30,000 reads/s at 0.1 ms: 3 sessions always waiting, as the samples saw.
    busy = {BULK: reads(3_000_000, 24 * KB, 0.1)}
    ids_report = judge(summary(busy, act=activity(waits={CLIENT_IO: 300})), T)
    assert "storage_saturated" not in {f.id for f in ids_report.findings}
    assert "not storage-bound" in ids_report.verdict.storage


def test_wal_rows_are_no_read_figures() -> None:
    """PostgreSQL 18's pg_stat_io `wal` rows (a walsender reading WAL, timed by
    track_wal_io_timing) stay out of the server's reads, as out of the rules' per-target
    figures (object!="wal"): 2,000 relation reads at 1 ms beside 20,000 WAL reads at 10 ms are
    1 ms reads, not 9.2 ms ones."""
    wal = ("walsender", "wal", "normal")
    s = summary({BULK: reads(2_000, 8 * KB, 1.0), wal: reads(20_000, 8 * KB, 10.0)})
    assert s.total.counters.reads == 2_000
    assert s.total.counters.read_time_ms == pytest.approx(2_000)
    assert "read_latency_high" not in found(s)


@pytest.mark.parametrize(
    ("size", "ms_each", "fires"),
    [
        (8 * KB, 5.1, True),  # limit 5 ms + 8 kB at 125 MiB/s = 5.0625 ms
        (8 * KB, 5.0, False),
        (128 * KB, 6.1, True),  # limit 5 ms + 128 kB at 125 MiB/s = 6 ms
        (128 * KB, 5.9, False),
    ],
)
def test_read_latency_high_allows_for_the_read_size(
    size: float, ms_each: float, fires: bool
) -> None:
    ids = found(summary({BULK: reads(2_000, size, ms_each)}))
    assert ("read_latency_high" in ids) is fires
    if fires:
        limit = 0.005 + size / (125 * KB * KB)
        assert ids["read_latency_high"].evidence["max_seconds_per_read"] == pytest.approx(limit)


SUBMITTED = ("SUBMITTED", "readv")
QUEUED = {SUBMITTED: 400}  # pg_aios handles SUBMITTED, summed over 100 samples


@pytest.mark.parametrize(
    ("more", "signals"),
    [
        # 255 / 300 = 0.85 > 0.8, with 4 I/Os submitted per sample: 1.45 wait for a worker.
        ({"io_worker_busy": 255, "in_flight": QUEUED}, ["utilization"]),
        # As busy, with 0.45 waiting: one read stream (synchronized scans), which more
        # workers would not read faster.
        ({"io_worker_busy": 255, "in_flight": {SUBMITTED: 300}}, []),
        ({"io_worker_busy": 240, "in_flight": QUEUED}, []),  # 0.80 is not above 0.8
        ({"waits": {QUEUE: 11}}, ["submission_queue"]),  # 0.11 sessions > 0.1
        ({"waits": {QUEUE: 10}}, []),
        # Clients reading in place count only while I/Os queue for a busy pool: with idle
        # workers they are single-block reads (index lookups), which PostgreSQL 18 does anyway.
        ({"waits": {CLIENT_SYNC: 50}}, []),
        ({"waits": {CLIENT_SYNC: 50}, "io_worker_busy": 255}, []),
        (
            {"waits": {CLIENT_SYNC: 50}, "io_worker_busy": 255, "in_flight": QUEUED},
            ["utilization", "clients_reading_themselves"],
        ),
    ],
)
def test_io_worker_pool_saturated_signals(more: dict[str, Any], signals: list[str]) -> None:
    ids = found(summary(HEALTHY, act=activity(**more)))
    if not signals:
        assert "io_worker_pool_saturated" not in ids
        return
    assert ids["io_worker_pool_saturated"].evidence["signals"] == signals


def test_clients_reading_themselves_count_only_under_worker() -> None:
    act = activity(waits={CLIENT_SYNC: 50}, io_workers=0, io_worker_slots=0, io_worker_busy=0)
    assert "io_worker_pool_saturated" not in found(
        summary(HEALTHY, act=act, facts=server(io_method="sync"))
    )


@pytest.mark.parametrize(
    ("workers", "busy", "submitted", "waits", "suggested"),
    [
        # 1 worker busy 95 of 100 samples, 2 I/Os submitted per sample (1.05 waiting for it),
        # half a client reading itself: (2 + 0.5) / 0.8 = 3.1 -> 4.
        (1, 95, 200, {CLIENT_SYNC: 50}, 4),
        # 2 workers busy 180 of 200 slots (1.8 busy), 3.2 submitted, 0.6 in the submission
        # queue, 1.2 reading themselves: 5 / 0.8 = 6.25 -> 7.
        (2, 180, 320, {QUEUE: 60, CLIENT_SYNC: 120}, 7),
        # Never fewer than one more than today, never more than PostgreSQL allows.
        (4, 100, 0, {QUEUE: 20}, 5),
        (30, 3000, 4000, {CLIENT_SYNC: 1000}, 32),
    ],
)
def test_suggested_io_workers(
    workers: int, busy: int, submitted: int, waits: dict[WaitKey, int], suggested: int
) -> None:
    act = activity(
        100,
        waits,
        io_workers=workers,
        io_worker_slots=100 * workers,
        io_worker_busy=busy,
        in_flight={SUBMITTED: submitted},
    )
    finding = found(summary(HEALTHY, act=act))["io_worker_pool_saturated"]
    assert finding.evidence["suggested_io_workers"] == suggested
    assert f"io_workers = {suggested}" in finding.advice


def test_submitted_ios_measure_what_a_busy_pool_was_handed() -> None:
    # 1 worker busy in every sample, 8 I/Os submitted and not done on average (pg_aios):
    # 8 / 0.8 = 10 workers.
    act = activity(
        100,
        io_workers=1,
        io_worker_slots=100,
        io_worker_busy=100,
        in_flight={SUBMITTED: 800},
    )
    finding = found(summary(HEALTHY, act=act))["io_worker_pool_saturated"]
    assert finding.evidence["pool_demand_workers"] == 8
    assert finding.evidence["suggested_io_workers"] == 10
    assert "from 1 to 10" in finding.advice


def test_storage_and_pool_saturated_together_say_part_is_queueing() -> None:
    act = activity(
        100,
        {CLIENT_IO: 300},
        io_workers=1,
        io_worker_slots=100,
        io_worker_busy=100,
        in_flight={SUBMITTED: 300},
    )
    ids = found(summary({BULK: reads(3_000, 8 * KB, 100)}, act=act))
    assert "io_worker_pool_saturated" in ids
    assert "queueing for them" in ids["storage_saturated"].summary
    assert ids["storage_saturated"].advice.startswith("Raise io_workers first")


def test_io_uring_available() -> None:
    uring = ("sync", "worker", "io_uring")
    assert "io_uring_available" in found(summary(HEALTHY, facts=server(io_methods=uring)))
    running = server(io_methods=uring, io_method="io_uring")
    assert "io_uring_available" not in found(summary(HEALTHY, facts=running))
    assert "io_uring_available" not in found(summary(HEALTHY))


def test_pending_restart_and_stats_reset() -> None:
    ids = found(
        summary(HEALTHY, facts=server(pending_restart=("io_method",)), resets=(1_700_000_050.0,))
    )
    assert ids["pending_restart"].evidence == {"settings": ["io_method"]}
    assert ids["stats_reset_during_window"].evidence["resets"] == ["2023-11-14T22:14:10Z"]
    assert "pending_restart" not in found(summary(HEALTHY))


PG17 = ServerFacts("17.10", 170010, {"track_io_timing": 1}, None)


@pytest.mark.parametrize(("after_ms", "fires"), [(3.1, True), (3.0, False)])
def test_read_latency_regression_per_byte(after_ms: float, fires: bool) -> None:
    # The same 8 kB reads at 1 ms before: the alert's factor is 3, strictly above.
    baseline = summary({BULK: reads(2_000, 8 * KB, 1.0)}, facts=PG17)
    ids = found(summary({BULK: reads(2_000, 8 * KB, after_ms)}), baseline)
    assert ("read_latency_regression" in ids) is fires
    if fires:
        assert ids["read_latency_regression"].evidence["ratio"] == pytest.approx(3.1)


def test_larger_reads_explain_a_longer_wait_per_read() -> None:
    # 17: 8 kB at 0.5 ms. 18: 32 kB at 1.2 ms, 2.4x per read but 0.6x per byte.
    baseline = summary({BULK: reads(20_000, 8 * KB, 0.5)}, facts=PG17)
    report = judge(summary({BULK: reads(5_000, 32 * KB, 1.2)}), T, baseline)
    ids = {f.id: f for f in report.findings}
    assert "read_latency_regression" not in ids
    explained = ids["wait_per_read_rose_with_read_size"]
    assert explained.evidence["seconds_per_read_ratio"] == pytest.approx(2.4)
    assert explained.evidence["read_size_ratio"] == 4
    assert explained.evidence["seconds_per_byte_ratio"] == pytest.approx(0.6)
    assert "1.67x faster per MiB" in report.verdict.reads
    assert "Throughput 1.00x the baseline's" in report.verdict.reads
    assert report.comparison is not None
    whole = report.comparison[0]
    assert whole.key is None
    assert whole.changes["read_size_bytes"].before == 8 * KB
    assert whole.changes["read_size_bytes"].after == 32 * KB
    assert whole.changes["seconds_per_byte"].ratio == pytest.approx(0.6)
    assert whole.changes["bytes_per_second"].ratio == pytest.approx(1.0)


def test_regression_from_the_io_worker_hop_says_so() -> None:
    # 17 read 8 kB from the page cache in 7 us; 18 with idle io workers waits 0.5 ms for 19 kB.
    baseline = summary({BULK: reads(100_000, 8 * KB, 0.007)}, facts=PG17)
    now = summary({BULK: reads(20_000, 19 * KB, 0.5)})
    advice = found(now, baseline)["read_latency_regression"].advice
    assert "hand-off of each read to an io worker" in advice
    assert "io_method = 'sync'" in advice
    # Not when the baseline used io workers too: then storage or contention changed.
    worker_baseline = summary({BULK: reads(100_000, 8 * KB, 0.007)})
    assert "hand-off" not in found(now, worker_baseline)["read_latency_regression"].advice


def test_comparison_leaves_out_rows_below_the_traffic_guard() -> None:
    vacuum = ("autovacuum worker", "relation", "vacuum")
    before = summary({BULK: reads(2_000, 8 * KB, 1.0), vacuum: reads(50, 8 * KB, 1.0)}, facts=PG17)
    after = summary({BULK: reads(2_000, 24 * KB, 1.0), vacuum: reads(40, 8 * KB, 9.0)})
    report = judge(after, T, before)
    assert report.comparison is not None
    # 0.4-0.5 reads/s of vacuum: its 9x is noise, not a row.
    assert [row.key for row in report.comparison] == [None, BULK]


def test_regression_needs_waits_in_both_windows() -> None:
    baseline = summary({BULK: reads(2_000, 8 * KB, 1.0)}, facts=PG17, timed=False)
    ids = found(summary({BULK: reads(2_000, 8 * KB, 10)}), baseline)
    assert "read_latency_regression" not in ids
    assert "wait_per_read_rose_with_read_size" not in ids


@pytest.mark.parametrize(
    ("size", "settings", "fires", "why"),
    [
        (
            8 * KB,
            {"io_max_concurrency": 5, "shared_buffers_bytes": 16 * KB * KB},
            True,
            "io_max_concurrency is 5",
        ),
        (8 * KB, {"io_combine_limit_bytes": 8 * KB}, True, "io_combine_limit is 8 kB"),
        (24 * KB, {"io_max_concurrency": 11}, False, ""),
    ],
)
def test_reads_not_combined(size: float, settings: dict[str, float], fires: bool, why: str) -> None:
    facts = server(settings={**SETTINGS_18, **settings})
    ids = found(summary({BULK: reads(20_000, size, 0.1)}, facts=facts))
    assert ("reads_not_combined" in ids) is fires
    if fires:
        assert why in ids["reads_not_combined"].advice
        assert ids["reads_not_combined"].evidence["rows"][0]["read_size_bytes"] == 8 * KB


def test_reads_not_combined_only_on_18() -> None:
    facts = ServerFacts("17.10", 170010, {"track_io_timing": 1}, None)
    assert "reads_not_combined" not in found(
        summary({BULK: reads(20_000, 8 * KB, 0.1)}, facts=facts)
    )


def test_every_check_is_named_after_its_finding_and_the_schema_lists_them() -> None:
    schema = json.loads(document.SCHEMA_FILE.read_text())
    ids = schema["properties"]["findings"]["items"]["properties"]["id"]["enum"]
    # The write side's checks (report/findings/writes.py) are in the same list of ids.
    assert sorted(ids) == sorted(check.__name__ for check in (*CHECKS, *WRITE_CHECKS))
    assert {f.id for f in busy_report().findings} <= set(ids)


# --- outputs -----------------------------------------------------------------------------------


def busy_report() -> Report:
    """Everything at once: a baseline, slow reads, a saturated pool, something not visible."""
    act = activity(
        60,
        {CLIENT_IO: 180, CLIENT_SYNC: 30, WORKER_IO: 57, ("parallel worker", "CPU", "CPU"): 12},
        io_workers=1,
        io_worker_slots=60,
        io_worker_busy=57,
        in_flight={("SUBMITTED", "readv"): 540, ("COMPLETED_SHARED", "readv"): 60},
        in_flight_max={"readv": 18},
    )
    facts = server(
        io_methods=("sync", "worker", "io_uring"),
        pending_restart=("io_method", "shared_buffers"),
        settings={**SETTINGS_18, "io_workers": 1, "io_max_concurrency": 5},
    )
    rows = {
        BULK: reads(6_000, 8 * KB, 30, hits=100),
        NORMAL: reads(600, 8 * KB, 2, hits=50_000),
        ("autovacuum worker", "relation", "vacuum"): reads(1_200, 64 * KB, 4),
        ("checkpointer", "relation", "normal"): ReadCounters(0, 0, 0, 10),
    }
    now = summary(
        rows, 60, act=act, facts=facts, resets=(1_700_000_020.0,), not_visible=("pg_aios: x",)
    )
    baseline = summary({BULK: reads(18_000, 8 * KB, 2, hits=100)}, 60, facts=PG17)
    return judge(now, T, baseline)


def test_json_is_valid_against_the_documented_schema_and_reloads_exactly(tmp_path: Path) -> None:
    report = busy_report()
    doc = json.loads(document.dumps(report, T))
    jsonschema.validate(doc, json.loads(document.SCHEMA_FILE.read_text()))
    assert doc["schema"] == 3
    assert doc["reads"]["total"]["read_size_bytes"] == pytest.approx(
        ((6_000 + 600) * 8 * KB + 1_200 * 64 * KB) / 7_800
    )
    # The checkpointer row read nothing but had hits: kept, so the total reloads whole.
    path = tmp_path / "saved.json"
    path.write_text(document.dumps(report, T))
    assert reload.load_baseline(str(path)) == report.summary


def test_text_fits_100_columns_and_shows_every_part() -> None:
    out = text.render(busy_report(), T)
    assert max(len(line) for line in out.splitlines()) <= 100
    for part in ("VERDICT", "FINDINGS", "SERVER", "READS", "SAMPLED ACTIVITY", "COMPARISON"):
        assert part in out.upper()
    assert "storage_saturated" in out and "io_worker_pool_saturated" in out
    assert "pg_aios: x" in out


def write(tmp_path: Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


def saved(tmp_path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(document.dumps(busy_report(), T))
    return doc


def with_samples(doc: dict[str, Any], samples: Any) -> dict[str, Any]:
    doc["activity"]["samples"] = samples
    return doc


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: str(p / "missing.json"), "cannot read baseline .*: No such file"),
        (str, "cannot read baseline .*: Is a directory"),
        (lambda p: write(p, "b.json", b"\xff\xfe{"), "not UTF-8"),
        (
            lambda p: write(p, "b.json", '{"schema": 1, "kind": "pg-aio'),
            "corrupt: not valid JSON at line 1",
        ),
        (lambda p: write(p, "b.json", '{"groups": []}'), "is not a pg-aio-exporter report"),
        (lambda p: write(p, "b.json", "[1, 2]"), "is not a pg-aio-exporter report"),
        (
            lambda p: write(p, "b.json", json.dumps({**saved(p), "schema": 4})),
            "has report schema 4; this version reads schema 1, 2 and 3",
        ),
        (
            lambda p: write(
                p, "b.json", json.dumps({k: v for k, v in saved(p).items() if k != "window"})
            ),
            "corrupt: field 'window' missing",
        ),
        (
            lambda p: write(p, "b.json", json.dumps({**saved(p), "target": None})),
            "corrupt: a field has the wrong type",
        ),
        (
            lambda p: write(p, "b.json", json.dumps(with_samples(saved(p), "many"))),
            "corrupt: a field has the wrong type",
        ),
        (lambda p: write(p, "b.json", "[" * 100_000), "corrupt: not valid JSON"),
    ],
)
def test_bad_baseline_files(tmp_path: Path, make: Callable[[Path], str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        reload.load_baseline(make(tmp_path))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("severities", "fail_on", "code"),
    [
        ([], "warning", 0),
        (["info"], "warning", 0),
        (["info", "warning"], "warning", 1),
        (["warning"], "critical", 0),
        (["critical"], "critical", 1),
        (["critical"], "warning", 1),
        (["critical"], None, 0),
    ],
)
def test_exit_code(severities: list[str], fail_on: str | None, code: int) -> None:
    report = judge(summary(HEALTHY), T)
    fake = [Finding(f"f{i}", s, "x", {}, "y") for i, s in enumerate(severities)]
    assert exit_code(type(report)(report.summary, fake, report.verdict), fail_on) == code


def test_unit_helpers_print_plainly() -> None:
    assert units.size(8192) == "8 kB"
    assert units.size(24 * KB) == "24 kB"
    assert units.per_mib(0.001 / (128 * KB)) == "8 ms/MiB"
    assert units.ms(0.00012) == "0.12 ms"
    assert units.duration(120) == "2m 0s"
    assert math.isclose(float(units.rate(1234.4).replace(",", "")), 1234)
    assert os.sep not in units.timestamp(0)

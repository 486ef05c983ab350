"""The report's write side on fixed inputs (report/findings/writes.py): each write finding shown
firing and staying quiet at its threshold, the storage verdict naming writes (and putting slow
reads down to them), the window's write and WAL sums, the JSON block read back, and the
comparison. Expected values are worked out by hand in each test."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jsonschema
import pytest

from pg_aio_exporter.collectors.checkpointer import CheckpointerCounts
from pg_aio_exporter.collectors.intervals import (
    LabelKey,
    WalCounters,
    WalSnapshot,
    WalWindow,
    WriteCounters,
)
from pg_aio_exporter.collectors.pg_wait_events import server_events
from pg_aio_exporter.report import document, reload, text
from pg_aio_exporter.report.findings import writes
from pg_aio_exporter.report.findings.context import Finding
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.written import Checkpoints, Writes
from pg_aio_exporter.thresholds import WriteThresholds, load
from test_report_unit import KB, MS, activity, reads, server, summary
from test_report_unit import T as READ_T

pytestmark = pytest.mark.unit

# The shipped write thresholds at the time of writing, spelled out (tests/test_report_alerts_
# agree.py reads the real file for the read side; this one is checked against it below).
WT = WriteThresholds(
    max_seconds_per_sync=0.005,
    min_syncs_per_second=1,
    min_slow_sync_share=0.16,
    regression_factor=3,
    min_write_ops_per_second=10,
    min_seconds_per_write=0.0001,
    max_backend_share=0.5,
    min_backend_writes_per_second=10,
    write_wait_events=("DataFileWrite", "DataFileExtend"),
    wal_sync_events=("WalSync",),
    wal_wait_events=("WalWrite",),
    write_lock_events=("WALWrite",),
    min_write_wait_sessions=1,
    latency_factor=2,
)
T = replace(
    READ_T,
    writes=WT,
    severities={
        **READ_T.severities,
        "PgAioWalSyncLatencyHigh": "warning",
        "PgAioWriteLatencyRegression": "warning",
        "PgAioBackendsWritingBuffers": "warning",
        "PgAioStorageSaturatedByWrites": "warning",
        "PgAioTrackWalIoTimingOff": "warning",
    },
)
CHECKPOINTER = ("checkpointer", "relation", "normal")
CLIENT = ("client backend", "relation", "normal")
BULKWRITE = ("client backend", "relation", "bulkwrite")
WAL_SYNC = ("client backend", "IO", "WalSync")
WAL_QUEUE = ("client backend", "LWLock", "WALWrite")
READ_WAIT = ("client backend", "IO", "DataFileRead")


def written(ms_each: float = 0.1, count: float = 2000, size: float = 8 * KB) -> WriteCounters:
    return WriteCounters(writes=count, write_bytes=count * size, write_time_ms=count * ms_each)


def wal(syncs: float = 1000, ms_each: float = 1.0, **more: float) -> WalCounters:
    return WalCounters(syncs=syncs, sync_time_ms=syncs * ms_each, **more)


def window(
    rows: dict[LabelKey, WriteCounters] | None = None, w: WalCounters | None = None, **more: Any
) -> Writes:
    """100 s of writes; by default the checkpointer's 20 writes/s at 0.1 ms and 10 WAL syncs/s
    at 1 ms."""
    return Writes(
        rows=rows if rows is not None else {CHECKPOINTER: written()},
        seconds=100.0,
        timed=True,
        wal=w if w is not None else wal(),
        wal_seconds=100.0,
        wal_timed=True,
        **more,
    )


def judged(s: Summary, baseline: Summary | None = None) -> dict[str, Finding]:
    return {f.id: f for f in judge(s, T, baseline).findings}


def test_the_spelled_out_thresholds_are_the_shipped_ones() -> None:
    shipped = load().writes
    assert shipped is not None
    lists = ("write_wait_events", "wal_sync_events", "wal_wait_events")
    assert replace(shipped, **{k: getattr(WT, k) for k in lists}) == WT
    for k in lists:
        assert set(getattr(WT, k)) <= set(getattr(shipped, k)), k


def test_healthy_writes_find_nothing_and_the_verdict_names_no_write() -> None:
    s = summary(act=activity(waits={WAL_SYNC: 10}), writes=window())
    assert not {"wal_sync_latency_high", "storage_saturated_by_writes"} & set(judged(s))
    verdict = judge(s, T).verdict.storage
    assert "write" not in verdict.lower(), verdict


def test_wal_sync_latency_fires_above_5ms_and_needs_one_sync_a_second() -> None:
    slow = summary(writes=window(w=wal(ms_each=6.0)))
    finding = judged(slow)["wal_sync_latency_high"]
    assert finding.evidence["seconds_per_sync"] == pytest.approx(6 * MS)
    assert finding.evidence["syncs_per_second"] == pytest.approx(10)
    assert "max_wal_size" in finding.advice and "wal_compression" in finding.advice
    assert "wal_sync_latency_high" not in judged(summary(writes=window(w=wal(ms_each=5.0))))
    # 99 syncs in 100 s: below one a second, not judged
    assert "wal_sync_latency_high" not in judged(summary(writes=window(w=wal(99, 50.0))))
    # no timing (track_wal_io_timing off): no figure, no finding
    untimed = replace(window(w=wal(ms_each=50.0)), wal_timed=False)
    assert "wal_sync_latency_high" not in judged(summary(writes=untimed))


def test_wal_buffers_advice_only_when_wal_buffers_filled_up() -> None:
    plain = judged(summary(writes=window(w=wal(ms_each=9.0))))["wal_sync_latency_high"]
    assert "wal_buffers" not in plain.advice
    full = judged(summary(writes=window(w=wal(ms_each=9.0, buffers_full=40))))
    assert "raise wal_buffers" in full["wal_sync_latency_high"].advice


def test_storage_saturated_by_writes_names_writes_in_the_verdict() -> None:
    # One session syncing WAL, 2.5 queueing behind it, at 20 ms per sync.
    waits = {WAL_SYNC: 100, WAL_QUEUE: 250}
    s = summary(act=activity(waits=waits), writes=window(w=wal(ms_each=20.0)))
    found = judged(s)
    finding = found["storage_saturated_by_writes"]
    assert finding.evidence["write_wait_sessions"] == pytest.approx(3.5)
    assert "LWLock/WALWrite" in finding.summary
    verdict = judge(s, T).verdict.storage
    assert verdict.startswith("Storage is saturated by writes"), verdict
    # at 1 session waiting: not saturated, only slow syncs
    one = summary(act=activity(waits={WAL_SYNC: 100}), writes=window(w=wal(ms_each=20.0)))
    assert "storage_saturated_by_writes" not in judged(one)
    assert "Writes are slow" in judge(one, T).verdict.storage


def test_write_waits_count_by_the_servers_own_names() -> None:
    """PostgreSQL 14-16 name the WAL I/O waits IO/WALSync, IO/WALWrite; 17 renamed them
    IO/WalSync, IO/WalWrite. The shipped list (the rules' too) has both; the report counts a
    server's own (16 has no pg_wait_events: by its version): 1.5 sessions syncing WAL at 20 ms
    a sync are saturation on 16 as on 18, and the other version's name counts nothing."""
    limits = load().writes
    assert limits is not None
    shipped = replace(T, writes=limits)
    for version, version_num, own, other in (
        ("16.14", 160014, "WALSync", "WalSync"),
        ("18.6", 180006, "WalSync", "WALSync"),
    ):
        facts = server(version=version, version_num=version_num)
        for name, sessions in ((own, 1.5), (other, 0.0)):
            waits = {("client backend", "IO", name): 150}
            named = server_events(facts.version_num, None)
            act = activity(waits=waits, wait_events=named)
            s = summary(act=act, facts=facts, writes=window(w=wal(ms_each=20.0)))
            assert writes.write_wait_sessions(act, limits) == (
                {f"IO/{name}": 1.5} if sessions else {}
            ), (version, name)
            found = {f.id: f for f in judge(s, shipped).findings}
            assert ("storage_saturated_by_writes" in found) == bool(sessions), (version, name)


def test_slow_reads_during_a_write_burst_are_put_down_to_the_writes() -> None:
    # Reads at 8 ms each (above the 5.06 ms limit for 8 kB) while 3 sessions wait on writes.
    rows = {("client backend", "relation", "normal"): reads(2000, 8 * KB, 8.0)}
    waits = {WAL_SYNC: 100, WAL_QUEUE: 200, READ_WAIT: 50}
    s = summary(rows, act=activity(waits=waits), writes=window(w=wal(ms_each=20.0)))
    found = judged(s)
    assert {"read_latency_high", "storage_saturated_by_writes"} <= set(found)
    verdict = judge(s, T).verdict.storage
    assert "the writes are the cause" in verdict, verdict


def test_write_latency_regression_against_the_baseline_per_byte() -> None:
    before = summary(writes=window())
    after = summary(writes=window({CHECKPOINTER: written(ms_each=0.31)}))
    finding = judged(after, before)["write_latency_regression"]
    assert finding.evidence["ratio"] == pytest.approx(3.1)
    at_factor = summary(writes=window({CHECKPOINTER: written(ms_each=0.3)}))
    assert "write_latency_regression" not in judged(at_factor, before)
    # 999 writes in 100 s: below 10/s, not judged
    few = summary(writes=window({CHECKPOINTER: written(ms_each=1.0, count=999)}))
    assert "write_latency_regression" not in judged(few, before)


def test_writes_at_page_cache_speed_are_not_judged_whatever_their_ratio() -> None:
    # 10 us per write, then 40 us (4x per byte: client backends writing on contended CPUs, as
    # measured): no regression, and no write_latency signal with writes waited on either.
    before = summary(writes=window({CHECKPOINTER: written(ms_each=0.01)}))
    cached = window({CHECKPOINTER: written(ms_each=0.04)}, w=wal(ms_each=1.0))
    waits = {("client backend", "IO", "DataFileWrite"): 300}
    found = judged(summary(act=activity(waits=waits), writes=cached), before)
    assert not {"write_latency_regression", "storage_saturated_by_writes"} & set(found)
    # Just above the floor (0.1 ms, 4x): both judged.
    slow = window({CHECKPOINTER: written(ms_each=0.04 * 2.6)}, w=wal(ms_each=1.0))
    before = summary(writes=window({CHECKPOINTER: written(ms_each=0.026)}))
    found = judged(summary(act=activity(waits=waits), writes=slow), before)
    assert {"write_latency_regression", "storage_saturated_by_writes"} <= set(found)


def test_backends_writing_buffers_counts_shared_buffers_only() -> None:
    # Clients 3000 of 5000 buffer writes (60%), 30/s; their bulk load's ring writes do not count.
    rows = {CHECKPOINTER: written(), CLIENT: written(count=3000), BULKWRITE: written(count=9e5)}
    finding = judged(summary(writes=window(rows)))["backends_writing_buffers"]
    assert finding.evidence["backend_share"] == pytest.approx(0.6)
    assert "bgwriter_lru_maxpages" in finding.advice
    half = {CHECKPOINTER: written(), CLIENT: written(count=2000), BULKWRITE: written(count=9e5)}
    assert "backends_writing_buffers" not in judged(summary(writes=window(half)))
    # 60% but 9.99 writes/s: not judged
    few = {CHECKPOINTER: written(count=666), CLIENT: written(count=999)}
    assert "backends_writing_buffers" not in judged(summary(writes=window(few)))


def test_wal_window_sums_intervals_and_skips_resets() -> None:
    w = WalWindow()
    w.observe(WalSnapshot(wal(10, 1.0), 1.0, 5.0, True), at=0)
    w.observe(WalSnapshot(wal(30, 1.0), 1.0, 5.0, True), at=10)
    w.observe(WalSnapshot(wal(5, 1.0), 2.0, 5.0, True), at=20)  # reset: not counted
    w.observe(WalSnapshot(wal(15, 1.0), 2.0, 5.0, True), at=30)
    assert w.counters.syncs == 30 and w.seconds == 20
    assert w.timed


def test_json_block_validates_reloads_and_compares() -> None:
    rows = {CHECKPOINTER: written(), CLIENT: written(count=500)}
    before = summary(writes=window(rows, w=wal(records=100, fpi=20, wal_bytes=1e6)))
    after = summary(writes=window(rows, w=wal(ms_each=4.0, records=100, fpi=20, wal_bytes=2e6)))
    report = judge(after, T, before)
    doc = json.loads(document.dumps(report, T))
    jsonschema.validate(doc, json.loads(document.SCHEMA_FILE.read_text()))
    assert doc["writes"]["wal"]["seconds_per_sync"] == pytest.approx(4 * MS)
    assert doc["writes"]["backend_write_share"] == pytest.approx(0.2)
    change = doc["comparison"]["writes"]["wal_seconds_per_sync"]
    # Only time per byte has an interval (from the sub-windows kept for it).
    assert change == {
        "before": pytest.approx(MS),
        "after": pytest.approx(4 * MS),
        "ratio": 4.0,
        "interval": None,
    }
    assert doc["comparison"]["writes"]["wal_bytes_per_second"]["ratio"] == pytest.approx(2)
    reloaded = reload.from_json(doc)
    assert reloaded.writes == after.writes
    rendered = text.render(report, T)
    assert "time per WAL sync" in rendered and "writes, whole server" in rendered
    assert max(map(len, rendered.splitlines())) <= text.WIDTH


def test_a_report_without_writes_reloads_without_them() -> None:
    doc = json.loads(document.dumps(judge(summary(), T), T))
    assert doc["writes"] is None
    del doc["writes"]  # a report made before the write side


def test_wal_timing_off_is_said_once_and_judges_nothing() -> None:
    untimed = replace(window(w=wal(ms_each=50.0)), wal_timed=False)
    found = judged(summary(writes=untimed))
    assert found["track_wal_io_timing_off"].severity == "warning"
    assert not {"wal_sync_latency_high", "storage_saturated_by_writes"} & set(found)
    assert "track_wal_io_timing_off" not in judged(summary(writes=window()))


CPU = ("client backend", "CPU", "CPU")


def test_untimed_wal_judged_by_the_syncs_in_progress_the_samples_saw() -> None:
    """track_wal_io_timing off (PostgreSQL's default): the time per sync is the processes
    sampled in a WAL sync over the syncs per second (Little's law). Issue 30's TPC-B with every
    fsync 10 ms slower: 169 syncs/s and 1.6 sessions in IO/WalSync, 9.5 ms a sync (the shim
    measured 10.2 ms); healthy, 4,822 syncs/s and 0.3 sessions: 0.06 ms (0.2 ms)."""
    untimed = replace(window(w=wal(syncs=16_900, ms_each=0.0)), wal_timed=False)
    slow = activity(waits={WAL_SYNC: 160, WAL_QUEUE: 180, CPU: 40})
    found = judged(summary(act=slow, writes=untimed))
    finding = found["storage_saturated_by_writes"]
    assert finding.evidence["sampled_seconds_per_sync"] == pytest.approx(1.6 / 169)
    assert "9.47 ms each by the samples" in finding.summary
    assert found["track_wal_io_timing_off"].severity == "warning"
    assert "wal_sync_latency_high" not in found  # the WAL sync alert needs the timing
    healthy = replace(window(w=wal(syncs=482_200, ms_each=0.0)), wal_timed=False)
    busy = activity(waits={WAL_SYNC: 30, WAL_QUEUE: 100, CPU: 150})
    assert "storage_saturated_by_writes" not in judged(summary(act=busy, writes=healthy))
    # Where the WAL is timed its latency judges (1 ms a sync: healthy), not the samples.
    assert "storage_saturated_by_writes" not in judged(summary(act=slow, writes=window()))


def test_checkpoint_and_bgwriter_counts_in_the_advice() -> None:
    requested = Checkpoints(
        timed=1, requested=3, buffers_written=1e4, buffers_clean=0, maxwritten_clean=7
    )
    slow = replace(window(w=wal(ms_each=9.0)), checkpoints=requested)
    advice = judged(summary(writes=slow))["wal_sync_latency_high"].advice
    assert "3 of the window's 4 checkpoints were requested" in advice
    assert "max_wal_size" in advice
    rows = {CHECKPOINTER: written(), CLIENT: written(count=3000)}
    busy = replace(window(rows), checkpoints=requested)
    advice = judged(summary(writes=busy))["backends_writing_buffers"].advice
    assert advice.startswith("It stopped at bgwriter_lru_maxpages 7 times")
    plain = judged(summary(writes=window(w=wal(ms_each=9.0))))["wal_sync_latency_high"].advice
    assert "were requested" not in plain
    # the counts survive the JSON
    doc = json.loads(document.dumps(judge(summary(writes=busy), T), T))
    jsonschema.validate(doc, json.loads(document.SCHEMA_FILE.read_text()))
    assert reload.from_json(doc).writes == busy


def test_checkpoint_counts_across_a_restart_or_reset_are_none() -> None:
    first = CheckpointerCounts(
        timed=1, requested=1, buffers_written=10, buffers_clean=0, maxwritten_clean=0, start_time=5
    )
    later = replace(first, requested=4, buffers_written=50)
    assert Checkpoints.between(first, later) == Checkpoints(0, 3, 40, 0, 0)
    assert Checkpoints.between(first, replace(later, start_time=6.0)) is None
    assert Checkpoints.between(later, first) is None

"""The report judges latency as the rules do (issue 49): per poll interval, the share of the
intervals with traffic that were slow, beside the window's average. A window is built from
per-interval figures as the report's recorder keeps them (report/series.py), ten minutes of
polls 10 s apart, whose last eight minutes are an incident that collapses throughput: the
window's count-weighted average stays usual, the polls are mostly slow."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pg_aio_exporter.collectors.intervals import NO_WRITES, ReadCounters, WalCounters
from pg_aio_exporter.report import series
from pg_aio_exporter.report.findings.context import Finding
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.written import Writes
from pg_aio_exporter.thresholds import load
from test_report_unit import BULK, summary

pytestmark = pytest.mark.unit

WINDOW, SLOW_FROM, POLL = 600, 120, 10  # seconds: the last 8 of 10 minutes are slow
SHIPPED = load()  # network-ssd: 5 ms a WAL sync, 2 ms + size / 125 MiB/s a read


@dataclass(frozen=True)
class Phase:
    """Per second."""

    reads: float = 0.0
    read_size: float = 8192.0
    ms_per_read: float = 0.0
    syncs: float = 0.0
    ms_per_sync: float = 0.0


def window(healthy: Phase, slow: Phase, slow_from: int = SLOW_FROM) -> Summary:
    """WINDOW seconds polled every POLL: `healthy` until `slow_from`, `slow` after it."""
    recorder = series.SeriesRecorder(series.spacing(WINDOW))
    reads, wal = ReadCounters(0.0, 0.0, 0.0, 0.0), WalCounters()
    for at in range(0, WINDOW + 1, POLL):
        if at > 0:
            p = healthy if at <= slow_from else slow
            n = p.reads * POLL
            reads += ReadCounters(n, n * p.read_size, n * p.ms_per_read, 0.0)
            wal += WalCounters(syncs=p.syncs * POLL, sync_time_ms=p.syncs * POLL * p.ms_per_sync)
        recorder.poll(series.PollTotal(float(at), float(at), True, reads, NO_WRITES))
        recorder.wal(wal, float(at), True)
    writes = Writes({}, WINDOW, True, wal, WINDOW, wal_timed=True)
    return summary({BULK: reads}, WINDOW, writes=writes, series=series.to_json(recorder, None))


def findings(s: Summary) -> dict[str, Finding]:
    return {f.id: f for f in judge(s, SHIPPED).findings}


def test_ten_minutes_whose_last_eight_have_every_fsync_10ms_slower_name_the_wal_syncs() -> None:
    # Issue 30's TPC-B (docs/alerts.md): 4,822 syncs/s at 0.2 ms, then 169/s at 10.2 ms.
    s = window(Phase(syncs=4822, ms_per_sync=0.2), Phase(syncs=169, ms_per_sync=10.2))
    figures = s.writes.wal_figures() if s.writes else None
    assert figures is not None and figures.sync_latency_seconds == pytest.approx(0.00143, abs=5e-6)
    finding = findings(s)["wal_sync_latency_high"]
    assert finding.evidence["slow_intervals"] == 48
    assert finding.evidence["judged_intervals"] == 60
    assert "48 of the window's 60 polls with syncs" in finding.summary
    healthy = window(Phase(syncs=4822, ms_per_sync=0.2), Phase(syncs=4822, ms_per_sync=0.2))
    assert "wal_sync_latency_high" not in findings(healthy)


def test_ten_minutes_whose_last_eight_read_slowly_name_the_reads() -> None:
    # 5,000 reads/s of 8 kB at 0.2 ms, then 150/s at 4.08 ms (docs/alerts.md's slow storage):
    # 0.62 ms per read over the window, under network-ssd's 2.06 ms.
    s = window(Phase(reads=5000, ms_per_read=0.2), Phase(reads=150, ms_per_read=4.08))
    figures = s.total.figures
    assert figures is not None and figures.latency_seconds == pytest.approx(0.000616, abs=1e-6)
    finding = findings(s)["read_latency_high"]
    assert (finding.evidence["slow_intervals"], finding.evidence["judged_intervals"]) == (48, 60)
    healthy = window(Phase(reads=5000, ms_per_read=0.2), Phase(reads=150, ms_per_read=0.2))
    assert "read_latency_high" not in findings(healthy)


def test_polls_without_the_traffic_to_judge_are_neither_slow_nor_healthy() -> None:
    # Nine idle minutes (0.5 syncs/s, below min_syncs_per_second), then one of slow syncs: 6
    # polls of 60, but 6 of the 6 with syncs to judge, as the rules count them.
    idle, slow = Phase(syncs=0.5, ms_per_sync=0.2), Phase(syncs=169, ms_per_sync=10.2)
    finding = findings(window(idle, slow, slow_from=540))["wal_sync_latency_high"]
    assert (finding.evidence["slow_intervals"], finding.evidence["judged_intervals"]) == (6, 6)

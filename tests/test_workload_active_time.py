"""DB time counted by pg_stat_database (active_time, PostgreSQL 14+) judged by pgbench (issue 43
item 1): an A/A pair on 18.6 without pg_stat_statements, index probes by 3 clients (the probes
of tests/test_workload_time.py, on storage answering each read in 0.3 ms), each window 40 s
(the shortest with four sub-windows of active time at polls every 10 s) under pgbench, the
report sampling at its default 1 s. The report must judge by counted DB time, hold pgbench's
latency ratio in its interval, and be much narrower than by sampled DB time over the same
windows. Cost: about 90 s (two 40 s windows, one server with a 32 MB table).

The width bound is measured, not taken from the code: on this server and workload (reads every
100 ms for 60 s, docs/report.md) active time per transaction over 10 s sub-windows moved by 2.8%
(sd), which makes each window's error about 2.8% / sqrt(4) x t(3) / z = 2.0% and the ratio's
90% half-width about 4.8%; this test measured 5.6% (load average about 9 on the 2 cores) and
15.3% (load 13.5: active time holds the wait for a CPU, which then varies between sub-windows).
HALF_WIDTH is above both. Sampled DB time can be no narrower than the Poisson error of the
sessions its samples saw (about 113 per window here: 1.645 x sqrt(2 / 113) = 22%), whatever the
load: counted DB time must be narrower than that.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace

import pytest

import pgbins
import test_workload_time as wt
from pg_aio_exporter import thresholds
from pg_aio_exporter.report import document
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.workload import ACTIVE_TIME, DB_TIME

SECONDS = 40
CLIENTS = 3
HALF_WIDTH = 0.2  # the interval's half-width in the log, at most (see above)
LIMITS = thresholds.load()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[wt.Run, wt.Run]]:
    root = tmp_path_factory.mktemp("active")
    server, shim = wt.start(pgbins.bin_dir("18"), statements=False)
    try:
        shim.set_delay(wt.PROBE_READ_US)
        probe = (wt.SCRIPTS["probe"][0], CLIENTS, "1s")
        first = wt.measure_script(server, probe, root / "a.json", SECONDS)
        second = wt.measure_script(server, probe, root / "b.json", SECONDS)
    finally:
        server.destroy()
    yield first, second


def sampled(summary: Summary) -> Summary:
    """The same window as a server without active_time (before 14) reports it."""
    assert summary.workload is not None
    return replace(summary, workload=replace(summary.workload, active_seconds=None))


def test_counted_db_time_decides_where_sampled_cannot(pair: tuple[wt.Run, wt.Run]) -> None:
    first, second = pair
    pg_ratio = second.latency / first.latency
    report = judge(second.summary, LIMITS, first.summary)
    counted = report.workload
    by_samples = judge(sampled(second.summary), LIMITS, sampled(first.summary)).workload
    assert counted is not None and by_samples is not None
    for name, cmp in (("counted", counted), ("sampled", by_samples)):
        low, high = cmp.interval
        print(
            f"{name}: {cmp.time_ratio:.3f} ({low:.3f}-{high:.3f}, half-width"
            f" {cmp.margin.half_width:.3f}, {cmp.basis}); pgbench {pg_ratio:.3f}"
        )
    for run in pair:
        work = run.summary.workload
        assert work is not None and work.active_time is not None
        print(
            f"  window: pgbench {run.latency * 1000:.2f} ms, active time per transaction"
            f" {work.active_time.value * 1000:.2f} ms (rse {work.active_time.rse:.3f},"
            f" batches {len(work.active_batches or ())}), sampled"
            f" {(work.db_time_per_transaction or 0) * 1000:.2f} ms, own round trips"
            f" {work.own_active_seconds:.3f} s of {work.active_seconds or 0:.1f} s"
        )
    print(report.verdict.workload)
    assert by_samples.basis == DB_TIME
    assert (
        "by DB time per transaction, counted (pg_stat_database's active_time)"
        in report.verdict.workload
    )
    assert counted.basis == ACTIVE_TIME
    low, high = counted.interval
    assert low <= pg_ratio <= high
    assert counted.margin.half_width <= HALF_WIDTH
    seen = [run.summary.workload.sampled_sessions or 0.0 for run in pair if run.summary.workload]
    poisson = 1.645 * math.sqrt(sum(1 / n for n in seen))
    print(f"sampled basis' Poisson floor: half-width {poisson:.3f}")
    assert counted.margin.half_width < min(poisson, by_samples.margin.half_width)
    # A/A: nothing changed, so no direction is claimed.
    assert counted.claim is None


def test_read_wait_per_byte_of_the_pair_has_its_interval(pair: tuple[wt.Run, wt.Run]) -> None:
    """Read wait per byte, from pg_stat_io, gets its interval from each window's sub-windows
    (issue 43 item 5: the saved reports' reads.batches, read back), in the comparison, the
    verdict and the JSON, never narrower than the two windows' 1% floors allow (1.645 x
    sqrt(2) x 1% = 2.3%) and narrow enough to say something (HALF_WIDTH); a regression is
    found only where slower is claimed.

    Not asserted: that it holds 1. The storage is the same in both windows (every read answered
    in 0.3 ms by the shim), but the wait per read also holds the io workers' hand-off on two
    shared cores, which the load moves: measured 0.99x (0.97-1.02x) with pgbench at 1.01x, and
    0.97x (0.94-1.00x) with pgbench at 0.97x, whose interval missed 1 and claimed nothing (too
    close to call)."""
    first, second = pair
    report = judge(second.summary, LIMITS, first.summary)
    assert report.comparison is not None
    change = report.comparison[0].changes["seconds_per_byte"]
    for run in pair:
        assert len(run.summary.read_batches or ()) >= 4
    assert change.margin is not None
    low, high = change.margin.interval
    print(
        f"read wait per byte {change.ratio:.3f} ({low:.3f}-{high:.3f}); pgbench"
        f" {second.latency / first.latency:.3f}: {report.verdict.reads}"
    )
    assert low <= (change.ratio or 0) <= high
    assert 1.645 * math.sqrt(2) * 0.01 <= change.margin.half_width <= HALF_WIDTH
    regressed = "read_latency_regression" in {f.id for f in report.findings}
    assert regressed is (change.margin.slower and (change.ratio or 0) > LIMITS.regression_factor)
    assert f"({low:.2f}-{high:.2f}x)" in report.verdict.reads
    doc = json.loads(document.dumps(report, LIMITS))
    assert doc["comparison"]["rows"][0]["figures"]["seconds_per_byte"]["interval"] == [low, high]

"""PostgreSQL 19 from its source: the io worker pool that sizes itself between io_min_workers
and io_max_workers, on rows built from 19's catalog definitions (tests/fixtures/source/pg19.json
names the source file and commit of each part). No 19 server has run these: expected values are
the source's defaults and the scenario counts stated in the fixture, worked out here by hand."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from harness import Samples, labels, parse
from pg_aio_exporter import thresholds
from pg_aio_exporter.collectors import activity, pg_wait_events, settings
from pg_aio_exporter.collectors.server import ServerCollector, ServerRow
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.report import text
from pg_aio_exporter.report.outcome import Report, judge
from pg_aio_exporter.report.runner import server_facts
from pg_aio_exporter.report.summary import Activity, Summary
from recorded import typed

pytestmark = pytest.mark.unit

FIXTURE = Path(__file__).parent / "fixtures" / "source" / "pg19.json"
T = {"target": "pg19"}
# The setting PostgreSQL 19 removed: advice naming it would change nothing on 19.
IO_WORKERS = re.compile(r"\bio_workers\b")


@cache
def source() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FIXTURE.read_text())
    return loaded


def rendered(out: MetricSet) -> Samples:
    return parse("".join(f.header.decode() + "".join(f.lines) for f in out.families()))


def sampled(scenario: str) -> tuple[activity.ActivityCollector, Activity]:
    """The scenario's samples through the exporter's activity collector, as the report takes
    them (its totals become the report's Activity)."""
    data = source()
    case = data["scenarios"][scenario]
    collector = activity.ActivityCollector()
    for _ in range(case["repeat"]):
        collector.observe(typed(activity.ActivityRow, case["activity"]), data["server_version_num"])
    collector.roll_window(case["repeat"], float(case["repeat"]))
    seen = Activity(
        samples=case["repeat"],
        sample_interval=1.0,
        wait_events=pg_wait_events.PgWaitEventsCollector().snapshot(
            typed(pg_wait_events.WaitEventRow, data["pg_wait_events"])
        ),
        **collector.totals(),
    )
    return collector, seen


def report(scenario: str, *, major: int = 19) -> Report:
    data = source()
    facts = server_facts(
        ServerCollector().snapshot(typed(ServerRow, data["server"])),
        settings.settings_facts(typed(settings.SettingRow, data["settings"])),
    )
    if major == 18:  # the same pool on 18: io_workers = the workers seen, no io_max_workers
        workers = float(sampled(scenario)[1].io_workers or 0)
        facts = replace(
            facts,
            version="18.6",
            version_num=180006,
            settings={"io_workers": workers, "track_io_timing": 1.0},
        )
    summary = Summary(
        target="pg19",
        started_at=1_700_000_000.0,
        ended_at=1_700_000_060.0,
        server=facts,
        rows={},
        read_seconds=60.0,
        timed=True,
        activity=sampled(scenario)[1],
    )
    return judge(summary, thresholds.load())


def said(result: Report) -> str:
    """Every sentence the report shows: findings, advice, verdict and the text rendering."""
    parts = [f"{f.summary} {f.advice}" for f in result.findings]
    return " ".join([*parts, result.verdict.io_workers, text.render(result, thresholds.load())])


def test_fixture_names_its_sources() -> None:
    for part in source()["sources"].values():
        assert part["repo"] and part["file"] and re.fullmatch(r"[0-9a-f]{40}", part["commit"])


def test_settings_exported_in_base_units() -> None:
    out = MetricSet(T)
    settings.SettingsCollector().collect(typed(settings.SettingRow, source()["settings"]), out)
    got = rendered(out)
    key = labels(**T)
    # guc_parameters.dat: io_min_workers boot 2, io_max_workers boot 8; the two times are
    # GUC_UNIT_MS with boot values 60000 and 100, which pg_settings shows in "ms".
    assert got["pg_settings_io_min_workers"][key] == 2
    assert got["pg_settings_io_max_workers"][key] == 8
    assert got["pg_settings_io_worker_idle_timeout_seconds"][key] == 60
    assert got["pg_settings_io_worker_launch_interval_seconds"][key] == pytest.approx(0.1)
    assert "pg_settings_io_workers" not in got  # gone in 19: absent, never 0


@pytest.mark.parametrize(
    ("scenario", "live", "of_max", "pool_share"),
    [
        # 7 of 8 workers busy in each sample; 8 running of io_max_workers 8.
        ("pinned", 7 / 8, 7 / 8, 1.0),
        # 4 of 4 busy; 4 running of io_max_workers 8.
        ("growing", 1.0, 4 / 8, 4 / 8),
    ],
)
def test_utilisation_against_the_live_pool_and_io_max_workers(
    scenario: str, live: float, of_max: float, pool_share: float
) -> None:
    collector, seen = sampled(scenario)
    out = MetricSet(T)
    collector.collect_gauges(out)
    assert rendered(out)["pg_aio_io_worker_utilization_ratio"][labels(**T)] == live
    assert seen.io_worker_utilization == live
    assert seen.max_utilization(8) == of_max
    assert seen.pool_share(8) == pool_share


def test_pool_pinned_at_io_max_workers_names_io_max_workers() -> None:
    result = report("pinned")
    pool = {f.id: f for f in result.findings}["io_worker_pool_saturated"]
    assert "pinned at io_max_workers (8" in pool.summary
    assert pool.evidence["io_max_workers"] == 8 and pool.evidence["pool_share"] == 1.0
    assert pool.evidence["io_worker_max_utilization"] == 7 / 8
    # Demand: 7 busy + 1 session queueing = 8 workers' worth; at 80% busy that is 10.
    assert pool.evidence["suggested_io_max_workers"] == 10
    assert pool.evidence["running_io_workers"] == 8
    assert "ALTER SYSTEM SET io_max_workers = 10" in pool.advice
    assert "raise io_min_workers too (now 2)" in pool.advice
    assert "one every 100 ms" in pool.advice  # io_worker_launch_interval
    assert "Raise io_max_workers to 10" in result.verdict.io_workers
    shown = text.render(result, thresholds.load())
    assert "io_worker_idle_timeout 1m 0s" in shown  # 60000 ms
    assert "io_worker_launch_interval 0.1 s" in shown  # 100 ms
    assert not IO_WORKERS.search(said(result)), said(result)


def test_a_busy_pool_below_io_max_workers_is_growing_on_19_and_too_small_on_18() -> None:
    on_19 = report("growing")
    assert "io_worker_pool_saturated" not in {f.id for f in on_19.findings}
    # Busy, below its ceiling: never "big enough", the pool is adding workers.
    assert on_19.verdict.io_workers.startswith("The io worker pool is growing: 4.00 of at most 8")
    assert "every io_worker_launch_interval (100 ms)" in on_19.verdict.io_workers
    assert not IO_WORKERS.search(said(on_19)), said(on_19)
    on_18 = report("growing", major=18)
    pool = {f.id: f for f in on_18.findings}["io_worker_pool_saturated"]
    # The recorded samples hold no pg_aios rows, so no I/O is seen waiting for a worker: the
    # sessions queueing for the submission queue are the signal, not the busy share alone.
    assert pool.evidence["signals"] == ["submission_queue"]
    assert "ALTER SYSTEM SET io_workers = " in pool.advice
    assert "io_max_workers" not in said(on_18)


def test_wait_classes_come_from_the_server() -> None:
    server = pg_wait_events.PgWaitEventsCollector().snapshot(
        typed(pg_wait_events.WaitEventRow, source()["pg_wait_events"])
    )
    # 19's class Buffer (BufferPin and LWLock/BufferContent before), and WaitForWal* in IPC.
    assert {e for c, e in server.events if c == "Buffer"} == {
        "BufferCleanup",
        "BufferShared",
        "BufferShareExclusive",
        "BufferExclusive",
    }
    assert server.named({"WaitForWalFlush"}) == {("IPC", "WaitForWalFlush")}
    assert pg_wait_events.server_events(190000, server) == server  # the view, where read
    by_version = pg_wait_events.server_events(160000, None)  # 16: the package's own table
    assert by_version.named({"BufferExclusive"}) == frozenset()
    assert by_version.named({"DataFileRead"}) == {("IO", "DataFileRead")}
    assert pg_wait_events.PgWaitEventsCollector().query(160000) is None


def test_buffer_waits_are_counted_in_their_own_class_not_as_reads() -> None:
    _, seen = sampled("pinned")
    # The samples: 6 clients on IO/AioIoCompletion, 1 on LWLock/AioWorkerSubmissionQueue,
    # 1 on Buffer/BufferExclusive, every sample.
    assert seen.sessions(("client backend", "Buffer", "BufferExclusive")) == 1
    events = thresholds.load().io_wait_events
    assert seen.read_wait_sessions(events) == 6
    assert seen.submission_queue_sessions == 1
    assert seen.active_sessions() == 8
    # A server that put an event the report names in another class is followed: the sampled
    # AioIoCompletion waits are reads only while the catalogue says IO.
    elsewhere = seen.wait_events.events - {("IO", "AioIoCompletion")} | {("IPC", "AioIoCompletion")}
    moved = replace(seen, wait_events=pg_wait_events.WaitEvents(elsewhere))
    assert moved.read_wait_sessions(events) == 0

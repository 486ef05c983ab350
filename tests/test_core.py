"""The core exporter against a real PostgreSQL 18 with a real read workload."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from harness import OBSERVER, Exporter, flush_stats, labels, observer, parse, pg_stat_io, wait_for
from pg_aio_exporter.collectors.pg_stat_io import COLUMNS
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, index_scan, seq_scan

CONTRACT_CHECK = Path(__file__).resolve().parents[2] / "shared" / "tools" / "check_contract.py"
POLL = 3.0  # long enough that a short burst of reads fits inside one interval


@pytest.fixture(scope="module")
def obs(pg18: LocalServer) -> Iterator[psycopg.Connection]:
    with observer(pg18.dsn()) as conn:
        yield conn


@pytest.fixture(scope="module")
def exporter(pg18: LocalServer) -> Iterator[Exporter]:
    exp = Exporter("--dsn", pg18.dsn(), "--poll-interval", f"{POLL}s")
    yield exp
    exp.stop()


def quiesce(dsn: str) -> None:
    """Let all pending stats reach shared memory: nobody but the exporter is connected."""

    def alone() -> bool:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND application_name NOT IN ('pg_aio_exporter', %s) AND pid <> pg_backend_pid()",
                (OBSERVER,),
            ).fetchone()
            return row is not None and row[0] == 0

    wait_for(alone, 30, "workload connections to close")
    time.sleep(0.2)  # a backend flushes its stats while exiting


def burst(dsn: str) -> None:
    """Reads in both contexts, on a connection that is closed (stats flushed) on return."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        seq_scan(conn)  # bulkread: table > shared_buffers / 4
        for _ in range(20):
            index_scan(conn, span=500)  # normal
        flush_stats(conn)


def series_key(key: tuple[str, str, str]) -> frozenset[tuple[str, str]]:
    return labels(target="default", backend_type=key[0], object=key[1], context=key[2])


def test_counters_equal_pg_stat_io_and_are_monotonic(
    pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection
):
    workload = Workload(pg18.dsn(), clients=2, pause=0.05).start()
    try:
        history = []
        for _ in range(3):
            before = pg_stat_io(obs)
            scraped = exporter.wait_poll()
            after = pg_stat_io(obs)
            history.append(scraped)
            checked = 0
            for key, row_after in after.items():
                for col in COLUMNS:
                    value = scraped.get(col.metric + "_total", {}).get(series_key(key))
                    if row_after[col.column] is None:
                        assert value is None, f"{col.metric} exported for NULL cell {key}"
                        continue
                    low = float(before[key][col.column]) * col.scale
                    high = float(row_after[col.column]) * col.scale
                    assert value is not None, f"{col.metric}{key} missing"
                    assert low - 1e-9 <= value <= high + 1e-9, (col.metric, key, low, value, high)
                    checked += 1
            assert checked > 500
    finally:
        workload.stop()
    bulk = series_key(("client backend", "relation", "bulkread"))
    reads = [s["pg_stat_io_reads_total"][bulk] for s in history]
    assert reads[-1] > reads[0], "the workload's sequential scans must move bulkread reads"
    for earlier, later in itertools.pairwise(history):
        for name, series in earlier.items():
            if name.startswith("pg_stat_io_") and name.endswith("_total"):
                for key, value in series.items():
                    assert later[name][key] >= value, (name, key)

    # Quiet server: the same numbers exactly.
    quiesce(pg18.dsn())
    exporter.wait_poll()
    expected = pg_stat_io(obs)
    scraped = exporter.wait_poll()
    for key in [
        ("client backend", "relation", "bulkread"),
        ("client backend", "relation", "normal"),
    ]:
        assert scraped["pg_stat_io_reads_total"][series_key(key)] == expected[key]["reads"]
        assert scraped["pg_stat_io_read_bytes_total"][series_key(key)] == float(
            expected[key]["read_bytes"]
        )
        assert scraped["pg_stat_io_read_time_seconds_total"][series_key(key)] == pytest.approx(
            expected[key]["read_time"] / 1000, rel=1e-12
        )


def _one_interval(dsn: str, exporter: Exporter, obs: psycopg.Connection):
    """S1 == poll P1, a burst, S2 == poll P2 with exactly one poll interval between them."""
    for _ in range(4):
        quiesce(dsn)
        first = exporter.wait_poll()
        p1 = exporter.last_poll()
        s1 = pg_stat_io(obs)
        burst(dsn)
        s2 = pg_stat_io(obs)
        second = exporter.wait_poll(after=p1)
        p2 = max(second["pg_aio_exporter_last_poll_success_timestamp_seconds"].values())
        if p2 - p1 < 1.5 * POLL and time.time() - p1 > 0:
            return first, s1, s2, second
    raise AssertionError("could not fit a burst into one poll interval")


def test_interval_gauges_equal_independent_math(
    pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection
):
    _, s1, s2, scraped = _one_interval(pg18.dsn(), exporter, obs)
    moved = 0
    for key, now in s2.items():
        before = s1.get(key)
        series = series_key(key)
        gauges = {
            name: scraped.get(name, {}).get(series)
            for name in (
                "pg_aio_read_latency_seconds",
                "pg_aio_read_seconds_per_byte",
                "pg_aio_read_size_bytes",
                "pg_aio_hit_ratio",
            )
        }
        d_reads = (now["reads"] or 0) - ((before or {}).get("reads") or 0)
        if before is None or now["reads"] is None or d_reads <= 0:
            assert set(gauges.values()) == {None}, f"gauges for {key} without reads: {gauges}"
            continue
        moved += 1
        d_bytes = float(now["read_bytes"] - before["read_bytes"])
        d_time = (now["read_time"] - before["read_time"]) / 1000.0
        d_hits = now["hits"] - before["hits"]
        assert gauges["pg_aio_read_latency_seconds"] == pytest.approx(d_time / d_reads, rel=1e-9)
        assert gauges["pg_aio_read_seconds_per_byte"] == pytest.approx(d_time / d_bytes, rel=1e-9)
        assert gauges["pg_aio_read_size_bytes"] == pytest.approx(d_bytes / d_reads, rel=1e-9)
        assert gauges["pg_aio_hit_ratio"] == pytest.approx(d_hits / (d_hits + d_reads), rel=1e-9)
    assert moved >= 2, "the burst must read in bulkread and normal contexts"
    bulk = series_key(("client backend", "relation", "bulkread"))
    # PG 18 combines reads of a sequential scan: more than one 8 kB block per operation.
    assert scraped["pg_aio_read_size_bytes"][bulk] > 8192


def test_stats_reset_between_polls(pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection):
    quiesce(pg18.dsn())
    before = exporter.wait_poll()
    with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_reset_shared('io')")
    burst(pg18.dsn())
    after_reset = exporter.wait_poll()
    reset_key = labels(target="default")
    assert (
        after_reset["pg_stat_io_stats_reset_timestamp_seconds"][reset_key]
        > before["pg_stat_io_stats_reset_timestamp_seconds"][reset_key]
    )
    for name in (
        "pg_aio_read_latency_seconds",
        "pg_aio_read_seconds_per_byte",
        "pg_aio_read_size_bytes",
        "pg_aio_hit_ratio",
    ):
        assert name not in after_reset, f"{name} must be absent across a reset"
    bulk = series_key(("client backend", "relation", "bulkread"))
    assert after_reset["pg_stat_io_reads_total"][bulk] < before["pg_stat_io_reads_total"][bulk]
    # Counters recover: the next interval is defined again, with sane values.
    _, _, _, later = _one_interval(pg18.dsn(), exporter, obs)
    assert later["pg_stat_io_reads_total"][bulk] > after_reset["pg_stat_io_reads_total"][bulk]
    assert 0 < later["pg_aio_read_latency_seconds"][bulk] < 1
    assert 0 <= later["pg_aio_hit_ratio"][bulk] <= 1


def test_track_io_timing_off_hides_latency(
    pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection
):
    with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET track_io_timing = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        exporter.wait_poll()  # first poll with timing off
        _, _, _, scraped = _one_interval(pg18.dsn(), exporter, obs)
        assert scraped["pg_settings_track_io_timing"][labels(target="default")] == 0
        assert "pg_aio_read_latency_seconds" not in scraped
        assert "pg_aio_read_seconds_per_byte" not in scraped
        bulk = series_key(("client backend", "relation", "bulkread"))
        assert scraped["pg_aio_read_size_bytes"][bulk] > 0  # size and hits need no timing
    finally:
        with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET track_io_timing")
            conn.execute("SELECT pg_reload_conf()")
    scraped = exporter.wait_poll()
    assert scraped["pg_settings_track_io_timing"][labels(target="default")] == 1


def test_exposition_is_clean_and_meets_the_contract(
    pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection
):
    _one_interval(pg18.dsn(), exporter, obs)
    text = exporter.text()
    samples = parse(text)  # prometheus_client's own parser accepts it
    for name, series in samples.items():
        for key, value in series.items():
            assert not math.isnan(value), (name, key)
    assert samples["pg_up"][labels(target="default")] == 1
    assert samples["pg_aio_supported"][labels(target="default")] == 1
    info = samples["pg_server_info"]
    assert any(dict(k)["version_num"].startswith("18") for k in info)
    result = subprocess.run(
        [sys.executable, str(CONTRACT_CHECK), exporter.url + "/metrics", "--require", "intervals"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    assert "0 required metric(s) missing" in result.stdout


def test_io_method_state_set(pg18: LocalServer, exporter: Exporter):
    worker = exporter.wait_poll()["pg_aio_io_method"]
    assert worker == {
        labels(target="default", io_method="worker"): 1.0,
        labels(target="default", io_method="sync"): 0.0,
    }
    sync_server = LocalServer.create(settings={"io_method": "sync"})
    try:
        sync_server.start()
        exp = Exporter("--dsn", sync_server.dsn(), "--poll-interval", "1s")
        try:
            sync = exp.wait_poll()["pg_aio_io_method"]
        finally:
            exp.stop()
    finally:
        sync_server.destroy()
    assert sync == {
        labels(target="default", io_method="worker"): 0.0,
        labels(target="default", io_method="sync"): 1.0,
    }


def test_server_down_scrapes_stay_fast_and_recover():
    server = LocalServer.create()
    server.start()
    exp = Exporter("--dsn", server.dsn(), "--poll-interval", "1s", "--timeout", "2s")
    try:
        assert exp.wait_poll()["pg_up"][labels(target="default")] == 1
        server.stop()

        def down() -> dict | None:
            samples = exp.scrape()
            return samples if samples["pg_up"][labels(target="default")] == 0 else None

        first = wait_for(down, 10, "pg_up 0")
        errors = "pg_aio_exporter_poll_errors_total"
        key = labels(target="default", collector="connection", kind="connection")
        time.sleep(2.5)
        durations = []
        for _ in range(20):
            started = time.perf_counter()
            samples = exp.scrape()
            durations.append(time.perf_counter() - started)
        assert samples["pg_up"][labels(target="default")] == 0
        assert samples[errors][key] > first[errors][key], "error counter must keep rising"
        assert sorted(durations)[10] < 0.05, durations
        assert "pg_stat_io_reads_total" not in samples, "no stale data while down"
        server.start()
        started = time.time()
        wait_for(lambda: exp.scrape()["pg_up"][labels(target="default")] == 1, 5, "recovery")
        assert time.time() - started <= 2.0  # within one poll (1 s) plus a scrape
        log = exp.logs()
        assert log.count("poll failed") == 1, "one log line per failure streak"
        assert "poll recovered" in log
    finally:
        exp.stop()
        server.destroy()

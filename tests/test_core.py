"""The core exporter against a real PostgreSQL 18: resets, timing off, io_method, contract,
server down. Counters and interval gauges are checked on 16, 17 and 18 in test_versions.py."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import contract
from cpu import (
    CpuWatch,
    Stopwatch,
    assert_median_within,
    assert_within,
    backend_pids,
    scrape_path,
)
from harness import Exporter, Samples, labels, observer, parse, wait_for
from iocheck import burst, one_interval, quiesce, series_key
from pg_aio_exporter.demo.server import LocalServer

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


def test_stats_reset_between_polls(
    pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection
) -> None:
    for _ in range(2):  # more reads before the reset than the one burst after it
        burst(pg18.dsn())
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
    _, _, later = one_interval(pg18.dsn(), exporter, obs, POLL)
    assert later["pg_stat_io_reads_total"][bulk] > after_reset["pg_stat_io_reads_total"][bulk]
    assert 0 < later["pg_aio_read_latency_seconds"][bulk] < 1
    assert 0 <= later["pg_aio_hit_ratio"][bulk] <= 1


def test_track_io_timing_off_hides_latency(
    pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection
) -> None:
    with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET track_io_timing = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        exporter.wait_poll()  # first poll with timing off
        _, _, scraped = one_interval(pg18.dsn(), exporter, obs, POLL)
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


def test_sql_ascii_database_is_read_as_text(pg18: LocalServer) -> None:
    """A database created with ENCODING 'SQL_ASCII' (initdb without a locale picks it): psycopg
    hands such a connection's text columns over as bytes unless the client encoding is set,
    and every collector's labels then failed as internal errors while pg_up said 1."""
    with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
        conn.execute(
            "CREATE DATABASE sqlascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C'"
            " TEMPLATE template0"
        )
    exp = Exporter("--dsn", pg18.dsn(dbname="sqlascii"), "--poll-interval", f"{POLL}s")
    try:
        scraped = exp.wait_poll()
        scraped = exp.wait_poll()
        assert scraped["pg_up"][labels(target="default")] == 1
        errors = scraped["pg_aio_exporter_poll_errors_total"]
        assert not any(errors.values()), {k: v for k, v in errors.items() if v}
        assert scraped["pg_stat_io_reads_total"], "no pg_stat_io series from a SQL_ASCII database"
        assert scraped["pg_aio_io_method"][labels(target="default", io_method="worker")] == 1
    finally:
        exp.stop()
        with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
            conn.execute("DROP DATABASE sqlascii")


def test_exposition_is_clean_and_meets_the_contract(
    pg18: LocalServer, exporter: Exporter, obs: psycopg.Connection
) -> None:
    one_interval(pg18.dsn(), exporter, obs, POLL)
    text = exporter.text()
    samples = parse(text)  # prometheus_client's own parser accepts it
    for name, series in samples.items():
        for key, value in series.items():
            assert not math.isnan(value), (name, key)
    assert samples["pg_up"][labels(target="default")] == 1
    assert samples["pg_aio_supported"][labels(target="default")] == 1
    info = samples["pg_server_info"]
    assert any(dict(k)["version_num"].startswith("18") for k in info)
    assert contract.problems(text, required=["intervals"]) == []


def test_io_method_state_set(pg18: LocalServer, exporter: Exporter) -> None:
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


@pytest.mark.timing
def test_server_down_scrapes_stay_fast_and_recover() -> None:
    server = LocalServer.create()
    server.start()
    exp = Exporter("--dsn", server.dsn(), "--poll-interval", "1s", "--timeout", "2s")
    try:
        assert exp.wait_poll()["pg_up"][labels(target="default")] == 1
        server.stop()

        def down() -> Samples | None:
            samples = exp.scrape()
            return samples if samples["pg_up"][labels(target="default")] == 0 else None

        first = wait_for(down, 10, "pg_up 0")
        errors = "pg_aio_exporter_poll_errors_total"
        key = labels(target="default", collector="connection", kind="connection")
        # The error counter keeps rising while the server is down (a reconnect each poll).
        wait_for(
            lambda: exp.scrape()[errors][key] > first[errors][key], 10, "the error counter rising"
        )
        clock = Stopwatch(scrape_path(exp.proc.pid))
        for _ in range(20):
            samples = parse(clock.get(exp.url + "/metrics")[1].decode())
        assert samples["pg_up"][labels(target="default")] == 0
        assert samples[errors][key] > first[errors][key], "error counter must keep rising"
        assert_median_within(clock.timings, 0.05)
        assert "pg_stat_io_reads_total" not in samples, "no stale data while down"
        server.start()
        started = time.time()
        watch = CpuWatch(lambda: [exp.proc.pid, os.getpid(), *backend_pids(server.dsn())])
        wait_for(lambda: exp.scrape()["pg_up"][labels(target="default")] == 1, 5, "recovery")
        # Within one poll (1 s) plus a scrape, plus what the processes waited for a CPU.
        assert_within("recovery", time.time() - started, 2.0, watch.starved())
        log = exp.logs()
        assert log.count("level=error") == 1, "one log line per failure streak"
        assert "connection recovered" in log
    finally:
        exp.stop()
        server.destroy()


@pytest.mark.timing
def test_targets_poll_spread_over_the_interval(pg18: LocalServer, tmp_path: Path) -> None:
    """Several targets of one exporter poll at their own phase of the interval, not together:
    a shared server gets their polls one by one. The first poll of each is immediate."""
    names = ("alpha", "bravo", "charlie", "delta")
    config = tmp_path / "targets.yaml"
    config.write_text(
        "targets:\n" + "".join(f"  - name: {n}\n    dsn: '{pg18.dsn()}'\n" for n in names)
    )
    interval = 8.0
    exp = Exporter("--config", str(config), "--poll-interval", f"{interval}s")
    ready = time.time()
    watch = CpuWatch(lambda: [exp.proc.pid, *backend_pids(pg18.dsn())])
    try:

        def polled(at_least: int) -> dict[str, float] | None:
            samples = exp.scrape()
            counts = samples.get("pg_aio_exporter_poll_duration_seconds_count", {})
            if any(
                counts.get(labels(target=n, collector="pg_stat_io"), 0) < at_least for n in names
            ):
                return None
            success = samples["pg_aio_exporter_last_poll_success_timestamp_seconds"]
            return {n: success[labels(target=n)] for n in names}

        # Waiting for its phase, alpha would first poll 6.5 s and delta 4.7 s after the start.
        first = wait_for(lambda: polled(1), 15, "a first poll of every target")
        # Four connections made one after the other take well under a second, plus what the
        # exporter and its backends waited for a CPU on a busy host.
        assert_within("first polls", max(first.values()) - ready, interval / 2, watch.starved())
        # The second poll of each falls on its phase of the grid.
        last = wait_for(lambda: polled(2), 2 * interval + 5, "two polls of every target")
        assert max(last.values()) - min(last.values()) > interval / 4, last
    finally:
        exp.stop()

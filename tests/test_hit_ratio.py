"""The hit ratio by blocks on PostgreSQL 17 and 18 (issue 49): pg_stat_io's `hits` count blocks,
its `reads` operations, which on 18 cover up to io_combine_limit blocks each. The exporter's
pg_aio_hit_ratio and the report's hit ratio must be hits / (hits + blocks read), the blocks read
being the bytes read in the server's block_size, as the test computes it from pg_stat_io, under
pgbench scans whose reads 18 combines; hits / (hits + reads) would be several times higher there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbins
from harness import Exporter, labels, observer, pg_stat_io, wait_for
from iocheck import BULKREAD, IoRows, block_size, check_interval_gauges, one_interval, series_key
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import ROWS_PER_MB, TABLE, create_table

TABLE_MB = 48  # three times shared_buffers: scans read through a ring, and 18 combines
POLL = 8.0  # the exporter's: a pgbench burst fits in one interval
TOLERANCE = 0.05  # the issue's: within 5% of the ratio computed by hand
REPORT = ("--duration", "25s", "--format", "json")
# Whole scans (bulkread, read streams on 18) and short index ranges (shared buffers, normal),
# by two clients: scans of one table synchronise and hit each other's blocks.
SCAN = f"SELECT sum(length(payload)) FROM {TABLE};\n"
RANGE = (
    f"\\set lo random(1, {TABLE_MB * ROWS_PER_MB - 2000})\n"
    f"SELECT sum(length(payload)) FROM {TABLE} WHERE id BETWEEN :lo AND :lo + 2000;\n"
)


@pytest.fixture(scope="module", params=["17", "18"])
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    server = LocalServer.create(
        pgbins.bin_dir(request.param),
        settings={"shared_buffers": "16MB", "track_io_timing": "on", "autovacuum": "off"},
    )
    server.start()
    create_table(server.dsn(), TABLE_MB)
    yield server
    server.destroy()


def pgbench_burst(dsn: str, scripts: Path) -> None:
    """Two clients, six transactions each, of whole scans and index ranges (18's pgbench: 17's
    build has none); returns once its connections are closed."""
    (scripts / "scan.sql").write_text(SCAN)
    (scripts / "range.sql").write_text(RANGE)
    subprocess.run(
        [
            str(pgbins.bin_dir("18") / "pgbench"),
            *("-n", "-c", "2", "-j", "2", "-t", "6"),
            *("-f", f"{scripts / 'scan.sql'}@1", "-f", f"{scripts / 'range.sql'}@1"),
            dsn,
        ],
        check=True,
        capture_output=True,
        timeout=120,
        # Parallel workers would take reads off the clients' rows.
        env={**os.environ, "PGOPTIONS": "-c max_parallel_workers_per_gather=0"},
    )


def counted(
    before: IoRows, after: IoRows, key: tuple[str, str, str] | None = None
) -> tuple[float, float, float]:
    """(hits, reads, bytes read) between two pg_stat_io reads, of one row or of every row but
    18's WAL rows (the report's whole server); NULL cells count 0, bytes before 18 are reads x
    op_bytes."""
    hits = reads = nbytes = 0.0
    for k, row in after.items():
        if (key is not None and k != key) or k[1] == "wal" or row["reads"] is None:
            continue
        was = before[k]
        d_reads = row["reads"] - was["reads"]
        reads += d_reads
        hits += (row["hits"] or 0) - (was["hits"] or 0)
        if "read_bytes" in row:
            nbytes += float(row["read_bytes"] - was["read_bytes"])
        else:
            nbytes += d_reads * row["op_bytes"]
    return hits, reads, nbytes


def ratios(hits: float, reads: float, nbytes: float, block: int) -> tuple[float, float]:
    """(by blocks, by operations): the right hit ratio and the one divided by operations."""
    return hits / (hits + nbytes / block), hits / (hits + reads)


def major(conn: psycopg.Connection[Any]) -> int:
    return conn.info.server_version // 10000


def test_exporter_hit_ratio_counts_blocks(server: LocalServer, tmp_path: Path) -> None:
    obs = observer(server.dsn())
    exporter = Exporter("--dsn", server.dsn(), "--poll-interval", f"{POLL}s")
    try:
        s1, s2, scraped = one_interval(
            server.dsn(), exporter, obs, POLL, lambda dsn: pgbench_burst(dsn, tmp_path)
        )
        block = block_size(obs)
        # Every row's gauge is the test's own math by blocks (tests/iocheck.py) ...
        assert check_interval_gauges(s1, s2, scraped, block) >= 2
        # ... and the setting the rules divide by is the server's.
        assert scraped["pg_settings_block_size_bytes"][labels(target="default")] == block
        by_blocks, by_ops = ratios(*counted(s1, s2, BULKREAD), block)
        gauge = scraped["pg_aio_hit_ratio"][series_key(BULKREAD)]
        print(
            f"[hit ratio] PostgreSQL {major(obs)} exporter, bulkread: gauge {gauge:.4f},"
            f" by blocks {by_blocks:.4f}, hits / (hits + reads) {by_ops:.4f}"
        )
        assert gauge == pytest.approx(by_blocks, rel=TOLERANCE)
        discriminates(major(obs), by_blocks, by_ops)
    finally:
        exporter.stop()
        obs.close()


def discriminates(version: int, by_blocks: float, by_ops: float) -> None:
    """On 18 the reads were combined: dividing by operations is off by far more than the
    tolerance (so this test fails on the formula it replaces); on 17 one read is one block."""
    assert by_blocks > 0, "the workload must hit shared buffers for the ratio to say anything"
    if version >= 18:
        assert by_ops > by_blocks * (1 + 3 * TOLERANCE), (by_ops, by_blocks)
    else:
        assert by_ops == pytest.approx(by_blocks, rel=1e-9)


def test_report_hit_ratio_counts_blocks(server: LocalServer, tmp_path: Path) -> None:
    """The report's window holds one pgbench burst and nothing else that reads: its hit ratio
    is the burst's, by blocks, as pg_stat_io read around the burst says."""
    obs = observer(server.dsn())
    report = subprocess.Popen(
        [sys.executable, "-m", "pg_aio_exporter", "report", "--dsn", server.dsn(), *REPORT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        connected = wait_for(lambda: report_connected(obs), 30, "the report to connect")
        # Its window opens after two polls 1.1 s apart: then the burst, read around by hand.
        time.sleep(4)
        s1 = pg_stat_io(obs)
        pgbench_burst(server.dsn(), tmp_path)
        time.sleep(1.2)  # the burst's backends have flushed their stats on exit
        s2 = pg_stat_io(obs)
        burst_ended = time.monotonic()
        out, err = report.communicate(timeout=120)
    finally:
        if report.poll() is None:
            report.kill()
            report.wait()
    assert report.returncode in (0, 1), err
    # The burst lay inside the window (25 s from its start, which came after the connection).
    assert burst_ended - connected < 20, "the burst outran the report's window"
    doc = json.loads(out)
    block = block_size(obs)
    by_blocks, by_ops = ratios(*counted(s1, s2), block)
    got = doc["reads"]["total"]["hit_ratio"]
    print(
        f"[hit ratio] PostgreSQL {major(obs)} report: {got:.4f}, by blocks {by_blocks:.4f},"
        f" hits / (hits + reads) {by_ops:.4f}"
    )
    assert got == pytest.approx(by_blocks, rel=TOLERANCE)
    discriminates(major(obs), by_blocks, by_ops)
    assert doc["server"]["settings"]["block_size_bytes"] == block
    obs.close()


def report_connected(obs: psycopg.Connection[Any]) -> float | None:
    row = obs.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_aio_exporter'"
    ).fetchone()
    return time.monotonic() if row is not None and row[0] > 0 else None

"""Workload time made sound, on a real PostgreSQL 18 without pg_stat_statements (DB time per
transaction), each case of issue 31 remade with pgbench as the client and judge:

- light load (`pgbench -R`) of statements too short for any sample to see working: the report
  counts the transactions and says DB time was not measured, against a baseline too (it used to
  divide by zero);
- the same load sampled every 100 ms: its transactions counted though the report's own
  outnumber them (they used to be dropped);
- statements that outlast the window: answered on a named basis (sessions busy, no work ended);
- pg_stat_reset() within the window: the spans whose counts continue are counted, the rest left
  out and said so (the counts used to be subtracted across the reset).

pgbench runs at a fixed rate with per-second progress; its transactions over the report's window
are the count to match.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbins
from harness import terminate_for_stderr
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.report.workload import MIN_BUSY_SHARE
from pgbench_judge import PROGRESS
from test_workload_time import measure, start

LIGHT = "SELECT count(*) FROM pg_am;\n"  # reads a table (so it is counted), in microseconds
RATE = 10  # transactions per second


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    server, _ = start(pgbins.bin_dir("18"), statements=False)
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def baseline(server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two clients scanning: DB time per transaction well measured."""
    return measure(server, "scan", tmp_path_factory.mktemp("sound") / "scan.json").saved


def light_pgbench(server: LocalServer, script: Path, sql: str = LIGHT) -> subprocess.Popen[str]:
    script.write_text(sql)
    return subprocess.Popen(
        [
            str(pgbins.bin_dir("18") / "pgbench"),
            *("-n", "-f", str(script), "-c", "1", "-R", str(RATE), "-T", "60"),
            *("--progress=1", "--progress-timestamp", server.dsn()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def report(server: LocalServer, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pg_aio_exporter", "report", "--dsn", server.dsn()),
            *("--format", "json", *args),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # A traceback (ZeroDivisionError) exits 1: the report must be made.
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def under(
    bench: subprocess.Popen[str], run: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], str]:
    """`run()` while pgbench runs; its result and pgbench's progress lines."""
    try:
        result = run()
    finally:
        progress = terminate_for_stderr(bench)
    return result, progress


def transactions_within(progress: str, started: float, ended: float) -> float:
    """pgbench's transactions over [started, ended] from its per-second progress lines."""
    return sum(
        tps
        for stamp, tps in (map(float, m.groups()[:2]) for m in PROGRESS.finditer(progress))
        if started + 0.5 <= stamp <= ended + 0.5
    )


def window(doc: dict[str, Any]) -> tuple[float, float]:
    started = datetime.fromisoformat(doc["window"]["started_at"]).timestamp()
    return started, started + doc["window"]["duration_seconds"]


def test_no_session_sampled_is_no_crash_and_says_so(
    server: LocalServer, baseline: Path, tmp_path: Path
) -> None:
    """Light load sampled once a second: transactions counted, no sample saw one working. DB
    time is 0 measured, not a ratio: no division by it, and the verdict says why."""
    bench = light_pgbench(server, tmp_path / "light.sql")
    doc, _ = under(bench, lambda: report(server, "--duration", "10s", "--baseline", str(baseline)))
    work = doc["workload"]
    assert work["transactions"] and work["transactions"] >= RATE * 5
    assert work["client_sessions"] == 0
    assert doc["comparison"]["workload"] is None
    assert doc["verdict"]["workload"].startswith("DB time not measured")
    assert "pg_stat_statements" in doc["verdict"]["workload"]


def test_light_load_sampled_often_is_counted(server: LocalServer, tmp_path: Path) -> None:
    """Sampled every 100 ms: the report's own 100 transactions outnumber pgbench's; pgbench's
    are counted all the same, as many as pgbench made over the window (counts reach the view up
    to a second late at either end). Each sample counts pgbench's connection, idle or not."""
    bench = light_pgbench(server, tmp_path / "light.sql")
    doc, progress = under(
        bench, lambda: report(server, "--duration", "10s", "--sample-interval", "100ms")
    )
    made = transactions_within(progress, *window(doc))
    counted = doc["workload"]["transactions"]
    assert counted is not None, doc["verdict"]["workload"]
    assert abs(counted - made) <= 2 * RATE + 2, (counted, made)
    # pgbench's one client, connected the whole window and mostly waiting for its schedule:
    # the time clients were connected per transaction is no measure of their latency here.
    assert doc["workload"]["connected_sessions"] == pytest.approx(1.0, abs=0.05), doc["workload"]


@pytest.fixture
def tpcb_server() -> Iterator[LocalServer]:
    """A server of its own: pgbench's tables and the autovacuum they draw would count as
    transactions in the module server's later windows (17 in one, where none may end)."""
    server, _ = start(pgbins.bin_dir("18"), statements=False)
    try:
        yield server
    finally:
        server.destroy()


def test_tpcb_clients_are_a_closed_loop_though_the_server_works_a_fraction_of_their_time(
    tpcb_server: LocalServer,
) -> None:
    """pgbench's TPC-B, 3 clients in a closed loop: each transaction is seven round trips, so
    the server works a fraction of the clients' time and they sit idle inside the transaction
    between its statements for most of the rest. The report counts those sessions, and the
    clients' share in a transaction is that of a closed loop (it was taken for clients waiting
    between transactions, whose interval is the Little bound: bench/workload_margin.py)."""
    pgbench = str(pgbins.bin_dir("18") / "pgbench")
    subprocess.run(
        [pgbench, "-i", "-q", "-s", "1", tpcb_server.dsn()], check=True, capture_output=True
    )
    bench = subprocess.Popen(
        [pgbench, "-n", "-c", "3", "-j", "3", "-T", "60", "--progress=1", tpcb_server.dsn()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    doc, _ = under(
        bench, lambda: report(tpcb_server, "--duration", "10s", "--sample-interval", "100ms")
    )
    work = doc["workload"]
    working, idle = work["client_sessions"], work["in_transaction_sessions"]
    connected = work["connected_sessions"]
    print(f"\nTPC-B: {working:.2f} working, {idle:.2f} idle in a transaction, of {connected:.2f}")
    assert connected == pytest.approx(3.0, abs=0.1), work
    assert idle > 0, work
    assert (working + idle) / connected >= MIN_BUSY_SHARE, work


def test_statements_outlasting_the_window_are_answered_on_a_named_basis(
    server: LocalServer,
) -> None:
    """Two sessions each in one statement that outlasts the window: nothing ends in it, so no
    counter moves; the verdict says the sessions were busy and why no work was counted."""

    conns = [psycopg.connect(server.dsn(), autocommit=True) for _ in range(2)]
    failures: list[BaseException | None] = []

    def long_statement(conn: psycopg.Connection[Any]) -> None:
        try:
            conn.execute("SELECT pg_sleep(300)")
        except BaseException as exc:  # canceled below, as it should be
            failures.append(exc if not isinstance(exc, psycopg.errors.QueryCanceled) else None)

    sessions = [threading.Thread(target=long_statement, args=(c,)) for c in conns]
    for session in sessions:
        session.start()
    time.sleep(1)
    try:
        doc = report(server, "--duration", "10s")
    finally:
        for conn, session in zip(conns, sessions, strict=True):
            conn.cancel_safe()
            session.join()
            conn.close()
    assert failures == [None, None], "the statements ended before the window did"
    work = doc["workload"]
    assert work["transactions"] is None
    assert work["client_sessions"] == pytest.approx(2, abs=0.2)
    verdict = doc["verdict"]["workload"]
    assert verdict.startswith("Not judged on work done: 2.00 client sessions were busy"), verdict
    assert "outlast the window" in verdict and "--duration" in verdict


def test_stats_reset_within_the_window_leaves_out_its_span(
    server: LocalServer, tmp_path: Path
) -> None:
    """pg_stat_reset() while the report watches: the counts of the span across it are left out
    (they do not subtract), the spans before and after are counted; pgbench's rate comes out.
    Many transactions first, so that a subtraction across the reset would go negative."""
    burst = tmp_path / "burst.sql"
    burst.write_text(LIGHT)
    subprocess.run(
        [str(pgbins.bin_dir("18") / "pgbench"), "-n", "-f", str(burst), "-t", "3000", server.dsn()],
        check=True,
        capture_output=True,
    )
    bench = light_pgbench(server, tmp_path / "light.sql")

    def reset_later() -> None:
        time.sleep(8)  # within the window's first or second 10 s poll interval
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("SELECT pg_stat_reset()")

    resetter = threading.Thread(target=reset_later)
    resetter.start()
    try:
        doc, _ = under(bench, lambda: report(server, "--duration", "20s"))
    finally:
        resetter.join()
    work = doc["workload"]
    assert work["transactions"] is not None, doc["verdict"]["workload"]
    rate = work["transactions"] / work["seconds"]
    assert RATE * 0.7 <= rate <= RATE * 1.3, (rate, work)
    assert 5 <= work["uncounted_seconds"] <= 12, work

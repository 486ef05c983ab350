"""Workload time judged by pgbench, PostgreSQL's own client: the issue-22 table remade on real
servers. The same data (a 32 MB table, shared_buffers 16 MB) on 17.10 and on 18.6 with io_method
worker and sync (and io_uring where scripts/build-postgres-io-uring.py built it); two closed-loop
workloads, sequential scans (2 clients) and index probes (4 clients), each run once per server
under pgbench while `pg-aio-exporter report --save` watches the same seconds.

Whenever pgbench's latency moved by more than 1.15x, the report's time_ratio must point the same
way (by statements and by DB time per transaction), and for the scans lie within 20% of
pgbench's ratio; read slowed per read (the shim) on 18 is a workload_regression; a faster
workload is never called a regression; `compare` names the fastest. Ratios, never absolute
times: the machine is loaded, and pgbench and the report see the same window.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg
import pytest

import pgbins
from pg_aio_exporter.demo import iouring
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import ROWS_PER_MB, create_table
from pg_aio_exporter.report import document, thresholds
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.workload import DB_TIME, STATEMENTS
from slowread import SlowReads

TABLE_MB = 32
SETTINGS = {
    "shared_buffers": "16MB",
    "track_io_timing": "on",
    "max_connections": "20",
    "max_parallel_workers_per_gather": "0",  # the clients' own reads, as in the issue
    "shared_preload_libraries": "pg_stat_statements",
}
SCRIPTS = {
    "scan": ("SELECT sum(length(payload)) FROM aio_demo;\n", 2),
    "probe": (
        f"\\set id random(1, {TABLE_MB * ROWS_PER_MB})\n"
        "SELECT payload FROM aio_demo WHERE id = :id;\n",
        4,
    ),
}
REPORT_SECONDS = 10
PGBENCH_SECONDS = 13  # covers the report's connect, its two polls before the window, and the end
MOVED = 1.15
SLOW_READ_US = 3000
LIMITS = thresholds.load()


@dataclass
class Run:
    latency: float  # pgbench's latency average, seconds
    saved: Path
    summary: Summary


def pgbench(server: LocalServer, script: Path, clients: int) -> float:
    out = subprocess.run(
        [
            str(pgbins.bin_dir("18") / "pgbench"),
            "-n",
            "-f",
            str(script),
            "-c",
            str(clients),
            "-j",
            str(clients),
            "-T",
            str(PGBENCH_SECONDS),
            server.dsn(),
        ],
        capture_output=True,
        text=True,
        timeout=PGBENCH_SECONDS + 30,
        check=True,
    ).stdout
    found = re.search(r"latency average = ([0-9.]+) ms", out)
    assert found, out
    return float(found.group(1)) / 1000


def measure(server: LocalServer, workload: str, saved: Path) -> Run:
    """pgbench and the report over the same seconds."""
    sql, clients = SCRIPTS[workload]
    script = saved.with_suffix(".sql")
    script.write_text(sql)
    latency: list[float] = []
    bench = threading.Thread(target=lambda: latency.append(pgbench(server, script, clients)))
    bench.start()
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pg_aio_exporter", "report", "--dsn", server.dsn()),
            *("--duration", f"{REPORT_SECONDS}s", "--save", str(saved), "--format", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    bench.join()
    assert result.returncode == 0, result.stderr
    return Run(latency[0], saved, document.load_baseline(str(saved)))


def start(
    bin_dir: Path, *, statements: bool = True, **settings: str
) -> tuple[LocalServer, SlowReads]:
    wanted = {**SETTINGS, **settings}
    if not statements:
        del wanted["shared_preload_libraries"]
    server = LocalServer.create(bin_dir, settings=wanted)
    shim = SlowReads(server)
    server.start()
    create_table(server.dsn(), TABLE_MB)
    if statements:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
    return server, shim


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Run]]:
    """(server, workload) -> its run. Servers: '17', '18 worker', '18 sync' (pg_stat_statements
    dropped for its scans: the report's path without the extension), '18 io_uring' where
    built (that build has no pg_stat_statements), and '18 slow reads' (worker, SLOW_READ_US
    per read: the true regression)."""
    root = tmp_path_factory.mktemp("workload")
    out: dict[tuple[str, str], Run] = {}
    seventeen, _ = start(pgbins.bin_dir("17"))
    try:
        for workload in SCRIPTS:
            out[("17", workload)] = measure(seventeen, workload, root / f"17-{workload}.json")
    finally:
        seventeen.destroy()
    eighteen, shim = start(pgbins.bin_dir("18"), io_method="worker")
    try:
        for workload in SCRIPTS:
            out[("18 worker", workload)] = measure(eighteen, workload, root / f"w-{workload}.json")
        shim.set_delay(SLOW_READ_US)
        out[("18 slow reads", "scan")] = measure(eighteen, "scan", root / "slow-scan.json")
        shim.set_delay(0)
        eighteen.configure({"io_method": "sync"})
        eighteen.restart()
        out[("18 sync", "probe")] = measure(eighteen, "probe", root / "s-probe.json")
        with psycopg.connect(eighteen.dsn(), autocommit=True) as conn:
            conn.execute("DROP EXTENSION pg_stat_statements")
        out[("18 sync", "scan")] = measure(eighteen, "scan", root / "s-scan.json")
    finally:
        eighteen.destroy()
    if iouring.builds():
        # The io_uring build has no contrib: no pg_stat_statements, DB time only.
        uring, _ = start(iouring.bin_dir(), statements=False, io_method="io_uring")
        try:
            for workload in SCRIPTS:
                out[("18 io_uring", workload)] = measure(
                    uring, workload, root / f"u-{workload}.json"
                )
        finally:
            uring.destroy()
    yield out


def without_statements(summary: Summary) -> Summary:
    """The same window as a server without pg_stat_statements reports it."""
    assert summary.workload is not None
    return replace(summary, workload=replace(summary.workload, statements=None))


def table(runs: dict[tuple[str, str], Run]) -> list[tuple[str, str, float, float, str]]:
    """Every server against 17, per workload and basis: (server, workload, pgbench ratio,
    report time_ratio, basis)."""
    rows = []
    for (name, workload), run in runs.items():
        if name in ("17", "18 slow reads"):
            continue
        base = runs[("17", workload)]
        pg_ratio = run.latency / base.latency
        for before, after in (
            (base.summary, run.summary),
            (without_statements(base.summary), without_statements(run.summary)),
        ):
            cmp = judge(after, LIMITS, before).workload
            assert cmp is not None, (name, workload)
            rows.append((name, workload, pg_ratio, cmp.time_ratio, cmp.basis))
    print(
        "\n".join(
            f"{r[0]:>12} {r[1]:>5}  pgbench {r[2]:.2f}  report {r[3]:.2f} ({r[4]})" for r in rows
        )
    )
    return rows


def test_report_agrees_with_pgbench_on_faster_or_slower(runs: dict[tuple[str, str], Run]):
    rows = table(runs)
    bases = {(r[0], r[1]): set() for r in rows}
    for name, workload, pg_ratio, ratio, basis in rows:
        bases[(name, workload)].add(basis)
        if abs(math.log(pg_ratio)) > math.log(MOVED):
            assert (ratio > 1) == (pg_ratio > 1), (name, workload, basis, pg_ratio, ratio)
        if workload == "scan":
            assert 1 / 1.2 <= ratio / pg_ratio <= 1.2, (name, basis, pg_ratio, ratio)
    # Statements where both windows had pg_stat_statements; DB time where one did not.
    assert bases[("18 worker", "scan")] == {STATEMENTS, DB_TIME}
    assert bases[("18 sync", "scan")] == {DB_TIME}


def test_without_pg_stat_statements_the_report_says_so_and_works(
    runs: dict[tuple[str, str], Run],
):
    doc = json.loads(runs[("18 sync", "scan")].saved.read_text())
    assert doc["workload"]["statements"] is None
    assert "pg_stat_statements" in " ".join(doc["not_visible"])
    assert doc["verdict"]["workload"].startswith("DB time per transaction")
    assert doc["reads"]["total"]["reads"] > 0


def test_slow_reads_are_a_workload_regression(runs: dict[tuple[str, str], Run]):
    slow, base = runs[("18 slow reads", "scan")], runs[("17", "scan")]
    assert slow.latency / base.latency > LIMITS.workload_regression_factor * 1.2, "no slowdown"
    report = judge(slow.summary, LIMITS, base.summary)
    found = {f.id: f for f in report.findings}
    regression = found["workload_regression"]
    assert regression.evidence["read_wait_grew"] is True
    (listed, *_) = regression.evidence["statements"]
    assert "aio_demo" in listed["text"]
    assert report.verdict.workload.startswith("Slower")


def test_a_faster_workload_is_never_a_regression(runs: dict[tuple[str, str], Run]):
    checked = 0
    for (name, workload), run in runs.items():
        base = runs[("17", workload)]
        if name == "17" or run.latency / base.latency >= 1 / MOVED:
            continue
        report = judge(run.summary, LIMITS, base.summary)
        assert "workload_regression" not in {f.id for f in report.findings}
        assert not [
            f
            for f in report.findings
            if f.severity in ("warning", "critical") and f.id == "read_latency_regression"
        ]
        checked += 1
    assert checked, "no server ran faster than 17 here"


def test_compare_names_the_fastest(runs: dict[tuple[str, str], Run]):
    names = [
        "17",
        "18 worker",
        "18 io_uring" if ("18 io_uring", "scan") in runs else "18 slow reads",
    ]
    chosen = [runs[(n, "scan")] for n in names]
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "compare", "--format", "json"]
        + [str(r.saved) for r in chosen],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    doc = json.loads(result.stdout)
    by_pgbench = sorted(chosen, key=lambda r: r.latency)
    text = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "compare", *[str(r.saved) for r in chosen]],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    print(text)
    assert doc["fastest"] == str(by_pgbench[0].saved), [(r.saved.name, r.latency) for r in chosen]
    assert "Fastest:" in text

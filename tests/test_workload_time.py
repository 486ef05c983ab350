"""Workload time judged by pgbench, PostgreSQL's own client: the issue-22 table remade on real
servers. The same data (a 32 MB table, shared_buffers 16 MB) on 17.10 and on 18.6 with io_method
worker and sync (and io_uring where scripts/build-postgres-io-uring.py built it); two closed-loop
workloads, sequential scans (2 clients) and index probes (4 clients, on storage answering each
read in 0.3 ms on every server), each run once per server under pgbench while
`pg-aio-exporter report --save` watches; pgbench's latency is taken from its per-second log
over the report's window.

Whenever pgbench's latency moved by more than 1.15x, the report's time_ratio must point the same
way (by statements and by DB time per transaction), and for scans and probes alike lie within
20% of pgbench's ratio, unless its 90% interval says it cannot tell (it holds pgbench's ratio,
and 1 too for the direction: an undecided answer states no direction, issue 31); that interval
holds pgbench's ratio in 9 rows of 10 and never claims faster or slower against pgbench's way
(moved by more than 1.15x); read slowed per read (the
shim) on 18 is a workload_regression; a faster workload is never called a regression; `compare`
names the fastest, or none when the margins overlap. Ratios, never absolute times: the machine
is loaded, and pgbench and the report see the same window.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg
import pytest

import pgbins
from harness import terminate_for_stderr
from pg_aio_exporter import thresholds
from pg_aio_exporter.demo import iouring
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import ROWS_PER_MB, create_table
from pg_aio_exporter.report import reload
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.summary import Summary
from pg_aio_exporter.report.workload import DB_TIME, STATEMENTS, compare_workload
from pgbench_judge import PROGRESS
from slowread import SlowReads

TABLE_MB = 32
SETTINGS = {
    "shared_buffers": "16MB",
    "track_io_timing": "on",
    "max_connections": "20",
    "max_parallel_workers_per_gather": "0",  # the clients' own reads, as in the issue
    "shared_preload_libraries": "pg_stat_statements",
}
# Index probes: 8 random keys, each the start of PROBE_STRIDES keys spread over the table (a
# prime stride apart), looked up by the primary key in one statement: 80 rows on pages
# scattered over a table twice shared_buffers, on storage that answers each read in
# PROBE_READ_US (the shim, on every server alike). A transaction is then ~20-25 ms, the server's
# statement time 0.89-0.97 of pgbench's latency. From the page cache it was not: 8 rows took
# 0.1-0.5 ms and pgbench's latency moved 1.39-1.75x between runs while the server's time moved
# <5%; 200 rows (4-9 ms) were still only 0.42-0.50 server time (docs/report.md). The keys are a
# list of parameters, which 18 squashes and 17 does not, matched all the same.
PROBES = 8
PROBE_STRIDES = 10
PROBE_READ_US = 300
# workload -> (pgbench script, clients, the report's --sample-interval). Scans: the default
# 1 s, so that the report's own transactions (one per sample) stay few next to the scans' (a
# few a second). Probes: 100 ms, so that DB time sees their four sessions in 100 samples, not
# 10; their thousands of transactions dwarf the report's hundred.
SCRIPTS = {
    "scan": ("SELECT sum(length(payload)) FROM aio_demo;\n", 2, "1s"),
    "probe": (
        "".join(f"\\set k{i} random(1, {TABLE_MB * ROWS_PER_MB})\n" for i in range(PROBES))
        + "SELECT sum(length(payload)) FROM aio_demo WHERE id IN (SELECT 1 + (k + g * 7919) % "
        + f"{TABLE_MB * ROWS_PER_MB} FROM unnest(ARRAY["
        + ", ".join(f":k{i}" for i in range(PROBES))
        + f"]) AS k, generate_series(0, {PROBE_STRIDES - 1}) AS g);\n",
        4,
        "100ms",
    ),
}
READ_US = {"scan": 0, "probe": PROBE_READ_US}  # the storage each workload runs on
RATES: dict[str, int] = {}  # workload -> pgbench -R (transactions/s); absent: closed loop
REPORT_SECONDS = 10
PGBENCH_LIMIT = 60  # stopped when the report is done
MOVED = 1.15
MATCHED = 1.2  # the report's time_ratio within 20% of pgbench's latency ratio
SLOW_READ_US = 3000
LIMITS = thresholds.load()


@dataclass
class Run:
    # pgbench's latency average (s), the time its clients waited for the server: under -R,
    # pgbench's own figure less its schedule lag (below)
    latency: float
    saved: Path
    summary: Summary
    lag: float = 0.0  # pgbench's schedule lag average (s), -R only


def pgbench(
    server: LocalServer, script: Path, clients: int, rate: int | None = None, limit: float = 0
) -> subprocess.Popen[str]:
    """pgbench reporting its latency every second, stamped (stderr): closed loop, or `rate`
    transactions a second; stopped by the caller, or after PGBENCH_LIMIT + `limit` seconds."""
    return subprocess.Popen(
        [
            str(pgbins.bin_dir("18") / "pgbench"),
            *("-n", "-f", str(script), "-c", str(clients), "-j", str(clients)),
            *("-T", str(round(PGBENCH_LIMIT + limit))),
            *(("-R", str(rate)) if rate is not None else ()),
            *("--progress=1", "--progress-timestamp", server.dsn()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def latency_over(progress: str, started: float, ended: float) -> tuple[float, float]:
    """pgbench's mean latency and schedule lag (s) over the seconds the report's window
    covered, from its progress lines (`progress: <epoch> s, <tps> tps, lat <ms> ms ..., lag <ms>
    ms`, each about the second before its stamp). The latency is the time its clients waited
    for the server: under -R pgbench measures from each transaction's scheduled start, so its
    own figure holds the lag (how late its threads sent it: on busy cores, most of it), which
    no server sees; the lag is taken out. Without -R there is no lag."""
    count = total = lag = 0.0
    for m in PROGRESS.finditer(progress):
        stamp, tps, latency_ms = map(float, m.groups()[:3])
        if started + 1 <= stamp <= ended + 0.5:
            late = float(m[4] or 0)
            count += tps
            total += tps * (latency_ms - late)
            lag += tps * late
    assert count > 0, f"pgbench ran no transaction within {started}..{ended}: {progress}"
    return total / count / 1000, lag / count / 1000


def measure(
    server: LocalServer,
    workload: str,
    saved: Path,
    seconds: float = REPORT_SECONDS,
    baseline: Path | None = None,
) -> Run:
    """pgbench and the report over the same seconds: pgbench runs around the report's window
    and its latency is taken over that window alone. `baseline`: a saved report the report is
    judged against (`--baseline`), its judgement in the saved file."""
    sql, clients, sample_interval = SCRIPTS[workload]
    return measure_script(
        server,
        (sql, clients, sample_interval),
        saved,
        seconds,
        RATES.get(workload),
        baseline=baseline,
    )


def measure_script(
    server: LocalServer,
    script_run: tuple[str, int, str],
    saved: Path,
    seconds: float = REPORT_SECONDS,
    rate: int | None = None,
    *,
    baseline: Path | None = None,
) -> Run:
    """measure() of a pgbench script of its own: (sql, clients, the report's --sample-interval)."""
    sql, clients, sample_interval = script_run
    script = saved.with_suffix(".sql")
    script.write_text(sql)
    bench = pgbench(server, script, clients, rate, seconds)
    try:
        result = subprocess.run(
            [
                *(sys.executable, "-m", "pg_aio_exporter", "report", "--dsn", server.dsn()),
                *("--duration", f"{seconds:g}s", "--sample-interval", sample_interval),
                *("--save", str(saved), "--format", "json"),
                *(("--baseline", str(baseline)) if baseline is not None else ()),
            ],
            capture_output=True,
            text=True,
            timeout=90 + seconds,
            check=False,
        )
    finally:
        # tests/test_demo.py runs this under a parent that ignores SIGINT, as `nohup ... &`.
        progress = terminate_for_stderr(bench)
    assert result.returncode == 0, result.stderr
    summary = reload.load_baseline(str(saved))
    latency, lag = latency_over(progress, summary.started_at, summary.ended_at)
    return Run(latency, saved, summary, lag)


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


def measure_workloads(
    server: LocalServer, shim: SlowReads, name: str, root: Path, against: str | None = None
) -> dict[tuple[str, str], Run]:
    """(name, workload) -> its run, for each workload of SCRIPTS on its storage (READ_US), the
    report saved as root/<name>-<workload>.json; `against`: the name of the runs whose saved
    reports are each workload's --baseline."""
    out = {}
    for workload in SCRIPTS:
        shim.set_delay(READ_US[workload])
        saved = root / f"{name}-{workload}.json"
        base = None if against is None else root / f"{against}-{workload}.json"
        out[(name, workload)] = measure(server, workload, saved, baseline=base)
    return out


def test_pgbench_stops_when_the_report_is_done(pg18: LocalServer, tmp_path: Path) -> None:
    """measure() on the suite's server: pgbench, started for PGBENCH_LIMIT seconds, is stopped
    as soon as the report's window ends, and its latency over that window is read."""
    started = time.monotonic()
    run = measure(pg18, "scan", tmp_path / "scan.json")
    assert run.latency > 0
    assert time.monotonic() - started < PGBENCH_LIMIT, "pgbench ran to its own -T"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Run]]:
    """(server, workload) -> its run. Servers: '17', '18 worker', '18 sync' (pg_stat_statements
    dropped: the report's path without the extension), '18 io_uring' where built, scans only
    (that build has no pg_stat_statements, and its reads bypass the shim), and '18 slow reads'
    (worker, SLOW_READ_US per read: the true regression)."""
    root = tmp_path_factory.mktemp("workload")
    out: dict[tuple[str, str], Run] = {}
    seventeen, slow17 = start(pgbins.bin_dir("17"))
    try:
        out |= measure_workloads(seventeen, slow17, "17", root)
    finally:
        seventeen.destroy()
    eighteen, shim = start(pgbins.bin_dir("18"), io_method="worker")
    try:
        for workload in SCRIPTS:
            shim.set_delay(READ_US[workload])
            out[("18 worker", workload)] = measure(eighteen, workload, root / f"w-{workload}.json")
        shim.set_delay(SLOW_READ_US)
        for workload in SCRIPTS:
            saved = root / f"slow-{workload}.json"
            out[("18 slow reads", workload)] = measure(eighteen, workload, saved)
        eighteen.configure({"io_method": "sync"})
        eighteen.restart()
        with psycopg.connect(eighteen.dsn(), autocommit=True) as conn:
            conn.execute("DROP EXTENSION pg_stat_statements")
        for workload in SCRIPTS:
            shim.set_delay(READ_US[workload])
            out[("18 sync", workload)] = measure(eighteen, workload, root / f"s-{workload}.json")
    finally:
        eighteen.destroy()
    if iouring.builds():
        # The io_uring build has no contrib: no pg_stat_statements, DB time only.
        uring, _ = start(iouring.bin_dir(), statements=False, io_method="io_uring")
        try:
            out[("18 io_uring", "scan")] = measure(uring, "scan", root / "u-scan.json")
        finally:
            uring.destroy()
    yield out


def without_statements(summary: Summary) -> Summary:
    """The same window as a server without pg_stat_statements reports it."""
    assert summary.workload is not None
    return replace(summary, workload=replace(summary.workload, statements=None))


Row = tuple[str, str, float, float, str, tuple[float, float]]


def table(runs: dict[tuple[str, str], Run]) -> list[Row]:
    """Every server's runs against 17's of the same workload, per basis: (server, workload,
    pgbench ratio, report time_ratio, basis, its 90% interval). Printed with each run's server
    time per transaction against pgbench's latency over the same window (by statements, by DB
    time): the share of pgbench's latency the server saw."""
    rows = []
    for (name, workload), run in runs.items():
        # Slowed scans take seconds each: a few in a window, too few for DB time per
        # transaction (test_slow_reads_are_a_workload_regression judges them).
        if name == "17" or (name, workload) == ("18 slow reads", "scan"):
            continue
        base = runs[("17", workload)]
        pg_ratio = run.latency / base.latency
        for before, after in (
            (base.summary, run.summary),
            (without_statements(base.summary), without_statements(run.summary)),
        ):
            cmp = judge(after, LIMITS, before).workload
            assert cmp is not None, (name, workload)
            rows.append((name, workload, pg_ratio, cmp.time_ratio, cmp.basis, cmp.interval))
    print(
        "\n".join(
            f"{r[0]:>12} {r[1]:>5}  pgbench {r[2]:.2f}  report {r[3]:.2f}"
            f" ({r[5][0]:.2f}-{r[5][1]:.2f}, {r[4]})"
            for r in rows
        )
    )
    for (name, workload), run in runs.items():
        work = run.summary.workload
        assert work is not None
        print(
            f"{name:>13} {workload:>5}  pgbench {run.latency * 1000:.2f} ms;"
            f" server/pgbench: statements {(work.seconds_per_call or 0) / run.latency:.2f},"
            f" DB time {(work.db_time_per_transaction or 0) / run.latency:.2f}"
            f" ({work.client_sessions or 0:.2f} sessions, {work.transactions or 0:.0f}"
            f" transactions in {work.seconds:.1f} s)"
        )
    return rows


def test_report_agrees_with_pgbench_on_faster_or_slower(runs: dict[tuple[str, str], Run]) -> None:
    rows = table(runs)
    off: list[tuple[str, str, str, float, float]] = []
    bases: dict[tuple[str, str], set[str]] = {(r[0], r[1]): set() for r in rows}
    outside = []
    for name, workload, pg_ratio, ratio, basis, (low, high) in rows:
        bases[(name, workload)].add(basis)
        if not low <= pg_ratio <= high:
            outside.append((name, workload, basis, round(pg_ratio, 2), round(low, 2), high))
        # A claim of faster or slower (the interval clear of 1) never against pgbench's way.
        assert not (high < 1 < pg_ratio / MOVED or low > 1 > pg_ratio * MOVED), (
            name,
            workload,
            basis,
            pg_ratio,
            (low, high),
        )
        # The point value's side of 1 where pgbench moved by more than 1.15x, unless the
        # interval holds both 1 and pgbench's ratio: that answer is "About as fast (low-high)",
        # which states no direction (issue 31: only an interval beyond 1 by its half-width
        # claims one, and a claim is checked just above). DB time per transaction of 10 s scan
        # windows sampled once a second is such an answer (±70%): one sample between two of a
        # client's scans is 5% of a window's DB time, and the counts' lag at the window's ends
        # several percent of its ~60 transactions (CI of 730e813: 0.79 by pgbench, 1.00
        # (0.56-1.72) by DB time).
        holds = low <= pg_ratio <= high
        if abs(math.log(pg_ratio)) > math.log(MOVED) and not (holds and low <= 1 <= high):
            assert (ratio > 1) == (pg_ratio > 1), (name, workload, basis, pg_ratio, ratio)
        # Every row within 20% of pgbench, by statements and by DB time per transaction, or
        # saying by its interval that it cannot be that close (the interval holds pgbench's
        # ratio): the probes are milliseconds of server time (pgbench's own share ~10%), and
        # the report's own transactions are counted exactly (pg_stat_database.own_flush). What
        # is left is the workload's counts reaching pg_stat_database up to a second late at
        # either end of the window, and the samples' view of DB time.
        if not 1 / MATCHED <= ratio / pg_ratio <= MATCHED and not holds:
            off.append((name, workload, basis, round(pg_ratio, 2), round(ratio, 2)))
    assert not off, off
    # The 90% interval holds pgbench's ratio in 9 of 10 rows (one row in 10, rounded up, may
    # fall outside: bench/workload_margin.py judges it over many pairs, docs/report.md).
    assert len(outside) <= math.ceil(len(rows) / 10), outside
    # Statements where both windows had pg_stat_statements; DB time where one did not.
    assert bases[("18 worker", "scan")] == {STATEMENTS, DB_TIME}
    assert bases[("18 sync", "scan")] == {DB_TIME}


def test_without_pg_stat_statements_the_report_says_so_and_works(
    runs: dict[tuple[str, str], Run],
) -> None:
    doc = json.loads(runs[("18 sync", "scan")].saved.read_text())
    assert doc["workload"]["statements"] is None
    # An extension left out is a choice, not a view the report failed to read: the workload
    # says why it has no statements, and the verdict names its basis and that reason.
    assert "pg_stat_statements" not in " ".join(doc["not_visible"])
    assert doc["workload"]["statements_note"]
    assert "pg_stat_statements" in doc["verdict"]["workload"]
    assert doc["verdict"]["workload"].startswith("DB time per transaction")
    assert doc["reads"]["total"]["reads"] > 0


@pytest.mark.parametrize("workload", SCRIPTS)
def test_slow_reads_are_a_workload_regression(
    runs: dict[tuple[str, str], Run], workload: str
) -> None:
    slow, base = runs[("18 slow reads", workload)], runs[("17", workload)]
    assert slow.latency / base.latency > LIMITS.workload_regression_factor * 1.2, "no slowdown"
    report = judge(slow.summary, LIMITS, base.summary)
    found = {f.id: f for f in report.findings}
    regression = found["workload_regression"]
    assert regression.evidence["read_wait_grew"] is True
    (listed, *_) = regression.evidence["statements"]
    assert "aio_demo" in listed["text"]
    assert report.verdict.workload.startswith("Slower")


def test_a_faster_workload_is_never_a_regression(runs: dict[tuple[str, str], Run]) -> None:
    """Every ordered pair of runs of one workload (slowed reads aside) in which pgbench found one
    faster by more than 1.15x: no workload_regression, and no warning on read wait unless the
    report could not tell the workloads apart and says so (issue 49: a read-wait regression is
    demoted only where "not slower" is shown beyond the margin)."""
    checked = 0
    for (name, workload), run in runs.items():
        for (other, other_workload), base in runs.items():
            if "slow" in name + other or other_workload != workload or other == name:
                continue
            if run.latency / base.latency >= 1 / MOVED:
                continue
            report = judge(run.summary, LIMITS, base.summary)
            found = {f.id: f for f in report.findings}
            assert "workload_regression" not in found, (name, other, workload)
            wait = found.get("read_latency_regression")
            if wait is not None and wait.severity != "info":
                compared = report.workload
                assert compared is not None and compared.claim is None, (name, other)
                assert "undecided" in wait.summary, (name, other)
            checked += 1
    assert checked, "pgbench found no run faster than another"


def test_compare_names_the_fastest(runs: dict[tuple[str, str], Run]) -> None:
    """Every saved scan report side by side. pgbench's fastest is named, or one pgbench could not
    tell from it (within 1.15x: on a loaded machine two io_methods can tie); never the slowed
    one. Or none, when the margins overlap: then pgbench's ratio of its two fastest lies within
    the report's interval of that pair."""
    chosen = [run for (_, workload), run in runs.items() if workload == "scan"]
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "compare", "--format", "json"]
        + [str(r.saved) for r in chosen],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    fastest = json.loads(result.stdout)["fastest"]
    text = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "compare", *[str(r.saved) for r in chosen]],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    print(text)
    if fastest is None:
        # Undecided: the margins overlap. Then pgbench's fastest against its second lies within
        # the report's interval of that pair: the report could not tell what pgbench told.
        first, second = sorted(chosen, key=lambda r: r.latency)[:2]
        cmp = compare_workload(
            second.summary.workload, first.summary.workload, LIMITS.min_matched_statement_share
        )
        assert cmp is not None
        low, high = cmp.interval
        assert low <= first.latency / second.latency <= high, (first.saved, second.saved, low)
        assert "Fastest: undecided" in text
        return
    named = next(r for r in chosen if str(r.saved) == fastest)
    best = min(r.latency for r in chosen)
    assert named.latency <= best * MOVED, [(r.saved.name, r.latency) for r in chosen]
    assert named is not runs[("18 slow reads", "scan")]
    assert f"Fastest: {chr(ord('A') + chosen.index(named))} " in text


def test_probes_match_across_versions(runs: dict[tuple[str, str], Run]) -> None:
    """The probes' list of 8 keys is `ARRAY[$1, ..., $8]` on 17 and squashed on 18: one
    statement in both windows."""
    before, after = (runs[(name, "probe")].summary.workload for name in ("17", "18 worker"))
    assert before is not None and after is not None
    assert before.statements and after.statements
    probe = {k for k, s in after.statements.items() if "aio_demo WHERE id IN" in (s.text or "")}
    assert probe and probe <= set(before.statements)

"""Workload time's 90% interval judged by pgbench over repeated runs (issue 31).

The servers and workloads of tests/test_workload_time.py (a 32 MB table, shared_buffers 16 MB,
pg_stat_statements loaded; scans by 2 clients, index probes by 4 on storage answering each read
in 0.3 ms), plus light OLTP: 2 clients at a fixed rate (`pgbench -R`) looking up one row each,
and TPC-B: pgbench's own transaction (scale 2), 3 clients in a closed loop.
Every workload runs --pairs times on each server under pgbench while `report --save` watches the
same seconds. Pairs (the i-th run of each side), by statements and by DB time per transaction
(the same windows without their statements, as a server without pg_stat_statements reports):

- 17 -> 18 worker and 17 -> 18 sync (scans, probes, light OLTP), 18 worker -> 18 sync;
- 18 worker -> 18 worker with reads slowed (--slow-us per read, probes);
- 18 worker -> 18 worker again (A/A: nothing changed; runs 1-2, 3-4, ...).

pgbench's latency is the time its clients waited for the server: under -R, its own figure less
its schedule lag (test_workload_time.latency_over), logged apart.

For each case and basis: how often pgbench's latency ratio falls inside the report's 90%
interval, how often pgbench moved by more than the margin (the interval's half-width), how often
the report claims faster or slower where pgbench moved less than the margin or the other way, and
the median half-width. Prints one markdown
table (docs/report.md keeps the last one) and writes every pair to --out as JSON lines.

Usage: python bench/workload_margin.py [--pairs 10] [--seconds 10] [--cases scan,probe,light,tpcb]
    [--sides "17,18 worker,18 slow reads,18 sync"] [--probe-clients 4]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pgbins
import test_workload_time as wt
from pg_aio_exporter import thresholds
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import ROWS_PER_MB
from pg_aio_exporter.report import reload
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.workload import STATEMENTS
from slowread import SlowReads

LIGHT_RATE = 20  # transactions per second, over 2 clients
wt.SCRIPTS["light"] = (
    f"\\set k random(1, {wt.TABLE_MB * ROWS_PER_MB})\n"
    "SELECT length(payload) FROM aio_demo WHERE id = :k;\n",
    2,
    "100ms",
)
wt.RATES["light"] = LIGHT_RATE
wt.READ_US["light"] = wt.PROBE_READ_US
# pgbench's built-in tpcb-like transaction, written out: a -f script gets no :scale.
TPCB_SCALE = 2
wt.SCRIPTS["tpcb"] = (
    f"\\set aid random(1, {100000 * TPCB_SCALE})\n"
    f"\\set bid random(1, {TPCB_SCALE})\n"
    f"\\set tid random(1, {10 * TPCB_SCALE})\n"
    "\\set delta random(-5000, 5000)\n"
    "BEGIN;\n"
    "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n"
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
    "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;\n"
    "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;\n"
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)"
    " VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n"
    "END;\n",
    3,
    "100ms",  # thousands of short transactions, as the probes
)
wt.READ_US["tpcb"] = 0
SIDES = ("17", "18 worker", "18 slow reads", "18 sync")
LIMITS = thresholds.load()

Runs = dict[tuple[str, str], list[wt.Run]]


@contextmanager
def server(
    bin_dir: Path, workloads: list[str], **settings: str
) -> Iterator[tuple[LocalServer, SlowReads]]:
    srv, shim = wt.start(bin_dir, **settings)
    try:
        if "tpcb" in workloads:
            subprocess.run(
                [
                    *(str(pgbins.bin_dir("18") / "pgbench"), "-i", "-q"),
                    *("-s", str(TPCB_SCALE), srv.dsn()),
                ],
                check=True,
                capture_output=True,
            )
        yield srv, shim
    finally:
        srv.destroy()


def repeat(
    srv: LocalServer, shim: SlowReads, name: str, workloads: list[str], *, args: Any, out: Path
) -> Runs:
    runs: Runs = {}
    for i in range(args.pairs):
        for workload in workloads:
            shim.set_delay(wt.READ_US[workload] if name != "18 slow reads" else args.slow_us)
            saved = out / f"{name.replace(' ', '-')}-{workload}-{i}.json"
            run = wt.measure(srv, workload, saved, args.seconds)
            runs.setdefault((name, workload), []).append(run)
            load = os.getloadavg()[0]
            # Each run as it ends, so that a partial bench can still be judged (--judge).
            with (out / RUNS).open("a") as log:
                row = [name, workload, run.latency, saved.name, load, run.lag]
                log.write(json.dumps(row) + "\n")
            ms, lag = run.latency * 1000, run.lag * 1000
            print(
                f"  {name} {workload} #{i}: pgbench {ms:.2f} ms (lag {lag:.2f} ms),"
                f" load {load:.1f}",
                flush=True,
            )
    return runs


RUNS = "runs.jsonl"


def reread(out: Path) -> tuple[Runs, dict[Path, float]]:
    """The runs a bench (perhaps unfinished) logged in `out`, and the load average at each."""
    runs: Runs = {}
    loads: dict[Path, float] = {}
    for line in (out / RUNS).read_text().splitlines():
        # The schedule lag (-R) is logged since the latency was taken without it.
        name, workload, latency, saved, load, *lag = json.loads(line)
        path = out / saved
        runs.setdefault((name, workload), []).append(
            wt.Run(latency, path, reload.load_baseline(str(path)), *lag)
        )
        loads[path] = load
    return runs, loads


def measure_all(args: Any, out: Path) -> Runs:
    workloads = args.cases.split(",")
    sides = set(args.sides.split(","))
    runs: Runs = {}
    if "17" in sides:
        with server(pgbins.bin_dir("17"), workloads) as (srv, shim):
            runs |= repeat(srv, shim, "17", workloads, args=args, out=out)
    with server(pgbins.bin_dir("18"), workloads, io_method="worker") as (srv, shim):
        if "18 worker" in sides:
            runs |= repeat(srv, shim, "18 worker", workloads, args=args, out=out)
        if "probe" in workloads and "18 slow reads" in sides:
            runs |= repeat(srv, shim, "18 slow reads", ["probe"], args=args, out=out)
        if "18 sync" in sides:
            srv.configure({"io_method": "sync"})
            srv.restart()
            runs |= repeat(srv, shim, "18 sync", workloads, args=args, out=out)
    return runs


CASES = (
    ("17", "18 worker"),
    ("17", "18 sync"),
    ("18 worker", "18 sync"),
    ("18 worker", "18 slow reads"),
)


def pairs(runs: Runs) -> Iterator[tuple[str, str, wt.Run, wt.Run]]:
    """(case, workload, before, after) for every pair the runs allow."""
    for before_name, after_name in CASES:
        for (name, workload), after in runs.items():
            before = runs.get((before_name, workload))
            if name == after_name and before is not None:
                for then, now in zip(before, after, strict=False):
                    yield f"{before_name} -> {after_name}", workload, then, now
    for (name, workload), same in runs.items():
        if name == "18 worker":
            for then, now in zip(same[::2], same[1::2], strict=False):
                yield "18 worker A/A", workload, then, now


def judged(before: wt.Run, after: wt.Run, with_statements: bool) -> dict[str, Any] | None:
    then, now = before.summary, after.summary
    if not with_statements:
        then, now = wt.without_statements(then), wt.without_statements(now)
    cmp = judge(now, LIMITS, then).workload
    if cmp is None or (with_statements and cmp.basis != STATEMENTS):
        return None  # no basis, or the statements' share of DB time too low: DB time's row
    low, high = cmp.interval
    pg = after.latency / before.latency
    margin = math.log(high / low) / 2  # the stated interval's half-width, in the log
    claim = "faster" if cmp.margin.faster else "slower" if cmp.margin.slower else None
    return {
        "basis": cmp.basis,
        "pgbench": pg,
        "report": cmp.time_ratio,
        "interval": [low, high],
        "held": low <= pg <= high,
        "claim": claim,
        # A claim where pgbench moved less than the margin, or the other way.
        "overclaim": claim is not None and abs(math.log(pg)) < margin,
        "wrong_way": (claim == "faster" and pg >= 1) or (claim == "slower" and pg <= 1),
        # pgbench moved by more than the margin: a claim would be true.
        "beyond": abs(math.log(pg)) >= margin,
        "half_width": math.exp(margin) - 1,
    }


def table(rows: list[dict[str, Any]]) -> str:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["case"], row["workload"], row["basis"]), []).append(row)
    lines = [
        "| case | workload | basis | pairs | pgbench inside | pgbench beyond the margin | claims |"
        " claims under the margin | wrong way | median ± | median pgbench | median report | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (case, workload, basis), group in sorted(groups.items()):
        loads = sorted(x for r in group for x in r["load"])
        lines.append(
            f"| {case} | {workload} | {basis} | {len(group)}"
            f" | {sum(r['held'] for r in group)}/{len(group)}"
            f" | {sum(r['beyond'] for r in group)}"
            f" | {sum(r['claim'] is not None for r in group)}"
            f" | {sum(r['overclaim'] for r in group)}"
            f" | {sum(r['wrong_way'] for r in group)}"
            f" | {statistics.median(r['half_width'] for r in group) * 100:.0f}%"
            f" | {statistics.median(r['pgbench'] for r in group):.2f}"
            f" | {statistics.median(r['report'] for r in group):.2f}"
            f" | {loads[0]:.1f}-{loads[-1]:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cases", default="scan,probe,light")
    parser.add_argument(
        "--sides", default=",".join(SIDES), help=f"the servers measured, of {', '.join(SIDES)}"
    )
    parser.add_argument(
        "--probe-clients", type=int, default=wt.SCRIPTS["probe"][1], help="the probes' clients"
    )
    parser.add_argument("--slow-us", type=int, default=wt.SLOW_READ_US)
    parser.add_argument("--keep", type=Path, default=Path("workload_margin"), help="runs' reports")
    parser.add_argument("--judge", action="store_true", help="judge the runs kept, measure none")
    parser.add_argument("--out", type=Path, default=Path("workload_margin.jsonl"))
    args = parser.parse_args()
    sql, _, sample_interval = wt.SCRIPTS["probe"]
    wt.SCRIPTS["probe"] = (sql, args.probe_clients, sample_interval)
    if not args.judge:
        args.keep.mkdir(parents=True, exist_ok=False)
        measure_all(args, args.keep)
    runs, loads = reread(args.keep)
    rows = []
    for case, workload, before, after in pairs(runs):
        for with_statements in (True, False):
            row = judged(before, after, with_statements)
            if row is not None:
                load = [loads[before.saved], loads[after.saved]]
                rows.append({"case": case, "workload": workload, **row, "load": load})
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(table(rows))


if __name__ == "__main__":
    main()

"""PostgreSQL-side cost of the exporter's sampler and poller, at 10, 100 and 500 sessions.

For each session count, the real exporter runs against a real PostgreSQL 18 once with only the
sampler active (sample 100ms, poll 1h), once with only the poller active (poll 1s, sample
60s), and once more polling without the pg_stat_wal and checkpointer collectors (what the
write side's reads add). Two independent measures of the server's work per sample / per poll:

- execution + planning time of the exporter's statements from pg_stat_statements;
- CPU time of the exporter's backend process (the scheduler's nanosecond sum from
  /proc/PID/sched: protocol, parsing, execution), divided by the number of samples / polls.

Then the floors, to tell what the exporter adds from what PostgreSQL charges anyway: the backend
CPU of one round trip of a few prepared statements, from `SELECT 1` to the sampler's own two,
run 200 times each (20 ms apart, like a sampler's isolated round trips), medians.

Sessions: N connections held open by this script, a tenth of them running a query in a loop
(active, so the grouping sees a realistic mix), the rest idle.

Usage: python bench/server_cost.py [--sessions 10 100 500] [--seconds 20] [--rounds 3]
Prints markdown tables (medians over --rounds runs): per sample and per poll, then what one
poll interval at the defaults costs the server (one poll + 30 samples), to set against one
scrape of a peer exporter (bench/scrape.py measures those).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import psycopg
from common import load, machine, run_seconds

from harness import Exporter, labels
from pg_aio_exporter.collectors import (
    activity,
    checkpointer,
    pg_aios,
    pg_stat_database,
    pg_stat_wal,
    registry,
)
from pg_aio_exporter.collectors.pg_stat_statements import PgStatStatementsCollector
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.versions import PG18

MONITOR = "pgaio_monitor"  # the exporter's role: its statements are told apart by user
TARGET = labels(target="default")


class Sessions:
    def __init__(self, dsn: str, count: int) -> None:
        self._stop = threading.Event()
        self._idle = [psycopg.connect(dsn, autocommit=True) for _ in range(count - count // 10)]
        self._busy = [
            threading.Thread(target=self._loop, args=(dsn,), daemon=True)
            for _ in range(count // 10)
        ]
        for thread in self._busy:
            thread.start()

    def _loop(self, dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                conn.execute("SELECT pg_sleep(0.05)")

    def close(self) -> None:
        self._stop.set()
        for thread in self._busy:
            thread.join()
        for conn in self._idle:
            conn.close()


def measure(server: LocalServer, mode: str, seconds: float) -> dict[str, float]:
    flags = {
        "sample": ("--sample-interval", "100ms", "--poll-interval", "1h"),
        "poll": ("--sample-interval", "60s", "--poll-interval", "1s"),
        # The poll without the reads issue 23 added: the difference is their cost.
        "poll without the write side": (
            "--sample-interval",
            "60s",
            "--poll-interval",
            "1s",
            "--no-collector.pg_stat_wal",
            "--no-collector.checkpointer",
        ),
    }[mode]
    exp = Exporter("--dsn", server.dsn(user=MONITOR), *flags)
    try:
        time.sleep(1.5)  # connected, statements prepared after their first runs
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'pg_aio_exporter'"
            ).fetchone()
            assert row is not None
            pid = row[0]
            conn.execute("SELECT pg_stat_statements_reset()")
            before = exp.scrape()
            cpu_before = run_seconds(pid)
            time.sleep(seconds)
            cpu_after = run_seconds(pid)
            after = exp.scrape()
            stmt = conn.execute(
                "SELECT coalesce(sum(total_exec_time + total_plan_time), 0)"
                " FROM pg_stat_statements WHERE userid = %s::regrole",
                (MONITOR,),
            ).fetchone()
            assert stmt is not None
    finally:
        exp.stop()
    if mode == "sample":
        name = "pg_aio_sampler_samples_total"
        wall = "pg_aio_exporter_sample_duration_seconds"
        count = after[name][TARGET] - before[name][TARGET]
        wall_sum = after[wall + "_sum"][TARGET] - before[wall + "_sum"][TARGET]
    else:
        wall = "pg_aio_exporter_poll_duration_seconds"
        key = labels(target="default", collector="pg_stat_io")
        count = after[wall + "_count"][key] - before[wall + "_count"][key]
        wall_sum = after[wall + "_sum"][key] - before[wall + "_sum"][key]
    return {
        "count": count,
        "stmt_ms": float(stmt[0]) / count,
        "cpu_ms": (cpu_after - cpu_before) * 1000 / count,
        "wall_ms": wall_sum * 1000 / count,
    }


# What one round trip costs the backend, cheapest first. Each row is sent as the exporter sends
# a sample: prepared statements, pipelined.
FLOORS = {
    "SELECT 1 (a round trip)": ["SELECT 1"],
    "count(*) FROM pg_stat_get_backend_idset() (the backend status snapshot)": [
        "SELECT count(*) FROM pg_stat_get_backend_idset()"
    ],
    "count(*) FROM pg_stat_get_activity(NULL) (a row per backend)": [
        "SELECT count(*) FROM pg_stat_get_activity(NULL)"
    ],
    "the sampler's pg_stat_activity statement": [activity.SQL],
    "the sampler's pg_aios statement": [pg_aios.SQL],
    "one sample: both, pipelined": [activity.SQL, pg_aios.SQL],
    # The poll's workload-time reads (issue 22): totals without texts, and per database.
    "the poller's pg_stat_statements totals statement": [
        PgStatStatementsCollector().query(PG18) or ""
    ],
    "the poller's pg_stat_database statement": [pg_stat_database.sql(PG18)],
    "one poll: every poll statement, pipelined": [
        sql for c in registry.poll_collectors() if (sql := c.query(PG18)) is not None
    ],
    "the poll's pg_stat_wal statement (18: pg_stat_wal and pg_stat_io's wal rows)": [
        pg_stat_wal.SQL_18
    ],
    "the poll's checkpointer statement (18)": [checkpointer.SQL_17],
    "both, pipelined": [pg_stat_wal.SQL_18, checkpointer.SQL_17],
}
FLOOR_RUNS = 200


def floors(server: LocalServer) -> dict[str, float]:
    """Median backend CPU (ms) of one round trip per FLOORS entry, as the exporter's role."""
    out = {}
    with psycopg.connect(server.dsn(user=MONITOR), autocommit=True) as conn:
        pid = conn.info.backend_pid
        for number, (name, queries) in enumerate(FLOORS.items()):
            statements = []
            for i, sql in enumerate(queries):
                conn.execute(f"PREPARE floor_{number}_{i} AS {sql}")
                statements.append(f"EXECUTE floor_{number}_{i}")
            costs = []
            for _ in range(FLOOR_RUNS):
                before = run_seconds(pid)
                with conn.pipeline():
                    cursors = [conn.execute(statement) for statement in statements]
                for cursor in cursors:
                    cursor.fetchall()
                costs.append((run_seconds(pid) - before) * 1000)
                time.sleep(0.02)
            out[name] = statistics.median(costs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = LocalServer.create(
        settings={
            "max_connections": "600",
            "shared_preload_libraries": "'pg_stat_statements'",
            "pg_stat_statements.track_planning": "on",
        }
    )
    server.start()
    print(f"Machine: {machine()}\n")
    per_interval: dict[int, dict[str, dict[str, float]]] = {}
    floor_costs: dict[int, dict[str, float]] = {}
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute(f"CREATE ROLE {MONITOR} LOGIN IN ROLE pg_monitor")
        print(
            "| sessions | per | server statement time (ms) | server backend CPU (ms) |"
            " exporter round trip (ms) | n |"
        )
        print("|---|---|---|---|---|---|")
        for count in args.sessions:
            sessions = Sessions(server.dsn(), count)
            try:
                floor_costs[count] = floors(server)
                for mode in ("sample", "poll", "poll without the write side"):
                    runs = [measure(server, mode, args.seconds) for _ in range(args.rounds)]
                    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                    per_interval.setdefault(count, {})[mode] = med
                    print(
                        f"| {count} | {mode} | {med['stmt_ms']:.3f} | {med['cpu_ms']:.3f} |"
                        f" {med['wall_ms']:.3f} | {int(sum(r['count'] for r in runs))} |",
                        flush=True,
                    )
            finally:
                sessions.close()
        print("\nOne poll + 30 samples (poll 30 s, sample 1 s), server side\n")
        print("| sessions | statement time (ms) | backend CPU (ms) |")
        print("|---|---|---|")
        for count, med in per_interval.items():
            stmt, cpu = (med["poll"][k] + 30 * med["sample"][k] for k in ("stmt_ms", "cpu_ms"))
            print(f"| {count} | {stmt:.2f} | {cpu:.2f} |")
        print("\nBackend CPU of one round trip (ms), medians of 200\n")
        print(f"| statement | {' | '.join(f'{n} sessions' for n in floor_costs)} |")
        print(f"|---|{'---|' * len(floor_costs)}")
        for name in FLOORS:
            print(f"| {name} | {' | '.join(f'{c[name]:.3f}' for c in floor_costs.values())} |")
        print(f"\n{load()}")
    finally:
        server.destroy()


if __name__ == "__main__":
    main()

"""PostgreSQL-side cost of one `pg-aio-exporter report` run: the CPU time of its backend over the
whole run (connect, warm-up, window), and how many connections it opened, at 10 and 100
sessions on a real PostgreSQL 18 (the sessions of bench/server_cost.py: a tenth of them busy).

Usage: PYTHONPATH=.:tests python bench/report_cost.py [--sessions 10 100] [--duration 2m]
Prints a markdown table for docs/report.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from contextlib import suppress

import psycopg
from common import machine, run_seconds
from server_cost import Sessions

from pg_aio_exporter.config.targets import APPLICATION_NAME, parse_duration
from pg_aio_exporter.demo.server import LocalServer


def measure(server: LocalServer, duration: str) -> tuple[float, int, float]:
    """(backend CPU seconds, connections seen, wall seconds) of one report run."""
    cpu: dict[int, float] = {}
    done = threading.Event()

    def watch() -> None:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            while not done.is_set():
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                    (APPLICATION_NAME,),
                ).fetchall()
                for (pid,) in rows:
                    with suppress(OSError):  # the backend ended meanwhile
                        cpu[pid] = run_seconds(pid)
                time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    command = ["report", "--dsn", server.dsn(), "--duration", duration, "--format", "json"]
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", *command],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    done.set()
    watcher.join()
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return sum(cpu.values()), len(cpu), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--duration", default="2m")
    args = parser.parse_args()
    seconds = parse_duration(args.duration, what="--duration")
    print(f"{machine()}; report --duration {args.duration}\n")
    print("| sessions | report backend CPU | per second of window | connections |")
    print("|---|---|---|---|")
    for count in args.sessions:
        server = LocalServer.create(settings={"max_connections": str(count + 20)})
        server.start()
        sessions = Sessions(server.dsn(), count)
        try:
            cpu, connections, _ = measure(server, args.duration)
        finally:
            sessions.close()
            server.destroy()
        print(f"| {count} | {cpu * 1000:.0f} ms | {cpu / seconds * 1000:.2f} ms | {connections} |")


if __name__ == "__main__":
    main()

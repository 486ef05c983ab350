"""Soak: the real exporter against a real PostgreSQL 18 for N minutes, looking for leaks.

Sampling every second, polling every --poll-interval, a Prometheus-like scrape every
--scrape-every seconds; the demo workload (seq + index scans) is switched on and off every
--load-period minutes, and the server is restarted (fast mode) once at half time. Every minute
one row: exporter RSS, open file descriptors, threads, pg_up, samples taken, poll errors and
the slowest scrape of that minute. RSS and fds should be flat after warm-up; a leak per poll,
per sample, per reconnect or per scrape would show as a slope.

Usage: PYTHONPATH=.:tests python bench/soak.py [--minutes 60] [--poll-interval 10s] > table.md
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from harness import Exporter, labels
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table

TARGET = labels(target="default")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def count_entries(pid: int, what: str) -> int:
    return len(os.listdir(f"/proc/{pid}/{what}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--poll-interval", default="10s")
    parser.add_argument("--load-period", type=int, default=2, help="minutes on, then off")
    parser.add_argument("--scrape-every", type=float, default=5.0)
    parser.add_argument("--table-mb", type=int, default=64)
    args = parser.parse_args()

    server = LocalServer.create(settings={"shared_buffers": "16MB", "track_io_timing": "on"})
    server.start()
    create_table(server.dsn(), args.table_mb)
    exp = Exporter(
        "--dsn", server.dsn(), "--poll-interval", args.poll_interval, "--sample-interval", "1s"
    )
    pid = exp.proc.pid
    exp.wait_poll()
    workload: Workload | None = None
    restart_at = args.minutes // 2
    print(
        f"exporter pid {pid}, {args.minutes} min, restart at the start of minute {restart_at + 1}\n"
    )
    print(
        "| minute | load | RSS (MiB) | fds | threads | pg_up | samples | poll errors |"
        " slowest scrape (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    started = time.monotonic()
    try:
        # Row m is taken at the end of minute m (row 0: right after start); the load and the
        # restart apply to the minute that follows the row before.
        for minute in range(args.minutes + 1):
            load_on = minute > 0 and ((minute - 1) // args.load_period) % 2 == 1
            if load_on and workload is None:
                workload = Workload(server.dsn()).start()
            elif not load_on and workload is not None:
                workload.stop()
                workload = None
            event = ""
            if minute == restart_at + 1:
                server.restart()
                event = " + restart"
            slowest = 0.0
            end = started + 60 * minute
            while time.monotonic() < end:
                t0 = time.perf_counter()
                exp.text()
                slowest = max(slowest, time.perf_counter() - t0)
                time.sleep(min(args.scrape_every, max(0.0, end - time.monotonic())))
            if exp.proc.poll() is not None:
                raise SystemExit(f"exporter died: {exp.logs()[-2000:]}")
            samples = exp.scrape()
            errors = sum(samples.get("pg_aio_exporter_poll_errors_total", {}).values())
            print(
                f"| {minute} | {'on' if load_on else 'off'}{event} | {rss_kib(pid) / 1024:.1f} |"
                f" {count_entries(pid, 'fd')} | {count_entries(pid, 'task')} |"
                f" {samples['pg_up'][TARGET]:.0f} |"
                f" {samples['pg_aio_sampler_samples_total'][TARGET]:.0f} | {errors:.0f} |"
                f" {slowest * 1000:.1f} |",
                flush=True,
            )
    finally:
        if workload is not None:
            workload.stop()
        exp.stop()
        server.destroy()


if __name__ == "__main__":
    main()

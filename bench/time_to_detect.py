"""Time to detect, live (issue 30): the shipped rule files on real Prometheus 2 and 3 scraping the
real exporter on a real PostgreSQL 18, each incident at 15 s and at 60 s scrape and evaluation
intervals, every Prometheus fresh when its incident's watch starts.

Incidents (each on its own server, run side by side; slow storage from the LD_PRELOAD shims of
tests/, a real workload from pgbench or scanning sessions):

- slow_from_start: two sessions scan a 150 MB table, every read 4 ms from before the exporter
  and Prometheus start; one exporter as the default storage class, one as `hdd` (nothing may
  be raised there); watched until every default-class Prometheus fires something.
- fsync_slow: pgbench's TPC-B (4 clients), --healthy seconds at full speed, then every fsync
  10 ms slower; times from the slowdown.
- reads_8x: two sessions scanning at 0.5 ms per read for --read-healthy seconds, then 4 ms.
- quiet checks, after each incident on its server with fresh Prometheus: the scans at full
  speed, healthy TPC-B with a CHECKPOINT every --checkpoint-every seconds, select-only pgbench;
  no alert may even be pending for --quiet seconds.

Pending is Prometheus' own activeAt of an alert, firing the first poll (every 2 s) that saw it
firing; the table shows "pending / firing" per alert, incident, interval and Prometheus version,
from each Prometheus' start (slow_from_start and the quiet checks) or from the slowdown. Prints
markdown tables (docs/alerts.md keeps the last) and writes every watch as JSON.

Usage: python bench/time_to_detect.py [--quiet 600] [--watch 720] [--out /tmp/time_to_detect.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from common import load, machine

from harness import Exporter, scanning, terminate
from pg_aio_exporter.demo.server import LocalServer, embedded_bin_dir
from pg_aio_exporter.demo.workload import create_table
from prometheus import VERSIONS, Prometheus
from slowread import SlowReads
from slowwrite import SlowWrites
from test_writes import WRITE_SETTINGS, pgbench

ALERTS = Path(__file__).resolve().parents[1] / "alerts"
RULES = [ALERTS / "pg_aio_recording.yml", ALERTS / "pg_aio_alerts.yml"]  # as shipped
INTERVALS = ("15s", "60s")
READ_SETTINGS = {"shared_buffers": "16MB", "track_io_timing": "on"}
TABLE = "big"
POLL = 2.0  # seconds between looks at every Prometheus' alerts
EXPORTER_FLAGS: list[str] = []  # beside --dsn: none, the exporter's defaults (poll 30 s)
# What each phase looked like to the exporter (Prometheus 3 at 15 s, over the phase's {w}):
# medians and 90th percentiles of the intervals' figures, the share of intervals above the limit.
READS = {
    "ms_per_read": "quantile_over_time(0.5, pg_aio_target:read_latency_seconds:irate4m[{w}]) * 1e3",
    "ms_per_read_p90": (
        "quantile_over_time(0.9, pg_aio_target:read_latency_seconds:irate4m[{w}]) * 1e3"
    ),
    "read_kB": "quantile_over_time(0.5, pg_aio_target:read_size_bytes:irate4m[{w}]) / 1e3",
    "reads_per_s": "avg_over_time(pg_aio_target:read_ops_per_second:irate4m[{w}])",
    "slow_share": "avg_over_time(pg_aio_target:read_latency_above_limit:irate4m[{w}])",
    # Scrape intervals: all, with reads, with reads enough to be judged (the 0/1 series').
    "intervals": "count_over_time(pg_aio_target:read_ops_per_second:irate4m[{w}])",
    "with_reads": "count_over_time(pg_aio_target:read_latency_seconds:irate4m[{w}])",
    "judged": "count_over_time(pg_aio_target:read_latency_above_limit:irate4m[{w}])",
}
SYNCS = {
    "ms_per_sync": (
        "quantile_over_time(0.5, pg_aio_target:wal_sync_latency_seconds:irate4m[{w}]) * 1e3"
    ),
    "ms_per_sync_p90": (
        "quantile_over_time(0.9, pg_aio_target:wal_sync_latency_seconds:irate4m[{w}]) * 1e3"
    ),
    "syncs_per_s": "avg_over_time(pg_aio_target:wal_syncs_per_second:irate4m[{w}])",
    "slow_share": "avg_over_time(pg_aio_target:wal_sync_latency_above_limit:irate4m[{w}])",
    "intervals": "count_over_time(pg_aio_target:wal_syncs_per_second:irate4m[{w}])",
    "with_syncs": "count_over_time(pg_aio_target:wal_sync_latency_seconds:irate4m[{w}])",
    "judged": "count_over_time(pg_aio_target:wal_sync_latency_above_limit:irate4m[{w}])",
}


def wall(stamp: str) -> float:
    """Prometheus' RFC 3339 time (nanoseconds, Z) as a Unix time."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    seconds = datetime.fromisoformat(whole + "+00:00").timestamp()
    return seconds + float(f"0.{fraction or 0}")


@dataclass
class Watch:
    """One fresh Prometheus on one exporter; what it raised, as Unix times."""

    incident: str
    storage_class: str
    version: str
    interval: str
    prometheus: Prometheus
    launched: float
    pending: dict[str, float] = field(default_factory=dict)
    firing: dict[str, float] = field(default_factory=dict)

    def look(self) -> None:
        now = time.time()
        for alert in self.prometheus.alerts():
            name = alert["labels"]["alertname"]
            active = wall(alert["activeAt"])
            self.pending[name] = min(active, self.pending.get(name, active))
            if alert["state"] == "firing":
                self.firing.setdefault(name, now)

    def since(self, moment: float) -> dict[str, dict[str, float]]:
        """Seconds from `moment` to each alert's pending and firing."""
        return {
            name: {
                "pending": round(at - moment, 1),
                **({"firing": round(self.firing[name] - moment, 1)} if name in self.firing else {}),
            }
            for name, at in sorted(self.pending.items())
        }


@dataclass
class Result:
    incident: str
    storage_class: str
    version: str
    interval: str
    reference: str  # what the times count from
    watched_s: float
    alerts: dict[str, dict[str, float]]  # alert: {pending, firing} seconds from the reference
    before: list[str]  # alerts pending before the reference (in a healthy phase)
    figures: dict[str, Any]
    load: str


@dataclass
class Stacks:
    """An exporter (defaults: poll 30 s, sample 1 s) per storage class on one server, each
    scraped by a fresh Prometheus of each version at each interval."""

    incident: str
    exporters: list[Exporter]
    watches: list[Watch]

    @classmethod
    def start(cls, incident: str, dsn: str, classes: Sequence[str] = ("default",)) -> Stacks:
        exporters: list[Exporter] = []
        watches: list[Watch] = []
        for storage_class in classes:
            flags = () if storage_class == "default" else ("--storage-class", storage_class)
            exporter = Exporter("--dsn", dsn, *flags, *EXPORTER_FLAGS)
            exporters.append(exporter)
            for interval in INTERVALS:
                for version in VERSIONS:
                    launched = time.time()
                    prom = Prometheus(
                        [f"127.0.0.1:{exporter.port}"], RULES, interval=interval, version=version
                    )
                    watches.append(
                        Watch(incident, storage_class, version, interval, prom, launched)
                    )
        return cls(incident, exporters, watches)

    def look(self) -> None:
        for watch in self.watches:
            try:
                watch.look()
            except OSError as error:  # a busy Prometheus answers late: look again next time
                print(f"{self.incident}: {error}", file=sys.stderr, flush=True)

    def hold(self, seconds: float, done: Callable[[], bool] = lambda: False) -> float:
        """Looks every POLL seconds for `seconds` or until done(); the seconds it held."""
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            self.look()
            if done():
                break
            time.sleep(POLL)
        return time.monotonic() - started

    def all_fire(self) -> bool:
        return all(w.firing for w in self.watches if w.storage_class == "default")

    def figures(self, queries: dict[str, str], seconds: float) -> dict[str, float | None]:
        """`queries` over the last `seconds`."""
        prom = next(w.prometheus for w in self.watches if (w.version, w.interval) == ("3", "15s"))
        found = {}
        for name, expr in queries.items():
            try:
                result = prom.query(expr.format(w=f"{round(seconds)}s"))
            except OSError as error:  # a figure missing costs no watch its times
                print(f"{self.incident}: {name}: {error}", file=sys.stderr, flush=True)
                result = []
            found[name] = round(float(result[0]["value"][1]), 2) if result else None
        return found

    def results(
        self,
        reference: float | None,
        what: str,
        watched: float,
        figures: dict[str, Any] | None = None,
    ) -> list[Result]:
        """Times from `reference` (None: each Prometheus' own launch)."""
        found = []
        for w in self.watches:
            moment = w.launched if reference is None else reference
            before = sorted(n for n, at in w.pending.items() if at < moment)
            after = {n: t for n, t in w.since(moment).items() if n not in before}
            found.append(
                Result(
                    w.incident,
                    w.storage_class,
                    w.version,
                    w.interval,
                    what,
                    round(watched),
                    after,
                    before,
                    figures or {},
                    load(),
                )
            )
        return found

    def stop(self) -> None:
        for watch in self.watches:
            watch.prometheus.stop()
        for exporter in self.exporters:
            exporter.stop()


@contextmanager
def stacks(incident: str, dsn: str, classes: Sequence[str] = ("default",)) -> Iterator[Stacks]:
    started = Stacks.start(incident, dsn, classes)
    try:
        yield started
    finally:
        started.stop()


class Bench:
    """pgbench (4 clients, closed loop, progress every 10 s) running until stopped; its
    progress lines' tps with the time they were printed."""

    def __init__(self, dsn: str, *script: str) -> None:
        self.tps: list[tuple[float, float]] = []
        self.proc = subprocess.Popen(
            [
                str(embedded_bin_dir() / "pgbench"),
                "-c",
                "4",
                "-T",
                "36000",
                "-P",
                "10",
                *script,
                dsn,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if m := re.match(r"progress: [\d.]+ s, ([\d.]+) tps", line):
                self.tps.append((time.time(), float(m.group(1))))

    def median(self, start: float, end: float) -> float | None:
        seen = [tps for at, tps in self.tps if start <= at <= end]
        return round(statistics.median(seen)) if seen else None

    def stop(self) -> None:
        terminate(self.proc)  # type: ignore[arg-type]
        self._reader.join(10)


def read_server(table_mb: int) -> tuple[LocalServer, SlowReads]:
    server = LocalServer.create(settings=READ_SETTINGS)
    shim = SlowReads(server)
    server.start()
    create_table(server.dsn(), table_mb, TABLE)
    return server, shim


def slow_from_start(args: argparse.Namespace, results: list[Result], go: threading.Event) -> None:
    server, shim = read_server(args.table_mb)
    try:
        go.wait(args.healthy + 600)  # the TPC-B incident's healthy minutes use the CPU
        shim.set_delay(4_000)
        with scanning(server.dsn(), [TABLE, TABLE], release=lambda: shim.set_delay(0)):
            time.sleep(5)  # slow before the exporter and Prometheus start
            with stacks("slow_from_start", server.dsn(), ("default", "hdd")) as s:
                watched = s.hold(args.watch, s.all_fire)
                figures = s.figures(READS, watched)
                results += s.results(None, "Prometheus start", watched, figures)
            shim.set_delay(0)
            with stacks("quiet: scans at full speed", server.dsn()) as s:
                watched = s.hold(args.quiet)
                figures = s.figures(READS, watched)
                results += s.results(None, "Prometheus start", watched, figures)
    finally:
        server.destroy()


def fsync_slow(args: argparse.Namespace, results: list[Result], go: threading.Event) -> None:
    server = LocalServer.create(settings=WRITE_SETTINGS)
    try:
        shim = SlowWrites(server)
        server.start()
        pgbench("-i", "-s", "4", "-q", server.dsn())
        with stacks("fsync_slow", server.dsn()) as s:
            bench = Bench(server.dsn())
            try:
                s.hold(args.healthy)
                healthy = s.figures(SYNCS, args.healthy)
                slowed = time.time()
                shim.set_delay(10_000)
                go.set()
                watched = s.hold(args.watch, s.all_fire)
                figures = {
                    "healthy": healthy,
                    "slow": s.figures(SYNCS, watched),
                    "tps_healthy": bench.median(slowed - args.healthy + 20, slowed),
                    "tps_slow": bench.median(slowed + 20, time.time()),
                }
                results += s.results(slowed, "fsync slowdown", watched, figures)
            finally:
                bench.stop()
        shim.set_delay(0)
        with stacks("quiet: TPC-B with CHECKPOINTs", server.dsn()) as s:
            bench = Bench(server.dsn())
            started = time.time()
            checkpoints = 0
            try:
                while (remaining := args.quiet - (time.time() - started)) > 0:
                    s.hold(min(args.checkpoint_every, remaining))
                    if time.time() - started < args.quiet - 60:
                        with psycopg.connect(server.dsn(), autocommit=True) as conn:
                            conn.execute("CHECKPOINT")
                        checkpoints += 1
                figures = {
                    "tps": bench.median(started, time.time()),
                    "checkpoints": checkpoints,
                    **s.figures(SYNCS, time.time() - started),
                }
                results += s.results(None, "Prometheus start", time.time() - started, figures)
            finally:
                bench.stop()
    finally:
        server.destroy()


def reads_8x(args: argparse.Namespace, results: list[Result], go: threading.Event) -> None:
    server, shim = read_server(args.table_mb)
    try:
        shim.set_delay(500)
        with (
            scanning(server.dsn(), [TABLE, TABLE], release=lambda: shim.set_delay(0)),
            stacks("reads_8x", server.dsn()) as s,
        ):
            s.hold(args.read_healthy)
            healthy = s.figures(READS, args.read_healthy)
            slowed = time.time()
            shim.set_delay(4_000)
            watched = s.hold(args.watch, s.all_fire)
            figures = {"healthy": healthy, "slow": s.figures(READS, watched)}
            results += s.results(slowed, "read slowdown", watched, figures)
        shim.set_delay(0)
        pgbench("-i", "-s", "4", "-q", server.dsn())
        with stacks("quiet: select-only", server.dsn()) as s:
            bench = Bench(server.dsn(), "-S")
            started = time.time()
            try:
                watched = s.hold(args.quiet)
                figures = {
                    "tps": bench.median(started, time.time()),
                    **s.figures(READS, watched),
                }
                results += s.results(None, "Prometheus start", watched, figures)
            finally:
                bench.stop()
    finally:
        server.destroy()


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


COLUMNS = [(interval, version) for interval in INTERVALS for version in VERSIONS]


def cell(result: Result | None, alert: str | None) -> str:
    """One alert on one Prometheus: its pending and firing times, or how long it stayed quiet;
    and any alert already pending before the incident (in its healthy phase)."""
    if result is None:
        return "not run"
    times = result.alerts.get(alert, {}) if alert else {}
    if "pending" in times:
        fired = times.get("firing")
        text = f"{seconds(times['pending'])} / " + (
            seconds(fired) if fired is not None else f"not in {seconds(result.watched_s)}"
        )
    elif alert is None:
        text = f"nothing in {seconds(result.watched_s)}"
    else:
        text = f"not in {seconds(result.watched_s)}"
    if result.before:
        text += f" (before: {', '.join(result.before)})"
    return text


def table(*runs: list[Result]) -> str:
    """Per incident (and storage class) and alert: pending / firing at each interval and
    Prometheus version, one run after another in a cell ("; ")."""
    heads = " | ".join(f"{i} Prometheus {v}" for i, v in COLUMNS)
    lines = [f"| incident | alert | {heads} |", "|---|---|" + "---|" * len(COLUMNS)]
    groups: dict[tuple[str, str], list[dict[tuple[str, str], Result]]] = {}
    for n, results in enumerate(runs):
        for r in results:
            seen = groups.setdefault((r.incident, r.storage_class), [{} for _ in runs])
            seen[n][(r.interval, r.version)] = r
    order = sorted(groups.items(), key=lambda g: (g[0][0].startswith("quiet"), g[0]))
    for (incident, storage_class), each in order:
        names = sorted({n for run in each for r in run.values() for n in r.alerts}) or [None]
        label = incident if storage_class == "default" else f"{incident}, class {storage_class}"
        for name in names:
            cells = " | ".join(
                "; ".join(cell(run.get(column), name) for run in each) for column in COLUMNS
            )
            lines.append(f"| {label} | {name or '(none)'} | {cells} |")
    return "\n".join(lines)


def figures(results: list[Result]) -> str:
    """What each incident looked like to the exporter (Prometheus 3 at 15 s) and to pgbench."""
    return "\n".join(
        f"- {r.incident}, {r.storage_class}: {json.dumps(r.figures)}"
        for r in results
        if (r.version, r.interval) == ("3", "15s")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--healthy", type=float, default=120, help="TPC-B before the slowdown")
    parser.add_argument("--read-healthy", type=float, default=360, help="scans before 8x")
    parser.add_argument("--watch", type=float, default=720, help="longest wait for firing")
    parser.add_argument("--quiet", type=float, default=600)
    parser.add_argument("--checkpoint-every", type=float, default=150)
    parser.add_argument("--table-mb", type=int, default=150)
    parser.add_argument("--incidents", default="slow_from_start,fsync_slow,reads_8x")
    parser.add_argument("--poll-interval", help="the exporter's (default: its own, 30s)")
    parser.add_argument(
        "--table", type=Path, nargs="+", help="print the table of saved --out files, no run"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(tempfile.gettempdir()) / "time_to_detect.json"
    )
    args = parser.parse_args()
    if args.table:
        saved = [[Result(**r) for r in json.loads(path.read_text())] for path in args.table]
        print(table(*saved))
        for run in saved:
            print(f"\n{figures(run)}")
        return

    if args.poll_interval:
        EXPORTER_FLAGS.extend(["--poll-interval", args.poll_interval])
    print(f"{machine()}; shared with other jobs; exporter {EXPORTER_FLAGS}", flush=True)
    results: list[Result] = []
    go = threading.Event()
    chosen = args.incidents.split(",")
    if "fsync_slow" not in chosen:
        go.set()
    runs = {"slow_from_start": slow_from_start, "fsync_slow": fsync_slow, "reads_8x": reads_8x}
    loads: list[float] = []
    threads = [
        threading.Thread(target=runs[name], args=(args, results, go), name=name) for name in chosen
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        loads.append(os.getloadavg()[0])
        for thread in threads:
            thread.join(30 / len(threads))
    args.out.write_text(json.dumps([asdict(r) for r in results], indent=1))
    print(f"{table(results)}\n\n{figures(results)}")
    print(
        f"\n{(time.monotonic() - started) / 60:.0f} minutes; 1-minute load average every 30 s:"
        f" median {statistics.median(loads):.1f}, max {max(loads):.1f}; {load()}"
    )


if __name__ == "__main__":
    main()

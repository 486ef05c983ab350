"""The write side against real servers and a real write load (issue 23).

WAL write and sync figures carry the same names on PostgreSQL 16, 17 (pg_stat_wal) and 18
(pg_stat_io's wal rows), and so do the checkpointer's (pg_stat_bgwriter before 17,
pg_stat_checkpointer since): each checked on a real server against the commits and the
checkpoint a client made.

End to end on 18: pgbench's own TPC-B-like script (after pgbench -i) writes and commits, the
write-delay shim (tests/shim/slowwrite.c) slows every fsync/fdatasync below the system call,
the exporter and Prometheus 2, 3 and VictoriaMetrics with vmalert side by side run the shipped
rules (short windows, tests/alertstack.py). A read-only run (pgbench -S) names no write
problem; under a healthy write load no alert is even pending; with syncs slowed the WAL sync
and write-saturation alerts fire, the report's storage verdict names writes, and its time per
WAL sync is checked against pgbench's own stopwatch; with syncs fast again the alerts resolve.
A bulk COPY/INSERT load is checked for its extends and WAL.

Buffer writes end to end on 18, Prometheus 2, 3 and VictoriaMetrics side by side: clients that
must evict dirty buffers under a steady pgbench rate; the background writer stopped makes them
write the buffers themselves (PgAioBackendsWritingBuffers), data-file writes slowed by the shim
after a fast baseline make writes regress (PgAioWriteLatencyRegression); each fires, then
resolves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alerts.params import load_params
from alerts.recording import write_rules
from dashboards import dashboard_queries as dq

from alertstack import (
    RECENT_WINDOW,
    SHORT,
    WINDOW,
    Stack,
    alert_stacks,
    hold_quiet,
    short_rules,
    until_firing,
    until_resolved,
)
from cpu import CpuWatch, PressureWatch, backend_pids
from harness import Exporter, Samples, labels, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pgbench_judge import Run, parse_pgbench, pgbench
from pgbins import DEBIAN_MAJOR, bin_dir, debian_release
from slowwrite import SlowWrites
from test_alerts_e2e_io_uring import every_value
from victoriametrics import engine

pytestmark = pytest.mark.integration

WRITE_SETTINGS = {
    "fsync": "on",  # the suite's servers run with fsync off; here syncs are the point
    "track_io_timing": "on",
    "track_wal_io_timing": "on",
    # pgbench's scale 2 (~30 MB) fits: client backends need not evict dirty buffers, so
    # PgAioBackendsWritingBuffers has no cause to fire.
    "shared_buffers": "128MB",
}
SYNC_DELAY_US = 50_000  # commits then wait mostly on WAL: >1 session in write waits with margin
WRITE_ALERTS = {"PgAioWalSyncLatencyHigh", "PgAioStorageSaturatedByWrites"}
QUIET_SECONDS = 20
REPORT_ARGS = ("--duration", "10s", "--format", "json")
# The short rules of the read e2e with the write alerts' `for` shrunk alike.
WRITE_SHORT: dict[str, Any] = {
    **SHORT,
    "alerts": {
        **SHORT["alerts"],
        # min_share as before issue 30's 0.16 (one minute in five at 15-60 s scrapes): here 4
        # of the window's 15 one-second intervals. A second of ~100 syncs is far noisier than
        # a minute, and this shared disk's healthy TPC-B syncs take over 5 ms in single seconds
        # (0.16, 3 of 15, fired in the quiet phase: 6.4 ms); the slow phase's 50 ms syncs put
        # every interval above the limit either way.
        "PgAioWalSyncLatencyHigh": {
            "for": "5s",
            "window": WINDOW,
            "recent_window": RECENT_WINDOW,
            "min_share": 0.25,
        },
        "PgAioStorageSaturatedByWrites": {"for": "5s"},
        "PgAioWriteLatencyRegression": {"for": "5s"},
        "PgAioBackendsWritingBuffers": {"for": "5s"},
    },
}


@dataclass
class Bench:
    """pgbench (4 clients, closed loop) in back-to-back 3 s runs on a thread, each run's
    figures kept under the phase that was current when it started."""

    dsn: str
    script: tuple[str, ...] = ()  # () = the built-in TPC-B-like script; ("-S",) = select only
    phase: str = "start"
    runs: dict[str, list[Run]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Bench:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            phase = self.phase
            out = pgbench("-c", "4", "-T", "3", *self.script, self.dsn).stdout
            self.runs.setdefault(phase, []).append(parse_pgbench(out))

    def median(self, phase: str) -> Run:
        runs = sorted(self.runs.get(phase, []), key=lambda r: r.latency_ms)
        assert runs, f"no pgbench run in phase {phase}: {self.runs}"
        return runs[len(runs) // 2]


def report(dsn: str, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "report", "--dsn", dsn, *REPORT_ARGS, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


WRITE_FINDINGS = {
    "wal_sync_latency_high",
    "write_latency_regression",
    "backends_writing_buffers",
    "storage_saturated_by_writes",
}


@dataclass
class WriteServer:
    server: LocalServer
    slow: SlowWrites


@pytest.fixture(scope="module")
def write18() -> Iterator[WriteServer]:
    server = LocalServer.create(settings=WRITE_SETTINGS)
    try:
        slow = SlowWrites(server)
        server.start()
        pgbench("-i", "-s", "2", "-q", server.dsn())
        yield WriteServer(server, slow)
    finally:
        server.destroy()


# -- WAL and checkpoints under one set of names on 16, 17 and 18 --------------------------------

COMMITS = 30


# The interval gauges the commits and the checkpoint must set, and the row (backend_type) of
# the per-row ones: WAL writes and syncs (the commits), the new table's extension (the client
# backend), the checkpointer's buffer writes and data-file fsyncs (fsync is on).
INTERVAL_GAUGES = {
    "pg_aio_wal_sync_latency_seconds": None,
    "pg_aio_wal_write_latency_seconds": None,
    "pg_aio_extend_latency_seconds": "client backend",
    "pg_aio_extend_seconds_per_byte": "client backend",
    "pg_aio_write_latency_seconds": "checkpointer",
    "pg_aio_write_seconds_per_byte": "checkpointer",
    "pg_aio_fsync_latency_seconds": "checkpointer",
}


def of(backend_type: str, gauge: dict[Any, float]) -> float | None:
    """A per-row interval gauge's highest value among `backend_type`'s rows, if any."""
    return max(
        (v for k, v in gauge.items() if dict(k)["backend_type"] == backend_type), default=None
    )


def wal_figures(dsn: str) -> tuple[Samples, Samples, Samples]:
    """The exporter's metrics before COMMITS single-row commits (each syncs WAL) and a
    CHECKPOINT; each of INTERVAL_GAUGES as first scraped with a value (a gauge covers the one
    poll interval in which its I/O was counted, which may differ between them: the commits'
    and the checkpoint's); a later scrape."""
    exporter = Exporter("--dsn", dsn, "--poll-interval", "1s", "--sample-interval", "0")
    try:
        before = exporter.wait_poll(time.time())
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS committed")  # a new table: its first extend
            conn.execute("CREATE TABLE committed (n int)")
            for n in range(COMMITS):
                conn.execute("INSERT INTO committed VALUES (%s)", (n,))
            conn.execute("CHECKPOINT")  # a requested checkpoint writes the dirty buffers
        # Scraped often enough to see each poll interval.
        during: Samples = {}

        def all_seen() -> bool:
            scraped = exporter.scrape()
            for name, gauge in scraped.items():
                # the wanted row of a per-row gauge (other rows may come first)
                if name in INTERVAL_GAUGES and (
                    (row := INTERVAL_GAUGES[name]) is None or of(row, gauge) is not None
                ):
                    during.setdefault(name, gauge)
            return during.keys() >= INTERVAL_GAUGES.keys()

        wait_for(all_seen, 15, f"interval gauges {list(INTERVAL_GAUGES)}", every=0.2)
        time.sleep(1.1)  # the backend reports its I/O when idle, at most once a second
        after = exporter.wait_poll(time.time())
        return before, during, after
    finally:
        exporter.stop()


@pytest.mark.parametrize("major", ["16", "17", "18", DEBIAN_MAJOR])
def test_wal_and_checkpoints_have_the_same_names_on_every_version(
    major: str, write18: WriteServer, tmp_path: Path
) -> None:
    if major == DEBIAN_MAJOR and (why := debian_release(major)) is not None:
        pytest.skip(f"PostgreSQL {major} not run: {why}")
    server = None
    if major == "18":
        dsn = write18.server.dsn()
    else:
        server = LocalServer.create(bin_dir(major), settings=WRITE_SETTINGS)
        server.start()
        dsn = server.dsn()
    try:
        before, during, after = wal_figures(dsn)
    finally:
        if server is not None:
            server.destroy()
    me = labels(target="default")

    def grew(name: str) -> float:
        return after[name][me] - before[name][me]

    assert grew("pg_aio_wal_syncs_total") >= COMMITS
    assert grew("pg_aio_wal_writes_total") >= COMMITS
    assert grew("pg_aio_wal_sync_time_seconds_total") > 0, "track_wal_io_timing is on"
    assert grew("pg_stat_wal_bytes_total") > 0
    assert grew("pg_aio_checkpoints_requested_total") >= 1
    assert grew("pg_aio_checkpoint_buffers_written_total") > 0
    assert during["pg_aio_wal_sync_latency_seconds"][me] > 0
    assert during["pg_aio_wal_write_latency_seconds"][me] > 0
    # The per-row gauges of the new table's extends and the checkpointer's buffer writes and
    # data-file fsyncs: the same names on every version (16 and 17 count bytes as op_bytes
    # blocks).
    for name, row in INTERVAL_GAUGES.items():
        if row is not None:
            assert (of(row, during[name]) or 0) > 0, (name, during[name])


# -- end to end on 18 ----------------------------------------------------------------------------


# The overview dashboard's write row (dashboards/rows/writes.py).
WRITE_PANELS = {
    "Write time per MiB",
    "Write time per operation",
    "WAL write and sync time",
    "Who writes shared buffers",
    "Sessions waiting on writes",
}
OVERVIEW = Path(__file__).resolve().parent.parent / "dashboards" / "pg-aio-overview.json"


def write_queries(rules_dir: Path) -> dict[str, str]:
    """The write row's queries, as Grafana would run them (every variable at All, 1 s scrapes),
    and the write side's recording rules (alert window), each by where it comes from."""
    board = json.loads(OVERVIEW.read_text())
    chosen = every_value(board)
    panels = [q for q in dq.queries(board) if q.kind == "panel" and q.title in WRITE_PANELS]
    assert {q.title for q in panels} == WRITE_PANELS
    params = load_params([rules_dir / "short.yaml"])
    rules = [r.name for r in write_rules(params, WINDOW)]
    return {q.where: dq.substitute(q.expr, chosen) for q in panels} | {n: n for n in rules}


def without_data(stack: Stack, queries: dict[str, str], since: float) -> set[str]:
    """Those of `queries` (where: expression) that had no value at any second since `since`
    (time.time()) on the stack's engine: a panel draws every step of its range, so a one-off
    event counts wherever it shows, whichever second each engine's scrapes put it at."""
    seconds = time.time() - since
    return {
        where for where, expr in queries.items() if not stack.prometheus.query_range(expr, seconds)
    }


def test_slow_syncs_fire_the_write_alerts_and_the_report_names_writes(
    write18: WriteServer, tmp_path: Path
) -> None:
    started = time.monotonic()
    server, slow = write18.server, write18.slow
    dsn = server.dsn()
    # A read-only run on the same server: no write problem named. Judged as the class of this
    # machine's own disk: with fsync on, its WAL syncs alone (1-2 a second, from the server's
    # background) took 4-13 ms each under the suite's load, slow for the default network-ssd
    # (5 ms), which the report rightly says; what this run must not show is a write problem of
    # the workload's making.
    with Bench(dsn, ("-S",), phase="read-only"):
        read_only = report(dsn, "--storage-class", "hdd")
    assert not WRITE_FINDINGS & {f["id"] for f in read_only["findings"]}, read_only["findings"]
    assert "write" not in read_only["verdict"]["storage"].lower(), read_only["verdict"]

    rules = short_rules(tmp_path, WRITE_SHORT)
    with alert_stacks(server, rules) as stacks, Bench(dsn, phase="fast") as bench:
        starving = CpuWatch(lambda: {stacks[0].exporter.proc.pid} | set(backend_pids(dsn)))
        pressure = PressureWatch()
        # The quiet phase proves something only once the alert's inputs exist.
        wait_for(
            lambda: all(
                stack.value(f"pg_aio_target:wal_syncs_per_second:rate{WINDOW} >= 1")
                and stack.value(f"pg_aio_target:wal_sync_latency_seconds:rate{WINDOW}") is not None
                for stack in stacks
            ),
            60,
            "WAL sync figures under the write load",
            every=0.5,
        )
        hold_quiet(stacks, QUIET_SECONDS, starving, pressure)
        fast_sync = stacks[0].value(f"pg_aio_target:wal_sync_latency_seconds:rate{WINDOW}")

        slow.set_delay(SYNC_DELAY_US)
        bench.phase = "slow"
        slow_since = time.monotonic()
        slowed = report(dsn)
        # Allowed, not expected: with throughput down ~28x the few reads left are another mix,
        # and their wait per byte over the short rules' 15 s window has reached 4.2x its 10m
        # median (CI, Prometheus 2 once in three runs); the read side is judged in
        # test_alerts_e2e, this scenario judges that the write alerts fire and nothing else.
        fired = until_firing(
            stacks,
            WRITE_ALERTS,
            allowed=frozenset({"PgAioReadLatencyRegression"}),
            since=slow_since,
        )
        slow_sync = stacks[0].value(f"pg_aio_target:wal_sync_latency_seconds:rate{WINDOW}")
        # A checkpoint: the checkpointer's buffer writes, writebacks and (slowed) fsyncs. One
        # event, seen by a 4 s $__rate_interval for ~4 s and by a 15 s rule for ~15 s, each
        # engine at its own scrape phase: each query is judged over the seconds since.
        queries = write_queries(tmp_path)
        checkpoint_at = time.time()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        empty = {stack.name: set(queries) for stack in stacks}
        deadline = time.monotonic() + 30
        while any(empty.values()) and time.monotonic() < deadline:
            time.sleep(1)
            for stack in stacks:
                wanted = {where: queries[where] for where in empty[stack.name]}
                empty[stack.name] = without_data(stack, wanted, checkpoint_at)
        assert not any(empty.values()), f"write row queries or write rules without data: {empty}"
        for seen in fired:
            assert seen["PgAioStorageSaturatedByWrites"].alert["labels"]["signal"] == "wal_sync"

        slow.set_delay(0)
        bench.phase = "fast again"
        resolved_after = until_resolved(stacks, WRITE_ALERTS)
    fired_after = [{name: f.after for name, f in seen.items()} for seen in fired]
    fast, slowed_run = bench.median("fast"), bench.median("slow")
    print(
        f"\nWAL sync fast {fast_sync} s, slow {slow_sync} s; pgbench fast {fast}, slow"
        f" {slowed_run}; fired after {fired_after}, resolved after {resolved_after} s; took"
        f" {time.monotonic() - started:.0f} s; sessions in write waits"
        f" {slowed['writes']['write_wait_sessions']}"
    )

    # The report over the slow window: storage saturated by writes, WAL syncs slow.
    ids = {f["id"] for f in slowed["findings"]}
    assert {"wal_sync_latency_high", "storage_saturated_by_writes"} <= ids, slowed["findings"]
    assert slowed["verdict"]["storage"].startswith("Storage is saturated by writes")
    # Judged by the client's stopwatch: a sync waits the shim's delay (each process picks the
    # new delay up within 100 ms, so the window's first syncs may be fast: 0.8x), and a
    # transaction waits for its commit's sync, so pgbench's latency is no shorter than a sync.
    per_sync = slowed["writes"]["wal"]["seconds_per_sync"]
    assert 0.8 * SYNC_DELAY_US / 1e6 <= per_sync <= slowed_run.latency_ms / 1000
    assert slowed_run.latency_ms > 2 * fast.latency_ms


def test_bulk_load_extends_and_writes_wal(write18: WriteServer) -> None:
    """COPY and INSERT ... SELECT into a new table: relation extension and WAL, in the report's
    writes block and the exporter's extend gauges."""
    dsn = write18.server.dsn()
    exporter = Exporter("--dsn", dsn, "--poll-interval", "1s", "--sample-interval", "0")
    try:
        since = time.time()
        exporter.wait_poll(since)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS bulk")
            conn.execute("CREATE TABLE bulk (n int, pad text)")
            with conn.cursor().copy("COPY bulk FROM STDIN") as copy:
                for n in range(50_000):
                    copy.write_row((n, "x" * 100))
            conn.execute("INSERT INTO bulk SELECT n, pad FROM bulk")

        # The gauges cover one poll interval, the one in which the backend reported its I/O
        # (when it went idle): scraped often enough to see it.
        def extend_gauges() -> Samples | None:
            samples = exporter.scrape()
            return samples if samples.get("pg_aio_extend_latency_seconds") else None

        after = wait_for(
            extend_gauges,
            15,
            "extend gauges after the bulk load",
            every=0.2,
        )
    finally:
        exporter.stop()
    extends = after["pg_aio_extend_latency_seconds"]
    client = [v for k, v in extends.items() if dict(k)["backend_type"] == "client backend"]
    assert client and all(v > 0 for v in client), extends
    assert after["pg_aio_extend_seconds_per_byte"]


# -- buffer writes end to end on 18: who writes, and how fast -----------------------------------

# Shared buffers far smaller than pgbench's tables (scale 5, ~75 MB): every transaction needs
# free buffers, and dirty ones must be written before reuse. fsync off: the buffer write path
# alone (WAL syncs are the test above's).
EVICTING_SETTINGS = {"fsync": "off", "track_io_timing": "on", "shared_buffers": "16MB"}
EVICTING_SCALE = "5"
# A steady 300 tps, as production runs: the background writer (defaults: 100 buffers per
# 200 ms round) then keeps ahead of the clients (measured: they write 1-2% of the buffers).
# Closed-loop pgbench outruns it at any bgwriter setting (70-75% written by the clients).
# --latency-limit: a client starved of CPU skips the transactions it is late for rather than
# catching up in a burst that would outrun the background writer.
STEADY_LOAD = ("-R", "300", "--latency-limit", "50")
WRITE_DELAY_US = 1000  # per data-file write of 8 kB or more: ~200x the page cache's ~5 us
REGRESSION = (
    f"pg_aio_target:write_seconds_per_byte_by_regime:rate{WINDOW} / quantile_over_time(0.5,"
    f" pg_aio_target:write_seconds_per_byte_by_regime:rate{WINDOW}[10m])"
)
BUFFER_INPUTS = (
    f"pg_aio_target:write_ops_per_second:rate{WINDOW} >= 10",
    f"pg_aio_target:backend_write_share:rate{WINDOW}",
    f"pg_aio_target:write_seconds_per_byte_by_regime:rate{WINDOW}",
)
BUFFER_MEASURES = {
    "client_share": f"pg_aio_target:backend_write_share:rate{WINDOW}",
    "writes_per_s": f"pg_aio_target:write_ops_per_second:rate{WINDOW}",
    # Over the last 5 s: at the first firing the alert's window still holds fast writes.
    "ms_per_write": "pg_aio_target:write_latency_seconds:rate5s * 1e3",
    # The regression alert's ratio (write time per byte over its baseline), the phase's highest.
    "max_regression": f"max_over_time(({REGRESSION})[20s:1s])",
}


def set_bgwriter_lru_maxpages(dsn: str, pages: int | None) -> None:
    """ALTER SYSTEM (None: RESET) and reload: the background writer takes it at once."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if pages is None:
            conn.execute("ALTER SYSTEM RESET bgwriter_lru_maxpages")
        else:
            conn.execute(f"ALTER SYSTEM SET bgwriter_lru_maxpages = {pages}")
        conn.execute("SELECT pg_reload_conf()")


def test_backends_writing_and_slow_writes_fire_and_resolve(tmp_path: Path) -> None:
    """One server whose clients evict dirty buffers, one steady write load, Prometheus 2, 3 and
    VictoriaMetrics side by side on one exporter. Healthy (the background writer at its
    defaults): no alert even pending. The background writer stopped (bgwriter_lru_maxpages =
    0): the clients write the buffers themselves and PgAioBackendsWritingBuffers fires; reset,
    it resolves. Data-file writes slowed 1 ms each below the system call after that fast
    baseline: PgAioWriteLatencyRegression fires; fast again, it resolves."""
    started = time.monotonic()
    server = LocalServer.create(settings=EVICTING_SETTINGS)
    try:
        slow = SlowWrites(server)
        server.start()
        dsn = server.dsn()
        pgbench("-i", "-s", EVICTING_SCALE, "-q", dsn)
        rules = short_rules(tmp_path, WRITE_SHORT)
        with (
            alert_stacks(server, rules) as stacks,
            Bench(dsn, STEADY_LOAD, "healthy") as bench,
        ):
            starving = CpuWatch(lambda: {stacks[0].exporter.proc.pid} | set(backend_pids(dsn)))
            pressure = PressureWatch()
            measured: dict[str, list[dict[str, float | None]]] = {}

            def measure(phase: str) -> None:
                measured[phase] = [
                    {name: stack.value(expr) for name, expr in BUFFER_MEASURES.items()}
                    for stack in stacks
                ]

            wait_for(
                lambda: all(stack.value(e) is not None for stack in stacks for e in BUFFER_INPUTS),
                60,
                "buffer write figures under the write load",
                every=0.5,
            )
            hold_quiet(stacks, QUIET_SECONDS, starving, pressure)
            measure("healthy")

            set_bgwriter_lru_maxpages(dsn, 0)
            bench.phase = "bgwriter off"
            backends = {"PgAioBackendsWritingBuffers"}
            fired = until_firing(stacks, backends)
            measure("bgwriter off")
            set_bgwriter_lru_maxpages(dsn, None)
            bench.phase = "bgwriter on"
            backends_resolved = until_resolved(stacks, backends)

            slow.set_delay(0, WRITE_DELAY_US)
            bench.phase = "slow writes"
            regression = {"PgAioWriteLatencyRegression"}
            fired_slow = until_firing(stacks, regression)
            measure("slow writes")
            slow.set_delay(0, 0)
            bench.phase = "fast writes"
            regression_resolved = until_resolved(stacks, regression)
    finally:
        server.destroy()
    pgbench_ms = {
        phase: (bench.median(phase).tps, bench.median(phase).latency_ms) for phase in bench.runs
    }
    print(
        f"\nmeasured {measured}\npgbench (tps, ms) {pgbench_ms}\n"
        f"BackendsWritingBuffers fired after {[{n: f.after for n, f in s.items()} for s in fired]}"
        f", resolved after {backends_resolved} s; WriteLatencyRegression fired after"
        f" {[{n: f.after for n, f in s.items()} for s in fired_slow]}, resolved after"
        f" {regression_resolved} s; took {time.monotonic() - started:.0f} s"
    )
    for healthy, off, slowed in zip(
        measured["healthy"], measured["bgwriter off"], measured["slow writes"], strict=True
    ):
        # The background writer at its defaults keeps ahead; stopped, the clients write all.
        assert (healthy["client_share"] or 0) < 0.5 < (off["client_share"] or 0), measured
        # Judged by the shim's own delay: each slowed write waits at least that long.
        assert (slowed["ms_per_write"] or 0) >= 0.8 * WRITE_DELAY_US / 1e3, measured
        assert (healthy["ms_per_write"] or 1) < 0.1 * WRITE_DELAY_US / 1e3, measured


# -- a stock server: track_wal_io_timing at its default, off -------------------------------------

# PostgreSQL's defaults but for what the product's setup asks (track_io_timing) and what the
# suite's servers turn off (fsync): track_wal_io_timing stays off, so no WAL sync is timed.
STOCK_SETTINGS = {"fsync": "on", "track_io_timing": "on", "shared_buffers": "128MB"}
UNTIMED_DELAY_US = 10_000  # issue 30's incident: every fsync 10 ms slower
SCRAPE = "15s"
HEALTHY_SECONDS = 45  # three scrapes of the healthy load before the incident
UNTIMED = '{target="default"}'


def test_stock_server_slow_fsyncs_alert_without_wal_timing(tmp_path: Path) -> None:
    """A stock 18 under pgbench TPC-B (4 clients), every fsync 10 ms slower after a healthy
    start, watched as in production: the shipped rules generated for 15 s scrapes, Prometheus 2
    scraping the exporter (its default poll and sample intervals) every 15 s. With no WAL
    timing the WAL sync alert has nothing to judge; PgAioStorageSaturatedByWrites must go
    pending on its wal_sync_sampled signal (the processes sampled in a WAL sync over the syncs
    per second) within 2 minutes of the slowdown, and not before it unless the host was starved
    of CPU (cpu.PressureWatch: then the samples count a sync's process waiting to run again),
    PgAioTrackWalIoTimingOff must say why the WAL is not timed, and a report over the slow
    phase must name the writes."""
    server = LocalServer.create(settings=STOCK_SETTINGS)
    exporter = None
    prom = None
    try:
        slow = SlowWrites(server)
        server.start()
        dsn = server.dsn()
        pgbench("-i", "-s", "2", "-q", dsn)
        rules = short_rules(tmp_path, {"scrape_interval": SCRAPE})
        exporter = Exporter("--dsn", dsn)
        prom = engine("2", [f"127.0.0.1:{exporter.port}"], rules, interval=SCRAPE)

        def value(expr: str) -> float | None:
            assert prom is not None
            result = prom.query(expr)
            return float(result[0]["value"][1]) if result else None

        def sampled() -> float | None:
            return value(f"pg_aio_target:wal_sync_sampled_seconds:rate5m{UNTIMED}")

        def pending(name: str, signal: str | None = None) -> bool:
            assert prom is not None
            return any(
                a["labels"]["alertname"] == name
                and (signal is None or a["labels"].get("signal") == signal)
                for a in prom.alerts()
            )

        # seconds since the phase began, time per WAL sync by the samples, WAL syncs/s
        watched: list[tuple[float, float | None, float | None]] = []

        def watch(since: float) -> None:
            syncs = value(f"pg_aio_target:wal_syncs_per_second:rate5m{UNTIMED}")
            watched.append((round(time.monotonic() - since), sampled(), syncs))

        pending_after = None
        # Watched from the exporter's first samples: the alert's window.
        pressure = PressureWatch()
        with Bench(dsn, phase="healthy") as bench:
            healthy_since = time.monotonic()
            wait_for(sampled, 90, "the time per WAL sync by the samples", every=1)
            while time.monotonic() - healthy_since < HEALTHY_SECONDS:
                time.sleep(5)
            watch(healthy_since)
            healthy_pending = pending("PgAioStorageSaturatedByWrites")
            healthy_host = str(pressure)
            starved = pressure.starved()

            slow.set_delay(UNTIMED_DELAY_US)
            bench.phase = "slow"
            slow_since = time.monotonic()
            # The report over the slow phase runs beside the watch, not before it.
            with ThreadPoolExecutor(1) as pool:
                reported = pool.submit(report, dsn, "--duration", "30s")
                while time.monotonic() - slow_since < 150:
                    if pending("PgAioStorageSaturatedByWrites", "wal_sync_sampled"):
                        pending_after = time.monotonic() - slow_since
                        break
                    watch(slow_since)
                    time.sleep(5)
                doc = reported.result()
            watch(slow_since)
            timing_off = pending("PgAioTrackWalIoTimingOff")
            wal_sync_alert = pending("PgAioWalSyncLatencyHigh")
    finally:
        if prom:
            prom.stop()
        if exporter:
            exporter.stop()
        server.destroy()
    fast, slowed = bench.median("healthy"), bench.median("slow")
    finding: dict[str, Any] = next(
        (f for f in doc["findings"] if f["id"] == "storage_saturated_by_writes"), {}
    )
    print(
        f"\nstock 18, fsync +10 ms, 15 s scrapes, healthy phase: {healthy_host},"
        f" PgAioStorageSaturatedByWrites pending {healthy_pending};"
        f" (seconds, s per sync sampled, syncs/s)"
        f" {watched}; PgAioStorageSaturatedByWrites pending after {pending_after} s;"
        f" pgbench healthy {fast}, slow {slowed}; report's s per sync sampled"
        f" {finding.get('evidence', {}).get('sampled_seconds_per_sync')}, write wait sessions"
        f" {doc['writes']['write_wait_sessions']}, findings {[f['id'] for f in doc['findings']]}"
    )
    assert pending_after is not None and pending_after <= 120, watched
    # A host starved of CPU holds a WAL sync's process off its CPU after the sync, and the
    # samples count that time: judged only on a host that ran the server's processes.
    assert not healthy_pending or starved, (
        f"saturated by writes under the healthy load ({healthy_host}): {watched}"
    )
    assert timing_off, "PgAioTrackWalIoTimingOff not even pending"
    assert not wal_sync_alert, "the WAL sync alert judged syncs nobody timed"
    # The client's stopwatch: the incident made the commits slower.
    assert slowed.latency_ms > 2 * fast.latency_ms, (fast, slowed)
    ids = {f["id"] for f in doc["findings"]}
    assert {"storage_saturated_by_writes", "track_wal_io_timing_off"} <= ids, doc["findings"]
    assert doc["verdict"]["storage"].startswith("Storage is saturated by writes"), doc["verdict"]

"""End-to-end alert stacks: the exporter on a real server and a real Prometheus running the
shipped rules, generated with short windows from a params override (never edited by hand), and
the storage scenario every io_method goes through: fast, slow, fast again."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from alert_rules import COMMAND
from cpu import CpuWatch, PressureWatch, assert_overruns_explained, backend_pids
from harness import Exporter, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload
from prometheus import Prometheus
from victoriametrics import ENGINES, engine, engine_name

REPO = Path(__file__).resolve().parent.parent
WINDOW = "15s"
# The time-weighted latency alerts' recent window: one interval above the limit in it keeps them
# on. Not shorter: VictoriaMetrics lets a sample (vmalert's recorded series too) be queried only
# 2-4 s after it arrived (rows wait for a flush every 2 s, not a flag), and the alerts read a
# recorded series that is itself recorded from recorded series, so vmalert sees the newest one
# some 4-8 s late; with 5 s the window was mostly empty there and PgAioReadLatencyHigh, `for` 5s,
# never fired within 120 s (Prometheus, which sees a group's results at once: 14-16 s).
RECENT_WINDOW = "10s"
# Windows and `for` shrunk to fit a test; every threshold keeps its shipped default (the
# default storage class's absolute read latency limit, 2 ms plus the read size at 125 MiB/s).
SHORT: dict[str, Any] = {
    "scrape_interval": "1s",
    "rate_windows": ["5s", WINDOW],
    "alert_window": WINDOW,
    "interval_window": "5s",
    "alerts": {
        # Longer than the whole test: the baseline is the median of everything seen.
        "PgAioReadLatencyRegression": {"for": "5s", "baseline_window": "10m"},
        # Time-weighted: the share of the last WINDOW's 1 s intervals above the limit, and one
        # in the last RECENT_WINDOW, so that the test's phases of tens of seconds fire and resolve.
        "PgAioReadLatencyHigh": {"for": "5s", "window": WINDOW, "recent_window": RECENT_WINDOW},
        "PgAioStorageSaturated": {"for": "5s"},
        "PgAioWorkerPoolSaturated": {"for": "5s"},
    },
}
# What a run reports of each phase: the recording rules the alerts read.
MEASURES = (
    ("ms_per_read", f"pg_aio_target:read_latency_seconds:rate{WINDOW} * 1e3"),
    ("ms_per_MiB", f"pg_aio_target:read_seconds_per_byte:rate{WINDOW} * 2^20 * 1e3"),
    ("reads_per_s", f"pg_aio_target:read_ops_per_second:rate{WINDOW}"),
    ("read_size_bytes", f"pg_aio_target:read_size_bytes:rate{WINDOW}"),
    ("io_worker_utilization", f"pg_aio:io_worker_utilization:rate{WINDOW}"),
    ("sessions_waiting_on_reads", f"pg_aio_target:read_wait_sessions:rate{WINDOW}"),
)
STORAGE_ALERTS = {"PgAioReadLatencyRegression", "PgAioReadLatencyHigh", "PgAioStorageSaturated"}
# The alerts a host starved of CPU can raise on healthy storage: their signals are waits, timed
# or sampled, that last until the waiting process runs again.
WAIT_ALERTS = STORAGE_ALERTS | {"PgAioWalSyncLatencyHigh", "PgAioStorageSaturatedByWrites"}
QUIET_SECONDS = 40


@dataclass
class Stack:
    server: LocalServer
    exporter: Exporter
    prometheus: Prometheus

    def firing(self) -> dict[str, dict[str, Any]]:
        return {
            a["labels"]["alertname"]: a for a in self.prometheus.alerts() if a["state"] == "firing"
        }

    def value(self, expr: str) -> float | None:
        result = self.prometheus.query(expr)
        return float(result[0]["value"][1]) if result else None

    def measure(self) -> dict[str, float | None]:
        return {name: self.value(expr) for name, expr in MEASURES}

    @property
    def name(self) -> str:
        return engine_name(self.prometheus.version)


def overruns(exporter: Exporter) -> float:
    return sum(exporter.scrape().get("pg_aio_exporter_sample_overruns_total", {}).values())


def short_rules(directory: Path, override: Mapping[str, Any] = SHORT) -> list[Path]:
    """The shipped rules, regenerated into `directory` with `override` merged over params."""
    params = directory / "short.yaml"
    params.write_text(yaml.safe_dump(dict(override)))
    subprocess.run(
        [sys.executable, *COMMAND, "--params", params, "--out", directory], cwd=REPO, check=True
    )
    return sorted(directory.glob("*.yml"))


@contextlib.contextmanager
def alert_stacks(
    server: LocalServer, rules: list[Path], versions: Sequence[str] = ENGINES
) -> Iterator[list[Stack]]:
    """The exporter (poll 1 s, sample 500 ms) scraped by one Prometheus of each of `versions`
    (and by default VictoriaMetrics with vmalert: ENGINES), side by side, each scraping and
    evaluating every 1 s: one Stack per version, in order. Samples 500 ms apart still fill a
    15 s window, and on a busy machine (other jobs, four clients on two cores) a sample rarely
    takes so long that the next is skipped."""
    exporter = None
    proms: list[Prometheus] = []
    try:
        exporter = Exporter(
            "--dsn", server.dsn(), "--poll-interval", "1s", "--sample-interval", "500ms"
        )
        for version in versions:
            proms.append(engine(version, [f"127.0.0.1:{exporter.port}"], rules, interval="1s"))
        yield [Stack(server, exporter, prom) for prom in proms]
    finally:
        for prom in proms:
            prom.stop()
        if exporter:
            exporter.stop()


@dataclass
class Run:
    measured: dict[str, dict[str, float | None]]  # Stack.measure() on "fast" and "slow" storage
    firing: dict[str, dict[str, Any]]  # each expected alert as it was when first seen firing


def hold_quiet(
    stacks: Sequence[Stack], seconds: float, starving: CpuWatch, pressure: PressureWatch
) -> None:
    """No alert may even be pending on any stack for `seconds`, but an overrunning sampler
    whose overruns the CPU its processes waited for (`starving`, watched since before the
    phase) explains: true of a starved host as of a slow sampler. Nor a storage alert, unless
    the host was starved since before the phase (`pressure`): then a read waits for its io
    worker's and its own turn on a CPU, and reads slow by any measure (printed, not judged)."""
    overruns_before = [overruns(stack.exporter) for stack in stacks]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for stack, before in zip(stacks, overruns_before, strict=True):
            alerts = stack.prometheus.alerts()
            names = {a["labels"]["alertname"] for a in alerts}
            if "PgAioSamplerOverrunning" in names:
                overran = overruns(stack.exporter) - before
                assert_overruns_explained(
                    overran, starving.starved(), stack.exporter.sample_interval
                )
                names.discard("PgAioSamplerOverrunning")
            if names and names <= WAIT_ALERTS and pressure.starved():
                print(f"\n{stack.name}: {sorted(names)} under a normal load, {pressure}")
                continue
            assert not names, f"{stack.name}: alert under a normal load ({pressure}): {alerts}"
        time.sleep(1)


@dataclass
class Fired:
    after: float  # seconds from the fault to the first evaluation seen firing
    alert: dict[str, Any]  # as first seen firing: an alert near its threshold may flap later


def until_firing(
    stacks: Sequence[Stack],
    expected: set[str],
    allowed: frozenset[str] = frozenset(),
    timeout: float = 120,
    since: float | None = None,
) -> list[dict[str, Fired]]:
    """Called right after a fault (at time.monotonic() `since`, if earlier): waits until every
    stack fires all of `expected`; any other alert firing on a stack, but `allowed`, fails.
    What each stack fired, in order."""
    since = time.monotonic() if since is None else since
    fired: list[dict[str, Fired]] = [{} for _ in stacks]

    def all_fired() -> bool:
        for stack, seen in zip(stacks, fired, strict=True):
            firing = stack.firing()
            for name in firing.keys() & (expected | allowed):
                seen.setdefault(name, Fired(round(time.monotonic() - since, 1), firing[name]))
            unexpected = firing.keys() - expected - allowed
            assert not unexpected, f"{stack.name}: {[firing[n] for n in unexpected]}"
        return all(seen.keys() >= expected for seen in fired)

    try:
        wait_for(all_fired, timeout, f"alerts {sorted(expected)}", every=1)
    finally:
        for stack, seen in zip(stacks, fired, strict=True):
            print(f"\n{stack.name}: fired after { ({n: f.after for n, f in seen.items()}) }")
    for seen in fired:
        for name, f in seen.items():
            assert f.alert["annotations"]["runbook_url"].endswith(name.lower())
    return fired


def until_resolved(stacks: Sequence[Stack], names: set[str], timeout: float = 90) -> float:
    """Called right after the fault ends: seconds until none of `names` fires on any stack."""
    since = time.monotonic()
    wait_for(
        lambda: not any(stack.firing().keys() & names for stack in stacks),
        timeout,
        f"alerts {sorted(names)} to resolve",
        every=1,
    )
    return round(time.monotonic() - since, 1)


def follow_storage(
    stacks: Sequence[Stack],
    slow: Callable[[], None],
    fast: Callable[[], None],
    expected: set[str],
    inputs: tuple[str, ...] = (),
) -> list[Run]:
    """Four clients scan and look up rows on the stacks' one server; each stack is one
    Prometheus (e.g. 2 and 3 side by side) on the same exporter. With fast storage no alert may
    even be pending on any of them for QUIET_SECONDS; after slow() exactly the `expected`
    alerts must fire on each (any other fails); after fast() they must resolve. `inputs` are
    further PromQL expressions that must have a value on each before the quiet phase counts
    (besides read traffic and latency). One Run per stack, in order."""
    started = time.monotonic()
    workload = Workload(stacks[0].server.dsn(), clients=4, pause=0.1).start()
    # The CPU the exporters and their backends (on the stacks' one server) waited for.
    starving = CpuWatch(
        lambda: {s.exporter.proc.pid for s in stacks} | set(backend_pids(stacks[0].server.dsn()))
    )
    pressure = PressureWatch()
    try:
        # The quiet phase only proves something if the alerts' inputs exist and the traffic
        # guard is passed: otherwise "no alert" would be trivially true.
        wait_for(
            lambda: all(
                stack.value(f"pg_aio_target:read_ops_per_second:rate{WINDOW} >= 10")
                and stack.value(f"pg_aio_target:read_seconds_per_byte:rate{WINDOW}")
                and all(stack.value(expr) is not None for expr in inputs)
                for stack in stacks
            ),
            60,
            "recording rules with traffic",
            every=0.5,
        )
        hold_quiet(stacks, QUIET_SECONDS, starving, pressure)
        runs = [Run({"fast": stack.measure()}, {}) for stack in stacks]

        slow()
        try:
            fired = until_firing(stacks, expected)
        finally:
            for stack, run in zip(stacks, runs, strict=True):
                run.measured["slow"] = stack.measure()
                print(f"\n{stack.name}: {run.measured}")
        for run, seen in zip(runs, fired, strict=True):
            run.firing = {name: f.alert for name, f in seen.items()}

        fast()
        print(f"resolved after {until_resolved(stacks, expected)}s")
    finally:
        workload.stop()
        print(f"e2e phases took {time.monotonic() - started:.1f}s")
    return runs

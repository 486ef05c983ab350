"""The CPU a test's processes actually got, so that a timing check can tell a busy host from a
slow exporter.

A sample, a poll or a scrape that overran its slot either did too much work or waited for a
CPU: on the run queue behind other processes (another test, a `stress-ng` hog), or with its
virtual CPU taken by the hypervisor (steal). The kernel counts both: /proc/PID/task/*/schedstat
gives each thread's seconds on a CPU and seconds runnable but waiting for one, and /proc/stat
the host's steal. A timing check then allows the time its processes waited and nothing else:
on an idle host that is the strict bound, and a product made slow (a sleep in a sample) still
fails, since sleeping is neither running nor waiting for a CPU.

An operation timed on its own (a scrape: `Stopwatch`) is allowed only what the threads on its
path waited while it ran (the client's thread, the exporter's HTTP threads: not its event
loop, not the test's other threads, not the server's backends, not the time between
operations), and never more than
OPERATION_CAP: a slow exporter that also waited for a CPU fails once it is slower than the
limit plus that cap. Waits over a longer window (`CpuWatch`: a poll's age, overruns, first
polls, a recovery) are summed over every thread of the processes named, and allowed at most
their kind's cap (WINDOW_CAPS, OVERRUN_CAP).
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import psycopg

TICKS = os.sysconf("SC_CLK_TCK")
# The most one operation may be allowed for its path's waits for a CPU. Measured (docs/
# reliability.md "Timing checks on a busy host"): at load average 24-32 on 2 cores, with and
# without `stress-ng --cpu 2`, the median of 20 scrapes passed with a cap of 1.77 s at most
# (a scrape then took 1.0-1.8 s, most of it this client parsing while waiting for a CPU);
# 2.5 s leaves 40% for a busier host.
OPERATION_CAP = 2.5
# The most a check over a longer window may be allowed for its processes' waits, per kind:
# a poll's age (test_supervision), several targets' first polls and a recovery (test_core).
# Measured by bench/timing_allowance.py (docs/reliability.md "Timing checks on a busy host"),
# at load average 12-36 on 2 cores, with and without `stress-ng --cpu 2` and `--cpu 6`: the
# largest need plus 40%; a kind that never needed any gets what its neediest check would have
# needed with every wait 40% longer (none for the first polls: they came within 0.6 s of a
# 4 s limit at load 34).
WINDOW_CAPS = {"poll age": 0.85, "first polls": 0.0, "recovery": 1.05}
# Overruns are counted over windows of seconds to minutes: their allowance is at most this
# share of the window. Measured the same way: at most 0.222 of it needed, plus 40%.
OVERRUN_CAP = 0.31
Task = tuple[int, int]  # process id, thread id
# A judgement of storage made while at least one runnable task waited for a CPU this share of
# the time (PSI `some`, /proc/pressure/cpu) may read a starved host as slow storage: a read
# from the page cache or a WAL sync is timed, and sampled, until its process runs again. On an
# idle machine the share is a few percent; `make test`'s parallel run keeps it near 1.
STARVED_HOST_SHARE = 0.5
PRESSURE = Path("/proc/pressure/cpu")
T = TypeVar("T")


def threads(*pids: int) -> list[Task]:
    """The threads of these processes now (none of one that has exited)."""
    found = []
    for pid in pids:
        try:
            found += [(pid, int(task.name)) for task in Path(f"/proc/{pid}/task").iterdir()]
        except FileNotFoundError:
            continue
    return found


def this_thread() -> Task:
    return os.getpid(), threading.get_native_id()


def thread_waited(task: Task) -> float:
    """Seconds the thread spent runnable but waiting for a CPU, so far (0 once it ended)."""
    pid, tid = task
    try:
        return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1]) / 1e9
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def waited_seconds(pid: int) -> float:
    """Seconds the threads of `pid` spent runnable but waiting for a CPU, so far (0 once it
    has exited)."""
    return sum(thread_waited(task) for task in threads(pid))


def steal_seconds() -> float:
    """CPU seconds the hypervisor took from this machine so far, summed over its CPUs."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / TICKS  # cpu user nice system idle iowait irq softirq steal


def cpu_pressure_seconds() -> float:
    """Seconds during which at least one runnable task on this machine waited for a CPU (PSI
    `some`), so far; 0 on a kernel without PSI, where no judgement is ever excused."""
    try:
        some = PRESSURE.read_text().splitlines()[0]
    except FileNotFoundError:
        return 0.0
    return int(some.rsplit("total=", 1)[1]) / 1e6


class PressureWatch:
    """The share of the wall time since it started that a task on this machine waited for a
    CPU: whether a storage alert on a healthy server is the host's doing."""

    def __init__(self) -> None:
        self._start = cpu_pressure_seconds()
        self._started = time.monotonic()

    def share(self) -> float:
        return (cpu_pressure_seconds() - self._start) / (time.monotonic() - self._started)

    def starved(self) -> bool:
        return self.share() >= STARVED_HOST_SHARE

    def __str__(self) -> str:
        return (
            f"a task waited for a CPU {self.share():.0%} of the last"
            f" {time.monotonic() - self._started:.0f}s (starved from {STARVED_HOST_SHARE:.0%})"
        )


@dataclass
class Starved:
    """Seconds the watched processes waited for a CPU, and the host's steal, over a window of
    `window` wall seconds."""

    waited: float
    stolen: float
    window: float

    @property
    def seconds(self) -> float:
        """An upper bound of the time any one of them lost to the host. Steal is counted for
        the whole machine: it may have fallen on another process' CPU time, never more."""
        return self.waited + self.stolen

    def __str__(self) -> str:
        return (
            f"waited for a CPU {self.waited:.3f}s, host steal {self.stolen:.3f}s"
            f" over {self.window:.1f}s"
        )


class CpuWatch:
    """Start it before the window a timing check judges and read `starved()` at its end. The
    processes are named by a callable, read at both ends: a server backend may appear during
    the window, and one that is gone counts as 0 at the end, so its part is dropped rather
    than counted negative."""

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self._pids = pids
        self._start = self._read()
        self._steal = steal_seconds()
        self._started = time.monotonic()

    def _read(self) -> dict[int, float]:
        return {pid: waited_seconds(pid) for pid in self._pids()}

    def starved(self) -> Starved:
        end = self._read()
        waited = sum(max(0.0, end[pid] - self._start.get(pid, 0.0)) for pid in end)
        return Starved(waited, steal_seconds() - self._steal, time.monotonic() - self._started)


def backend_pids(dsn: str, application_name: str = "pg_aio_exporter") -> list[int]:
    """The server processes that serve the exporter's connections (same machine)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchall()
    return [int(row[0]) for row in rows]


@dataclass(frozen=True)
class Timed:
    """One operation: its wall time, what the threads on its path waited for a CPU meanwhile
    (two threads waiting at once count twice: an upper bound), and the host's steal."""

    seconds: float
    waited: float
    stolen: float

    @property
    def allowance(self) -> float:
        return min(self.waited + self.stolen, OPERATION_CAP)

    @property
    def own(self) -> float:
        """The time no wait for a CPU explains."""
        return self.seconds - self.allowance

    def __str__(self) -> str:
        return f"{self.seconds:.3f}s (waited {self.waited:.3f}s, steal {self.stolen:.3f}s)"


class Stopwatch:
    """Times operations one by one, each with the waits of the threads on its path while it
    ran: `path` names them, read before and after (a thread started meanwhile counts whole;
    one that started and ended meanwhile is not seen: `get` keeps the exporter's request
    thread alive until it has been read)."""

    def __init__(self, path: Callable[[], Iterable[Task]]) -> None:
        self._path = path
        self.timings: list[Timed] = []

    def __call__(self, operation: Callable[[], T]) -> T:
        before = {task: thread_waited(task) for task in self._path()}
        steal = steal_seconds()
        started = time.perf_counter()
        result = operation()
        seconds = time.perf_counter() - started
        stolen = steal_seconds() - steal
        tasks = {*before, *self._path()}
        waited = sum(max(0.0, thread_waited(t) - before.get(t, 0.0)) for t in tasks)
        self.timings.append(Timed(seconds, waited, stolen))
        return result

    def get(
        self, url: str, headers: Mapping[str, str] | None = None, tls: ssl.SSLContext | None = None
    ) -> tuple[int, bytes]:
        """One timed GET: its status and body. The exporter answers each connection on a
        thread of its own, which would end with a closed connection before its waits were
        read; HTTP/1.1 keeps it open (and the thread alive) until they have been."""
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port
        conn = (
            http.client.HTTPSConnection(host, port, timeout=5, context=tls)
            if parts.scheme == "https"
            else http.client.HTTPConnection(host, port, timeout=5)
        )

        def request() -> tuple[int, bytes]:
            conn.request("GET", parts.path or "/", headers=dict(headers or {}))
            response = conn.getresponse()
            return response.status, response.read()

        try:
            return self(request)
        finally:
            conn.close()


def scrape_path(pid: int) -> Callable[[], list[Task]]:
    """The threads a request from this thread to the exporter `pid` runs on: this one, and
    the exporter's HTTP threads (all but its main thread, the event loop's, which polls and
    samples: /metrics is answered from memory without it)."""
    client = this_thread()
    return lambda: [client, *(task for task in threads(pid) if task != (pid, pid))]


def assert_median_within(timings: Sequence[Timed], limit: float) -> None:
    """The median operation, less what its path waited for a CPU (at most OPERATION_CAP),
    took under `limit`."""
    ranked = sorted(timings, key=lambda t: t.own)
    assert ranked[len(ranked) // 2].own < limit, [str(t) for t in ranked]


def _record(kind: str, need: float, starved: Starved, cap: float) -> None:
    """With PG_AIO_TIMING_RECORD set (bench/timing_allowance.py sets it), one JSON line per
    window check: what it needed of its allowance, what its processes waited, its cap."""
    path = os.environ.get("PG_AIO_TIMING_RECORD")
    if path:
        line = {
            "kind": kind,
            "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
            "need": need,
            "waited": starved.waited,
            "stolen": starved.stolen,
            "window": starved.window,
            "cap": cap,
            "load": os.getloadavg()[0],
        }
        with open(path, "a") as out:
            out.write(json.dumps(line) + "\n")


def assert_within(kind: str, took: float, limit: float, starved: Starved) -> None:
    """A window check of `kind` (a key of WINDOW_CAPS): what `took` seconds is under `limit`
    plus what its processes waited for a CPU over the window, at most the kind's cap."""
    cap = WINDOW_CAPS[kind]
    _record(kind, took - limit, starved, cap)
    allowance = min(starved.seconds, cap)
    assert took < limit + allowance, (
        f"{kind}: {took:.2f}s against {limit:.2f}s + {allowance:.2f}s allowed ({starved},"
        f" cap {cap}s)"
    )


def assert_overruns_explained(overran: float, starved: Starved, slot: float) -> None:
    """A sample takes milliseconds: to overrun its slot it must have lost at least half of it
    waiting for a CPU (the exporter's or its backend's). So an exporter that got the CPU it
    needed overruns never, and one made slow does on any host. The waits allowed are at most
    OVERRUN_CAP of the window's length (the overruns then at most twice that share of its
    slots), however long the processes waited."""
    cap = OVERRUN_CAP * starved.window
    _record("overruns", overran * slot / 2, starved, cap)
    allowed = min(starved.seconds, cap) / (slot / 2)
    assert overran <= allowed, (
        f"{overran:.0f} overruns of {slot}s slots, {allowed:.1f} allowed ({starved},"
        f" cap {cap:.2f}s)"
    )

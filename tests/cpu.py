"""The CPU a test's processes actually got, so that a timing check can tell a busy host from a
slow exporter.

A sample, a poll or a scrape that overran its slot either did too much work or waited for a
CPU: on the run queue behind other processes (another test, a `stress-ng` hog), or with its
virtual CPU taken by the hypervisor (steal). The kernel counts both: /proc/PID/task/*/schedstat
gives each thread's seconds on a CPU and seconds runnable but waiting for one, and /proc/stat
the host's steal. A timing check then allows the time its processes waited and nothing else:
on an idle host that is the strict bound, and a product made slow (a sleep in a sample) still
fails, since sleeping is neither running nor waiting for a CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psycopg

TICKS = os.sysconf("SC_CLK_TCK")


def waited_seconds(pid: int) -> float:
    """Seconds the threads of `pid` spent runnable but waiting for a CPU, so far (0 once it
    has exited)."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return 0.0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended between the listing and the read
    return total / 1e9


def steal_seconds() -> float:
    """CPU seconds the hypervisor took from this machine so far, summed over its CPUs."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / TICKS  # cpu user nice system idle iowait irq softirq steal


@dataclass
class Starved:
    """Seconds the watched processes waited for a CPU, and the host's steal, over a window."""

    waited: float
    stolen: float

    @property
    def seconds(self) -> float:
        """An upper bound of the time any one of them lost to the host. Steal is counted for
        the whole machine: it may have fallen on another process' CPU time, never more."""
        return self.waited + self.stolen

    def __str__(self) -> str:
        return f"waited for a CPU {self.waited:.3f}s, host steal {self.stolen:.3f}s"


class CpuWatch:
    """Start it before the window a timing check judges and read `starved()` at its end. The
    processes are named by a callable, read at both ends: a server backend may appear during
    the window, and one that is gone counts as 0 at the end, so its part is dropped rather
    than counted negative."""

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self._pids = pids
        self._start = self._read()
        self._steal = steal_seconds()

    def _read(self) -> dict[int, float]:
        return {pid: waited_seconds(pid) for pid in self._pids()}

    def starved(self) -> Starved:
        end = self._read()
        waited = sum(max(0.0, end[pid] - self._start.get(pid, 0.0)) for pid in end)
        return Starved(waited=waited, stolen=steal_seconds() - self._steal)


def backend_pids(dsn: str, application_name: str = "pg_aio_exporter") -> list[int]:
    """The server processes that serve the exporter's connections (same machine)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchall()
    return [int(row[0]) for row in rows]


def assert_median_within(durations: list[float], limit: float, starved: Starved) -> None:
    """The median of `durations` is under `limit`, plus what waiting for a CPU can add to it:
    for the median to exceed limit + x, the half of them at or above it must each have lost x."""
    ranked = sorted(durations)
    at_or_above = len(ranked) - len(ranked) // 2
    allowance = starved.seconds / at_or_above
    assert ranked[len(ranked) // 2] < limit + allowance, (ranked, str(starved))


def assert_overruns_explained(overran: float, starved: Starved, slot: float) -> None:
    """A sample takes milliseconds: to overrun its slot it must have lost at least half of it
    waiting for a CPU (the exporter's or its backend's). So an exporter that got the CPU it
    needed overruns never, and one made slow does on any host."""
    assert overran <= starved.seconds / (slot / 2), (
        f"{overran:.0f} overruns of {slot}s slots, {starved}"
    )

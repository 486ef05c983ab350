"""process_*: the exporter's own CPU, memory, start time and file descriptors, read from /proc
at each render, under the names and help texts every Prometheus client library gives them.

Read here rather than by prometheus_client's ProcessCollector: the daemon used nothing else of
prometheus_client but two formatting helpers, and leaving its import out took one target's
RSS from 40.0-40.2 to 39.5-39.7 MB (docs/performance.md). Like that collector, it writes
nothing where /proc is missing (not Linux)."""

from __future__ import annotations

import math
import os
import resource

from .metricset import header, number

# (name, help, type), in the order the client libraries write them.
FAMILIES = (
    ("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge"),
    ("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge"),
    (
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        "gauge",
    ),
    ("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter"),
    ("process_open_fds", "Number of open file descriptors.", "gauge"),
    ("process_max_fds", "Maximum number of open file descriptors.", "gauge"),
)
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _boot_time() -> float:
    with open("/proc/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def values() -> tuple[float, ...]:
    """FAMILIES' values now, in their order. OSError without /proc."""
    with open("/proc/self/stat", "rb") as stat:
        # The fields after the command, which is in parentheses and may hold spaces: state is
        # field 3 of proc(5), so field n is fields[n - 3].
        fields = stat.read().rpartition(b")")[2].split()
    utime, stime, start, vsize, rss = (float(fields[n - 3]) for n in (14, 15, 22, 23, 24))
    return (
        vsize,
        rss * _PAGE,
        _boot_time() + start / _TICKS,
        (utime + stime) / _TICKS,
        float(len(os.listdir("/proc/self/fd"))),
        _limit(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
    )


def _limit(soft: int) -> float:
    return math.inf if soft == resource.RLIM_INFINITY else float(soft)


def render() -> bytes:
    """The process_* families as exposition text; empty where /proc is missing."""
    try:
        now = values()
    except OSError:
        return b""
    return b"".join(
        header(name, doc, kind) + f"{name} {number(value)}\n".encode()
        for (name, doc, kind), value in zip(FAMILIES, now, strict=True)
    )

"""Shared bench helpers: /proc accounting, a urllib scraper, the peer exporter, the machine.

CPU comes from /proc in clock ticks (10 ms), so every figure divides a long enough run: per
scrape over hundreds of scrapes, per second over tens of seconds.

The benches drive the suite's harnesses (tests/harness.py and its siblings), top-level modules
of tests/ as pytest imports them: run a bench with tests/ and the repository's root on the
import path, as the Makefile's bench targets do: `PYTHONPATH=.:tests python bench/scrape.py`.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness import terminate, wait_for
from pg_aio_exporter.demo.server import LocalServer, free_port

CLK_TCK = os.sysconf("SC_CLK_TCK")
PEER = "prometheus-postgres-exporter"  # Debian's postgres_exporter


def _stat(pid: int) -> list[str]:
    # Fields after the command name, which may contain spaces: [0] is state (field 3).
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads, exited ones included."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def run_seconds(pid: int) -> float:
    """CPU time of a single-threaded process (a PostgreSQL backend) to the nanosecond: the
    scheduler's own sum, not ticks, so that one statement's cost can be read directly."""
    for line in Path(f"/proc/{pid}/sched").read_text().splitlines():
        if line.startswith("se.sum_exec_runtime"):
            return float(line.split(":")[1]) / 1000  # the file says milliseconds
    raise RuntimeError(f"no se.sum_exec_runtime for {pid}")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def server_cpu_seconds(server: LocalServer) -> float:
    """CPU of a whole PostgreSQL server: postmaster, live children, and exited children
    (reaped by the postmaster, so in its cutime/cstime): a connection per scrape counts. A
    child that exited but is not reaped yet counts nowhere: see server_children()."""
    postmaster = _postmaster(server)
    fields = _stat(postmaster)
    total = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    for child in _children(postmaster):
        total += int(child[11]) + int(child[12])
    return total / CLK_TCK


def server_children(server: LocalServer) -> int:
    """Child processes of the postmaster, exited ones not yet reaped included."""
    return len(_children(_postmaster(server)))


def _postmaster(server: LocalServer) -> int:
    return int((server.data_dir / "postmaster.pid").read_text().split()[0])


def _children(postmaster: int) -> list[list[str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            child = _stat(int(entry.name))
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(child[1]) == postmaster:  # ppid
            found.append(child)
    return found


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    return f"{os.cpu_count()} vCPU {model}, Python {platform.python_version()}; {load()}"


def load() -> str:
    """Other engineers' jobs share the machine: every report says how busy it was."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def scrape_once(url: str, gzip: bool = False) -> float:
    """Seconds for one scrape by a fresh urllib client connection, body read fully."""
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310
        resp.read()
    return time.perf_counter() - started


@dataclass
class ScrapeRun:
    median_ms: float
    p95_ms: float
    cpu_ms: float  # exporter CPU per scrape, background work subtracted
    server_cpu_ms: float  # PostgreSQL CPU per scrape, background work subtracted


def scrape_run(
    url: str, pid: int, server: LocalServer, scrapes: int = 200, gzip: bool = False
) -> ScrapeRun:
    """`scrapes` back-to-back scrapes; CPU deltas minus what the processes spend meanwhile
    anyway (measured just before over the same wall time)."""
    scrape_once(url, gzip)  # warm: first connection, first render
    cpu0, pg0, t0 = cpu_seconds(pid), server_cpu_seconds(server), time.perf_counter()
    latencies = [scrape_once(url, gzip) for _ in range(scrapes)]
    cpu1, pg1, t1 = cpu_seconds(pid), server_cpu_seconds(server), time.perf_counter()
    time.sleep(t1 - t0)
    cpu2, pg2 = cpu_seconds(pid), server_cpu_seconds(server)
    latencies.sort()
    return ScrapeRun(
        median_ms=statistics.median(latencies) * 1000,
        p95_ms=latencies[int(len(latencies) * 0.95) - 1] * 1000,
        cpu_ms=max(0.0, (cpu1 - cpu0) - (cpu2 - cpu1)) * 1000 / scrapes,
        server_cpu_ms=max(0.0, (pg1 - pg0) - (pg2 - pg1)) * 1000 / scrapes,
    )


def median_run(runs: list[ScrapeRun]) -> ScrapeRun:
    return ScrapeRun(
        *(statistics.median(getattr(r, f) for r in runs) for f in ScrapeRun.__dataclass_fields__)
    )


class Peer:
    """Debian's postgres_exporter as a plain process on a free port, if installed."""

    def __init__(self, dsn: str) -> None:
        binary = shutil.which(PEER)
        assert binary is not None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.proc = subprocess.Popen(
            [binary, f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=error"],
            env={**os.environ, "DATA_SOURCE_NAME": dsn},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._ready, 15, f"{PEER} to listen")

    @staticmethod
    def version() -> str:
        out = subprocess.run([PEER, "--version"], capture_output=True, text=True, check=False)
        words = (out.stdout + out.stderr).split()
        number = words[words.index("version") + 1] if "version" in words else "?"
        return f"postgres_exporter {number} (Debian)"

    @staticmethod
    def installed() -> bool:
        return shutil.which(PEER) is not None

    def _ready(self) -> bool:
        try:
            scrape_once(self.url)
        except OSError:
            return False
        return True

    def stop(self) -> None:
        terminate(self.proc)


def peer_dsn(server: LocalServer, user: str) -> str:
    # postgres_exporter wants a URI; the local servers run without TLS.
    return f"postgresql://{user}@127.0.0.1:{server.port}/postgres?sslmode=disable"

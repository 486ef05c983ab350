"""pgbench as the suite's judge: 18's pgbench (it drives 16-19 alike) run, its summary read, and
one verdict on "faster" from runs alternating between two settings."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgbins import bin_dir

TPS = re.compile(r"^tps = ([\d.]+)", re.MULTILINE)
LATENCY = re.compile(r"^latency average = ([\d.]+) ms", re.MULTILINE)
# A line of --progress=1 --progress-timestamp (stderr), about the second before its stamp:
# `progress: <epoch> s, <tps> tps, lat <ms> ms stddev <ms>, <n> failed[, lag <ms> ms]` (lag: -R).
PROGRESS = re.compile(
    r"progress: ([0-9.]+) s, ([0-9.]+) tps, lat ([0-9.]+) ms[^\n]*?(?:, lag ([0-9.]+) ms|$)",
    re.MULTILINE,
)
# Parallel workers would take a scan's reads off the client sessions the tests load and count.
SERIAL = {"PGOPTIONS": "-c max_parallel_workers_per_gather=0"}


@dataclass(frozen=True)
class Run:
    tps: float
    latency_ms: float


def parse_pgbench(output: str) -> Run:
    """A run's figures from pgbench's summary (stdout)."""
    tps, latency = TPS.search(output), LATENCY.search(output)
    assert tps and latency, output
    return Run(float(tps.group(1)), float(latency.group(1)))


def pgbench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """pgbench `args` to the end; its output, which must be a success."""
    return subprocess.run(
        [str(bin_dir("18") / "pgbench"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def serial_scans(
    dsn: str, script: Path, clients: int, seconds: int, threads: int = 1
) -> subprocess.Popen[str]:
    """`clients` sessions running `script` for `seconds` on `threads` pgbench threads, their scans
    serial (SERIAL), started and left to the caller."""
    return subprocess.Popen(
        [
            *(str(bin_dir("18") / "pgbench"), "-n", "-c", str(clients), "-j", str(threads)),
            *("-T", str(seconds), "-f", str(script), dsn),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **SERIAL},
    )


def scans_per_second(dsn: str, script: Path, clients: int, seconds: int, threads: int = 1) -> float:
    """pgbench's transactions a second over a run of serial_scans to its end."""
    bench = serial_scans(dsn, script, clients, seconds, threads)
    out, err = bench.communicate(timeout=seconds + 60)
    assert bench.returncode == 0, out + err
    return parse_pgbench(out).tps


def faster_by_alternating_runs(
    base: Callable[[], float], candidate: Callable[[], float], pairs: int
) -> tuple[float, list[float]]:
    """How many times `candidate`'s rate is `base`'s, from `pairs` pairs of runs alternating
    base, candidate, base, ...: the median of each pair's ratio; with every run's rate, in order.

    Per pair, because a pair's two runs are adjacent: load that holds over a pair (another
    agent's build) moves both alike and cancels in their ratio, where sums per side weigh the
    pairs by their rates (a quiet spell's pair counts most) and medians per side may set one
    pair's base run against another pair's candidate. The median of the ratios, because a pair
    that a load swing caught within it (on these 2 cores one run moved by half either way) is
    an outlier that a sum or mean carries: with three pairs it is outvoted (with two, the
    median is their mean)."""
    runs: list[float] = []
    for _ in range(pairs):
        runs += [base(), candidate()]
    ratios = [after / before for before, after in zip(runs[::2], runs[1::2], strict=True)]
    return statistics.median(ratios), runs

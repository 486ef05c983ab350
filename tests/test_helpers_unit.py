"""The suite's own helpers, where they decide what a test run means: a machine that cannot
throttle a disk skips the slow-storage tests with the reason, it does not fail them; pgbench's
verdict "faster" from alternating runs is that of most pairs, whatever the machine's load did
between them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

import slowdisk
from pg_aio_exporter.demo.server import LocalServer
from pgbench_judge import PROGRESS, faster_by_alternating_runs, parse_pgbench

pytestmark = pytest.mark.unit


def test_a_machine_without_the_blkio_controller_skips_slow_storage_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel with cgroup v2 only: no /sys/fs/cgroup/blkio.
    monkeypatch.setattr(slowdisk, "BLKIO", tmp_path / "blkio")
    wanted = "root" if os.geteuid() != 0 else "cgroup v1 blkio controller"
    with pytest.raises(pytest.skip.Exception, match=wanted):
        slowdisk.ThrottledDisk(cast(LocalServer, None), 16)  # refused before the server is used


def rates(values: list[float]) -> Callable[[], float]:
    """A run's rate, each call the next of `values`."""
    left: Iterator[float] = iter(values)
    return lambda: next(left)


def test_faster_by_alternating_runs_is_most_pairs_verdict_whatever_the_load_did() -> None:
    # Runs in order: base 100, candidate 140, base 60, ...: the machine slower from the second
    # pair on, and the third pair's candidate run caught by a swing within it. Each other pair
    # says 1.4x; summed per side 1.10x, the median per side 84 / 80 = 1.05x.
    faster, runs = faster_by_alternating_runs(rates([100, 60, 80]), rates([140, 84, 40]), 3)
    assert runs == [100, 140, 60, 84, 80, 40]
    assert faster == pytest.approx(1.4)
    # Two pairs: their mean.
    faster, _ = faster_by_alternating_runs(rates([100, 50]), rates([140, 80]), 2)
    assert faster == pytest.approx(1.5)


# 18's pgbench, -T 3 -R 20 --progress=1 --progress-timestamp: its summary (stdout, the end) and
# two progress lines (stderr), of which one without -R.
SUMMARY = """number of transactions actually processed: 57
number of failed transactions: 0 (0.000%)
latency average = 2.459 ms
latency stddev = 4.225 ms
rate limit schedule lag: avg 1.351 (max 15.488) ms
initial connection time = 8.825 ms
tps = 19.180501 (without initial connection time)
"""
PROGRESS_LINES = """progress: 1795830723.723 s, 8082.4 tps, lat 0.103 ms stddev 0.514, 0 failed
progress: 1795830726.758 s, 19.0 tps, lat 3.893 ms stddev 6.618, 0 failed, lag 1.545 ms
"""


def test_pgbench_summary_and_progress_lines_are_read() -> None:
    run = parse_pgbench(SUMMARY)
    assert (run.tps, run.latency_ms) == (19.180501, 2.459)
    with pytest.raises(AssertionError, match="latency average"):
        parse_pgbench(SUMMARY.replace("tps = ", "tps: "))
    lines = [m.groups() for m in PROGRESS.finditer(PROGRESS_LINES)]
    assert lines == [
        ("1795830723.723", "8082.4", "0.103", None),
        ("1795830726.758", "19.0", "3.893", "1.545"),
    ]

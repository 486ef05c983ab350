"""What the window timing checks need of their CPU allowance (tests/cpu.py's WINDOW_CAPS and
OVERRUN_CAP), on this host as it is or with `stress-ng --cpu N` beside it.

Runs the tests that hold those checks (a poll's age, several targets' first polls, a recovery,
sample overruns) --rounds times with PG_AIO_TIMING_RECORD set: each check writes what it needed
of its allowance (how far past its limit it was; for overruns, half a slot per overrun), what
its processes waited for a CPU and the host's steal over its window, and its cap. Prints one
row per kind: the largest need against the waits, and whether it is under the cap. A check's
own failure ends nothing: the table is the result (a failed round is reported).

Usage: python bench/timing_allowance.py [--rounds 3] [--stress N] [--record FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = [
    "tests/test_core.py::test_server_down_scrapes_stay_fast_and_recover",
    "tests/test_core.py::test_targets_poll_spread_over_the_interval",
    "tests/test_supervision.py",
    "tests/test_sampler.py::test_idle_server",
    "tests/test_sampler.py::test_connecting_is_no_overrun",
]


def run(rounds: int, record: Path) -> list[int]:
    codes = []
    for number in range(1, rounds + 1):
        started = time.monotonic()
        code = subprocess.call(
            [sys.executable, "-m", "pytest", *TESTS, "-q", "-p", "no:cacheprovider", "-n", "2"],
            cwd=ROOT,
            env={**os.environ, "PG_AIO_TIMING_RECORD": str(record)},
        )
        print(f"round {number}/{rounds}: exit {code}, {time.monotonic() - started:.0f} s")
        codes.append(code)
    return codes


def table(record: Path) -> None:
    kinds: dict[str, list[dict[str, float]]] = defaultdict(list)
    for line in record.read_text().splitlines():
        check = json.loads(line)
        kinds[check["kind"]].append(check)
    print("| kind | checks | load average | largest need | its waits + steal | its cap |")
    print("|---|---|---|---|---|---|")
    for kind, checks in sorted(kinds.items()):
        # Overruns' windows differ (seconds to minutes): their need is a share of the window.
        share = kind == "overruns"
        worst = max(checks, key=lambda c: c["need"] / c["window"] if share else c["need"])
        loads = [c["load"] for c in checks]
        need = f"{worst['need']:.2f} s" + (
            f" ({worst['need'] / worst['window']:.3f} of {worst['window']:.1f} s)" if share else ""
        )
        print(
            f"| {kind} | {len(checks)} | {min(loads):.1f}-{max(loads):.1f} | {need} |"
            f" {worst['waited'] + worst['stolen']:.2f} s over {worst['window']:.1f} s |"
            f" {worst['cap']:.2f} s |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--stress", type=int, default=0, metavar="N", help="stress-ng --cpu N beside it"
    )
    parser.add_argument("--record", type=Path, help="keep the checks' lines in this file")
    args = parser.parse_args()
    hog = None
    if args.stress:
        hog = subprocess.Popen(
            ["stress-ng", "--cpu", str(args.stress), "--quiet"], start_new_session=True
        )
        time.sleep(2)
    with tempfile.TemporaryDirectory() as tmp:
        record = args.record or Path(tmp) / "checks.jsonl"
        try:
            codes = run(args.rounds, record)
        finally:
            if hog is not None:
                os.killpg(hog.pid, signal.SIGTERM)
                hog.wait()
        table(record)
    return 1 if any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())

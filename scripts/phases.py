#!/usr/bin/env python3
"""Where the time of `make test` goes: each phase run through `phases.py run NAME -- CMD...`
is timed (wall clock, the CPU its processes used, the CPU the host's hypervisor stole
meanwhile) and appended to a log; `phases.py summary` prints the table at the end.

A failing phase prints the table so far and exits with the phase's own code, so `make test`
still stops at the first failure. Standard library only: it runs before any virtualenv."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from pathlib import Path

LOG = Path(os.environ.get("PHASES_LOG", ".cache/phases.tsv"))
PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Servers a phase starts detach from it (pg_ctl, Prometheus under a test): as their
    subreaper this process reaps them, so their CPU counts in the phase's."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap() -> None:
    with_children = True
    while with_children:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        with_children = pid != 0


def host_cpu() -> tuple[float, float]:
    """(steal, all) CPU seconds of the host so far, summed over its cores (/proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(value) for value in fields[:8]]  # user .. steal; guest is inside user
    hz = os.sysconf("SC_CLK_TCK")
    return ticks[7] / hz, sum(ticks) / hz


def run(name: str, argv: list[str]) -> int:
    steal0, all0 = host_cpu()
    before = os.times()
    start = time.monotonic()
    adopt_orphans()
    code = subprocess.call(argv)
    wall = time.monotonic() - start
    reap()
    after = os.times()
    steal1, all1 = host_cpu()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    steal = steal1 - steal0
    share = steal / (all1 - all0) if all1 > all0 else 0.0
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a") as log:
        log.write(f"{name}\t{wall:.1f}\t{cpu:.1f}\t{steal:.1f}\t{share:.3f}\t{code}\n")
    if code != 0:
        summary()
    return code


def summary() -> int:
    rows = [line.split("\t") for line in LOG.read_text().splitlines()] if LOG.exists() else []
    print(f"\n{'phase':<16}{'wall':>9}{'cpu':>9}{'steal':>9}{'steal %':>9}  result")
    for name, wall, cpu, steal, share, code in rows:
        result = "ok" if code == "0" else f"exit {code}"
        print(
            f"{name:<16}{float(wall):>8.0f}s{float(cpu):>8.0f}s{float(steal):>8.0f}s"
            f"{100 * float(share):>8.1f}%  {result}"
        )
    total = sum(float(row[1]) for row in rows)
    print(f"{'total':<16}{total:>8.0f}s ({total / 60:.1f} min)")
    return 0


def main(args: list[str]) -> int:
    if args[:1] == ["start"]:
        LOG.unlink(missing_ok=True)
        return 0
    if args[:1] == ["summary"]:
        return summary()
    if len(args) >= 4 and args[0] == "run" and args[2] == "--":
        return run(args[1], args[3:])
    print("usage: phases.py start | run NAME -- CMD... | summary", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

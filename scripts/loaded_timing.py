#!/usr/bin/env python3
"""The timing tests (`-m timing`: each judges the exporter's own timing against the CPU its
processes got) run again and again while `stress-ng --cpu N` keeps every core busy: a busy host
must read as a busy host, never as a slow exporter. One line per run (exit code, wall time, the
host's steal over it), a non-zero exit if any run failed. Standard library only.

    scripts/loaded_timing.py RUNS -- PYTEST_COMMAND...
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from phases import host_cpu  # its sibling: a script's own folder is on sys.path


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    runs, command = int(argv[0]), argv[2:]
    cores = os.cpu_count() or 1
    hog = subprocess.Popen(["stress-ng", "--cpu", str(cores), "--quiet"], start_new_session=True)
    failed = 0
    try:
        time.sleep(2)  # the hogs running before the first test starts
        for number in range(1, runs + 1):
            steal0, all0 = host_cpu()
            started = time.monotonic()
            code = subprocess.call(command)
            wall = time.monotonic() - started
            steal1, all1 = host_cpu()
            load = os.getloadavg()[0]
            failed += code != 0
            share = (steal1 - steal0) / (all1 - all0) if all1 > all0 else 0.0
            print(
                f"loaded run {number}/{runs}: exit {code}, {wall:.0f} s, host steal"
                f" {steal1 - steal0:.1f} s ({share:.1%}), load average {load:.1f}",
                flush=True,
            )
    finally:
        os.killpg(hog.pid, signal.SIGTERM)
        hog.wait()
    print(f"{runs - failed} of {runs} runs green under stress-ng --cpu {cores}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

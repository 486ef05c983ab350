"""`pg-aio-exporter demo` (what `make demo` runs): real reads, bulkread growing, clean exit."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from harness import labels, parse, wait_for
from pg_aio_exporter.demo.server import free_port


def test_demo_serves_growing_bulkread_reads_and_cleans_up(tmp_path: Path):
    port = free_port()
    log_path = tmp_path / "demo.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pg_aio_exporter",
                "demo",
                "--table-mb",
                "48",
                "--poll-interval",
                "1s",
                "--web.listen-address",
                f"127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "/metrics" in log_path.read_text(), 120, "the demo to print its URL")
        assert f"http://127.0.0.1:{port}/metrics" in log_path.read_text()
        bulk = labels(
            target="default", backend_type="client backend", object="relation", context="bulkread"
        )

        def reads() -> float:
            url = f"http://127.0.0.1:{port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return parse(resp.read().decode()).get("pg_stat_io_reads_total", {}).get(bulk, 0)

        first = wait_for(reads, 30, "bulkread reads")
        time.sleep(3)
        assert reads() > first
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert proc.returncode == 0
    text = log_path.read_text()
    data_dir = re.search(r"data=(\S+)", text)
    assert data_dir, text
    assert not Path(data_dir.group(1)).exists(), "the demo must remove its temp dir"

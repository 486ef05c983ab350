"""`make demo`, the README's command: real reads, bulkread growing, clean exit on Ctrl-C; with
`--io-method io_uring` on the cached liburing build, and a one-line error without it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from harness import REPO, Samples, labels, parse, wait_for
from pg_aio_exporter.demo.server import free_port

BULK = labels(
    target="default", backend_type="client backend", object="relation", context="bulkread"
)


@contextlib.contextmanager
def make_demo(tmp_path: Path, *args: str) -> Iterator[str]:
    """`make demo DEMO_ARGS=...` until its URL is printed; yields the URL, then Ctrl-C and
    checks that the demo cleaned up after itself."""
    port = free_port()
    log_path = tmp_path / "demo.log"
    with log_path.open("w") as log:
        # The README's command itself, in its own process group so that Ctrl-C reaches make
        # and the exporter under it as it would from a terminal.
        demo_args = " ".join(
            ["--table-mb 48 --poll-interval 1s", f"--web.listen-address 127.0.0.1:{port}", *args]
        )
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "demo", f"DEMO_ARGS={demo_args}"],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(lambda: "/metrics" in log_path.read_text(), 120, "the demo to print its URL")
        url = f"http://127.0.0.1:{port}/metrics"
        assert url in log_path.read_text()
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(60)
    # make itself ends by the signal, as under a terminal's Ctrl-C; the demo must still have
    # cleaned up after itself, without a traceback.
    assert proc.returncode in (0, -signal.SIGINT)
    text = log_path.read_text()
    assert "demo stopped, temp dir removed" in text
    assert "Traceback" not in text
    data_dir = re.search(r"data=(\S+)", text)
    assert data_dir, text
    assert not Path(data_dir.group(1)).exists(), "the demo must remove its temp dir"


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310
        return parse(resp.read().decode())


def growing_bulkread_reads(url: str) -> Samples:
    first = wait_for(lambda: scrape(url).get("pg_stat_io_reads_total", {}).get(BULK), 30, "reads")
    time.sleep(3)
    later = scrape(url)
    assert later["pg_stat_io_reads_total"][BULK] > first
    return later


def test_demo_serves_growing_bulkread_reads_and_cleans_up(tmp_path: Path):
    with make_demo(tmp_path) as url:
        growing_bulkread_reads(url)


def test_demo_with_io_uring(tmp_path: Path):
    with make_demo(tmp_path, "--io-method io_uring") as url:
        scraped = growing_bulkread_reads(url)
    assert scraped["pg_aio_io_method"][labels(target="default", io_method="io_uring")] == 1
    assert scraped["pg_aio_io_method"][labels(target="default", io_method="worker")] == 0
    assert not [name for name in scraped if name.startswith("pg_aio_io_worker")]


def test_demo_io_uring_without_the_build_says_what_to_do(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "demo", "--io-method", "io_uring"],
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},  # an empty cache: no build
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "needs PostgreSQL 18 built with liburing" in lines[0]
    assert "scripts/build-postgres-io-uring.py" in lines[0]

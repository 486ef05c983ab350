"""`make demo`, the README's command: real reads, bulkread growing, clean exit on Ctrl-C, and
the machine as it was (no directory opened up, no OS user left behind)."""

from __future__ import annotations

import os
import pwd
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from deploy_files import run
from harness import REPO, labels, parse, wait_for
from pg_aio_exporter.demo import server as demo_server
from pg_aio_exporter.demo.server import LocalServer, embedded_bin_dir, free_port


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def modes(paths: list[Path]) -> dict[Path, str]:
    return {path: oct(path.stat().st_mode) for path in paths}


def test_demo_serves_growing_bulkread_reads_and_cleans_up(tmp_path: Path):
    # The clone made private, as a home directory usually is (0700 /root): as root, the demo
    # must run its server without opening any of these up to the server's OS user.
    ancestors = [embedded_bin_dir(), *embedded_bin_dir().parents]
    repo_mode = REPO.stat().st_mode
    REPO.chmod(0o700)
    before = modes(ancestors)
    user_before = user_exists(demo_server.OS_USER)
    try:
        run_demo(tmp_path)
        assert modes(ancestors) == before, "the demo changed directory modes"
        assert user_exists(demo_server.OS_USER) == user_before
    finally:
        REPO.chmod(repo_mode)


def run_demo(tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "demo.log"
    with log_path.open("w") as log:
        # The README's command itself, in its own process group so that Ctrl-C reaches make
        # and the exporter under it as it would from a terminal.
        demo_args = f"--table-mb 48 --poll-interval 1s --web.listen-address 127.0.0.1:{port}"
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "demo", f"DEMO_ARGS={demo_args}"],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # The first `make demo` of a clone also installs the package with its demo extra.
        wait_for(lambda: "/metrics" in log_path.read_text(), 300, "the demo to print its URL")
        assert f"http://127.0.0.1:{port}/metrics" in log_path.read_text()
        bulk = labels(
            target="demo", backend_type="client backend", object="relation", context="bulkread"
        )

        def reads() -> float:
            url = f"http://127.0.0.1:{port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return parse(resp.read().decode()).get("pg_stat_io_reads_total", {}).get(bulk, 0)

        first = wait_for(reads, 30, "bulkread reads")
        time.sleep(3)
        assert reads() > first
        # The report command it prints works as printed, from the README's directory.
        command = re.search(r"report on it, in another terminal: (.+)", log_path.read_text())
        assert command, log_path.read_text()
        report = run(*shlex.split(command.group(1)), "--duration", "10s")
        assert report.returncode == 0, report.stderr
        assert "Reads are not storage-bound" in " ".join(report.stdout.split())
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


def test_an_os_user_created_for_the_demo_is_removed(monkeypatch: pytest.MonkeyPatch):
    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another OS user")
    # A name of this test's own: the suite's servers share the usual one.
    name = f"pgaio_t{os.getpid()}"
    monkeypatch.setattr(demo_server, "OS_USER", name)
    server = LocalServer.create()
    try:
        assert server.created_user and user_exists(name)
        server.start()
    finally:
        server.destroy(remove_created_user=True)
    assert not user_exists(name)

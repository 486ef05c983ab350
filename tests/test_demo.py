"""`make demo`, the README's command: real reads, bulkread growing, clean exit on Ctrl-C, and
the machine as it was (no directory opened up, no OS user left behind); with `--io-method
io_uring` on the cached liburing build, and a one-line error without it."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy_files import run
from harness import (
    CTRL_C,
    REPO,
    Samples,
    assert_one_line,
    interrupt,
    labels,
    parse,
    passes_in_background,
    wait_for,
)
from pg_aio_exporter.demo import server as demo_server
from pg_aio_exporter.demo.server import LocalServer, embedded_bin_dir, free_port
from pgbins import DEBIAN_MAJOR, debian_release

BULK = labels(target="demo", backend_type="client backend", object="relation", context="bulkread")


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def modes(paths: list[Path]) -> dict[Path, str]:
    return {path: oct(path.stat().st_mode) for path in paths}


# It closes the clone to other users, which the servers of tests running beside it need open:
# `make test` runs it after the parallel run, alone.
@pytest.mark.exclusive
def test_demo_serves_growing_bulkread_reads_and_cleans_up(tmp_path: Path) -> None:
    # The clone made private, as a home directory usually is (0700 /root): as root, the demo
    # must run its server without opening any of these up to the server's OS user.
    ancestors = [embedded_bin_dir(), *embedded_bin_dir().parents]
    repo_mode = REPO.stat().st_mode
    REPO.chmod(0o700)
    before = modes(ancestors)
    user_before = user_exists(demo_server.OS_USER)
    try:
        with make_demo(tmp_path) as url:
            growing_bulkread_reads(url)
            # The report command it prints works as printed, from the README's directory.
            printed = (tmp_path / "demo.log").read_text()
            command = re.search(r"report on it, in another terminal: (.+)", printed)
            assert command, printed
            report = run(*shlex.split(command.group(1)), "--duration", "10s")
            assert report.returncode == 0, report.stderr
            # What it finds depends on whether the demo's scans ended inside the 10 s window
            # (PostgreSQL counts a scan's reads when it ends): tests/test_report.py judges that.
            assert "Verdict" in report.stdout and "io_method worker" in report.stdout
        assert modes(ancestors) == before, "the demo changed directory modes"
        assert user_exists(demo_server.OS_USER) == user_before
    finally:
        REPO.chmod(repo_mode)


@contextlib.contextmanager
def make_demo(
    tmp_path: Path, *args: str, kill: signal.Signals | None = None, until: str = "/metrics"
) -> Iterator[str]:
    """`make demo DEMO_ARGS=...` until `until` is in its log (by default its URL is printed);
    yields the URL, then stops its process group, with Ctrl-C or else `kill`, and checks that
    the demo cleaned up after itself."""
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
        # The first `make demo` of a clone also installs the package with its demo extra.
        wait_for(lambda: until in log_path.read_text(), 300, f"the demo to log {until!r}")
        url = f"http://127.0.0.1:{port}/metrics"
        yield url
    finally:
        if kill is None:
            interrupt(proc, group=True)
        else:
            os.killpg(proc.pid, kill)
        proc.wait(60)
    # make itself ends by the signal, as under a terminal's Ctrl-C; the demo must still have
    # cleaned up after itself, without a traceback.
    assert proc.returncode in (0, -(kill or CTRL_C))
    text = log_path.read_text()
    assert "demo stopped, temp dir removed" in text, text
    assert "Traceback" not in text
    data_dir = re.search(r"data=(\S+)", text)
    assert data_dir, text
    assert not Path(data_dir.group(1)).exists(), "the demo must remove its temp dir"


def test_demo_cleans_up_when_killed_while_it_sets_up(tmp_path: Path) -> None:
    """`kill` (SIGTERM to its process group, as a shell's `kill %1` sends) while the demo
    creates its table: it stops its server and removes its temp dir, as on Ctrl-C."""
    with make_demo(tmp_path, "--table-mb 400", kill=signal.SIGTERM, until="creating table"):
        assert "/metrics" not in (tmp_path / "demo.log").read_text(), "stopped too late"


UNDER_IGNORED = (
    "tests/test_workload_time.py::test_pgbench_stops_when_the_report_is_done",
    "tests/test_demo.py::test_demo_cleans_up_when_killed_while_it_sets_up",
)


def test_suite_and_demo_stop_their_children_under_a_parent_ignoring_signals() -> None:
    """A part of the suite that stops pgbench, and `make demo` stopped by `kill`, run by a
    pytest whose parent ignores SIGINT, SIGQUIT and SIGHUP (`trap ''`, as a shell does for
    `nohup ... &`): they pass as in a terminal."""
    passes_in_background(UNDER_IGNORED, timeout=500)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310
        return parse(resp.read().decode())


def growing_bulkread_reads(url: str) -> Samples:
    first = wait_for(lambda: scrape(url).get("pg_stat_io_reads_total", {}).get(BULK), 30, "reads")

    def grown() -> Samples | None:
        later = scrape(url)
        return later if later["pg_stat_io_reads_total"][BULK] > first else None

    return wait_for(grown, 30, "bulkread reads growing")


def test_demo_with_io_uring(tmp_path: Path) -> None:
    with make_demo(tmp_path, "--io-method io_uring") as url:
        scraped = growing_bulkread_reads(url)
    assert scraped["pg_aio_io_method"][labels(target="demo", io_method="io_uring")] == 1
    assert scraped["pg_aio_io_method"][labels(target="demo", io_method="worker")] == 0
    assert not [name for name in scraped if name.startswith("pg_aio_io_worker")]


def test_demo_on_postgres_19(tmp_path: Path) -> None:
    """The README's `make demo DEMO_ARGS="--postgres 19"`: Debian's 19 (pgbins.debian_release
    fetches it first, as `make test` does, or gives the only reason to skip)."""
    if (why := debian_release(DEBIAN_MAJOR)) is not None:
        pytest.skip(f"PostgreSQL {DEBIAN_MAJOR} not run: {why}")
    with make_demo(tmp_path, f"--postgres {DEBIAN_MAJOR}") as url:
        scraped = growing_bulkread_reads(url)
    (info,) = scraped["pg_server_info"]
    assert dict(info)["version_num"].startswith(DEBIAN_MAJOR), info
    assert scraped["pg_settings_io_max_workers"][labels(target="demo")] > 0


def test_demo_io_uring_without_the_build_says_what_to_do(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "demo", "--io-method", "io_uring"],
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},  # an empty cache: no build
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert_one_line(
        result, 2, "needs PostgreSQL 18 built with liburing", "scripts/build-postgres-io-uring.py"
    )


def test_an_os_user_created_for_the_demo_is_removed(monkeypatch: pytest.MonkeyPatch) -> None:
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

"""Test harness: the real exporter as a subprocess, scraping, and pg_stat_io read independently."""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from pg_aio_exporter.config.targets import parse_duration
from pg_aio_exporter.demo.server import LocalServer, free_port
from pg_aio_exporter.demo.workload import seq_scan

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[1]
# The `monitor` role's password on the session's password-auth server (conftest.pw_server).
MONITOR_PASSWORD = "R1ght-Monitor-Pw-7391"


def compiled_locale(name: str) -> Path:
    """A directory for LOCPATH holding locale `name` (e.g. de_DE.UTF-8), compiled from the
    system's definitions (Debian's `locales` data) without installing it system-wide; readable
    by the server's OS user."""
    into = Path(tempfile.mkdtemp(prefix="locales-"))
    language, _, charmap = name.partition(".")
    subprocess.run(
        ["localedef", "-i", language, "-f", charmap or "UTF-8", str(into / name)],
        check=True,
        capture_output=True,
    )
    for path in [into, *into.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return into


def assert_one_line(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """A command that failed as configuration errors must: exit `code`, nothing on stdout, one
    line on stderr saying "error: " and each of `needles`. Returns that line."""
    assert result.returncode == code, result
    assert result.stdout == "", result.stdout
    lines = result.stderr.removesuffix("\n").split("\n")
    assert len(lines) == 1, result.stderr
    assert "error: " in lines[0], lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


Labels = frozenset[tuple[str, str]]
Samples = dict[str, dict[Labels, float]]


def wait_for(check: Callable[[], T | None], timeout: float, what: str, every: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return out


def labels(**kw: str) -> Labels:
    return frozenset(kw.items())


def client_wait(samples: Samples, wait_type: str, wait: str) -> float:
    """Client backend samples in one wait event so far."""
    key = labels(
        target="default", backend_type="client backend", wait_event_type=wait_type, wait_event=wait
    )
    return samples.get("pg_aio_wait_event_samples_total", {}).get(key, 0.0)


def in_flight(samples: Samples, operation: str) -> float:
    """pg_aios handles of one operation, in any state, summed over samples so far."""
    series = samples.get("pg_aio_in_flight_samples_total", {})
    return sum(v for k, v in series.items() if dict(k)["operation"] == operation)


class Exporter:
    """`python -m pg_aio_exporter ARGS` on a free port, its stderr kept in a file."""

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        target_name: str | None = "default",
    ) -> None:
        self.port = free_port()
        self.args = args
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="exporter-", suffix=".log")[1])
        # Read after stop() too (shutdown lines): removed when the test process ends.
        atexit.register(self.log_path.unlink, missing_ok=True)
        self._log = self.log_path.open("w")
        if "--dsn" in args and "--target-name" not in args and target_name is not None:
            # The suite's one --dsn target is `default`; target_name=None leaves it unnamed
            # (tests/test_fleet.py checks the name it then gets from its DSN).
            args = (*args, "--target-name", target_name)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pg_aio_exporter",
                "--web.listen-address",
                f"127.0.0.1:{self.port}",
                *args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        try:
            wait_for(self._ready, 15, "exporter to listen")
        except BaseException:
            # No object to stop() is handed back: a process that never listened would run on.
            terminate(self.proc)
            self._log.close()
            raise

    @property
    def sample_interval(self) -> float:
        """Seconds between samples, as given (default 1 s)."""
        given = (
            self.args[self.args.index("--sample-interval") + 1]
            if ("--sample-interval" in self.args)
            else "1s"
        )
        return parse_duration(given, what="--sample-interval")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"exporter exited {self.proc.returncode}: {self.logs()}")
        try:
            return self.get("/healthz")[0] == 200
        except OSError:
            return False

    def get(self, path: str, timeout: float = 5) -> tuple[int, str]:
        with urllib.request.urlopen(  # noqa: S310
            self.url + path, timeout=timeout, context=self.tls
        ) as resp:
            return resp.status, resp.read().decode()

    def text(self) -> str:
        return self.get("/metrics")[1]

    def scrape(self) -> Samples:
        return parse(self.text())

    def value(self, name: str, **kw: str) -> float | None:
        return self.scrape().get(name, {}).get(labels(**kw))

    def last_poll(self) -> float:
        series = self.scrape().get("pg_aio_exporter_last_poll_success_timestamp_seconds", {})
        return max(series.values(), default=0.0)

    def wait_poll(self, after: float | None = None, timeout: float = 30) -> Samples:
        """Scrape once a poll stamped after `after` (default: now) has been published: the poll
        read the server after that moment."""
        after = time.time() if after is None else after

        def newer() -> Samples | None:
            samples = self.scrape()
            stamps = samples.get("pg_aio_exporter_last_poll_success_timestamp_seconds", {})
            return samples if max(stamps.values(), default=0.0) > after else None

        return wait_for(newer, timeout, "a new poll")

    def logs(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> int:
        terminate(self.proc)
        self._log.close()
        return self.proc.returncode


def terminate(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    """SIGTERM, and SIGKILL if it has not exited after `grace` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def terminate_for_stderr(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    """SIGTERM, and what `proc` wrote to its stderr pipe (pgbench: its progress lines). Not
    SIGINT: a shell starts a background job (`nohup make test &`) with SIGINT ignored, and a
    child inherits that (conftest.py restores it for the suite's children; SIGTERM needs not)."""
    proc.terminate()
    _, stderr = proc.communicate(timeout=timeout)
    return stderr


def ignores_sigint(pid: int) -> bool:
    """Whether process `pid` ignores SIGINT (its SigIgn mask; an ignored disposition survives
    exec, so a child has it from any ancestor that set it)."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(mask, 16) >> (signal.SIGINT - 1) & 1)


CTRL_C = signal.SIGINT  # what a terminal sends its foreground process group on Ctrl-C


def interrupt(proc: subprocess.Popen[Any], *, group: bool = False) -> None:
    """Ctrl-C for `proc`, or for its process group with `group`, as a terminal sends it: the
    one place the suite sends SIGINT (test_helpers_unit holds every other file to that). A
    child that ignores it, as one started under `nohup ... &` would without conftest.py's
    restore, fails here, not as a wait for it timing out far from the cause (issue 48)."""
    if proc.poll() is not None:
        return
    assert not ignores_sigint(proc.pid), (
        f"{proc.args!r} ignores SIGINT, inherited from a parent started in the background:"
        " Ctrl-C would not stop it (conftest.py restores SIGINT for the suite's children)"
    )
    if group:
        os.killpg(proc.pid, CTRL_C)
    else:
        proc.send_signal(CTRL_C)


# A shell starts a background job (`nohup make test > log 2>&1 &`, cron, CI scripts) with these
# ignored, and every child inherits that unless it sets its own handler.
BACKGROUND_IGNORED = ("INT", "QUIT", "HUP")


def passes_in_background(nodes: Sequence[str], timeout: float) -> None:
    """The tests `nodes` pass when run by a pytest started as a background job is (its parent
    ignoring BACKGROUND_IGNORED, `trap ''`). `timeout` below pytest-timeout's 600 s, so that a
    failure is the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    run = shlex.join([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *nodes])
    result = subprocess.run(
        ["sh", "-c", f"trap '' {' '.join(BACKGROUND_IGNORED)}; exec {run}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"{len(nodes)} passed" in result.stdout, result.stdout[-4000:]


OBSERVER = "test_observer"


def observer(dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection for reading pg_stat_io whose own catalog reads are already flushed, so that
    reading the view does not itself move the counters."""
    conn = psycopg.connect(dsn, autocommit=True, application_name=OBSERVER)
    conn.execute("SELECT * FROM pg_stat_io")
    flush_stats(conn)
    return conn


def flush_stats(conn: psycopg.Connection[Any]) -> None:
    # The flag makes the backend flush pending stats when it next goes idle, which happens
    # before the reply reaches us.
    conn.execute("SELECT pg_stat_force_next_flush()")


def pg_stat_io(conn: psycopg.Connection[Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """pg_stat_io read by the test itself, keyed by (backend_type, object, context)."""
    cur = conn.execute("SELECT * FROM pg_stat_io")
    names = [d.name for d in cur.description or []]
    rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    return {(r["backend_type"], r["object"], r["context"]): r for r in rows}


def set_io_workers(server: LocalServer, count: int | None) -> None:
    """ALTER SYSTEM SET io_workers and reload (no restart needed), then wait until `count` io
    workers run; None resets it to the configuration file's value (not waited for)."""
    value = "RESET io_workers" if count is None else f"SET io_workers = {count}"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM {value}")
        conn.execute("SELECT pg_reload_conf()")
        if count is None:
            return

        def running() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'io worker'"
            ).fetchone()
            return row is not None and row[0] == count

        wait_for(running, 10, f"{count} io workers")


@contextmanager
def scanning(
    dsn: str,
    tables: Sequence[str],
    *,
    rows: int | None = None,
    together: bool = False,
    settle: float = 0.0,
    release: Callable[[], object] | None = None,
) -> Iterator[None]:
    """One client per entry of `tables`, scanning that table sequentially over and over until
    the block ends (parallelism off: the reads stay on the client backends). `rows`: only the
    first rows of it per statement; `together`: every client starts its first scan at once
    (two scans of one table then synchronize, synchronize_seqscans); `settle`: seconds to
    wait before the block, every client connected and reading; `release`: called at the end
    before the clients are stopped (slowed storage made fast again, so that the scans under
    way end soon)."""
    stop = threading.Event()
    start = threading.Barrier(len(tables)) if together else None

    def scan(table: str) -> None:
        source = table if rows is None else f"(SELECT payload FROM {table} LIMIT {rows}) s"
        with psycopg.connect(dsn, autocommit=True) as conn:
            if start is not None:
                start.wait(30)
            while not stop.is_set():
                seq_scan(conn, source)

    clients = [threading.Thread(target=scan, args=(table,)) for table in tables]
    for client in clients:
        client.start()
    try:
        time.sleep(settle)
        yield
    finally:
        stop.set()
        if release is not None:
            release()
        for client in clients:
            client.join(60)

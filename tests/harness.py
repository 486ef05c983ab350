"""Test harness: the real exporter as a subprocess, scraping, and pg_stat_io read independently."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from pg_aio_exporter.demo.server import free_port

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
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="exporter-", suffix=".log")[1])
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
        wait_for(self._ready, 15, "exporter to listen")

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

"""Runtime faults keep the exporter up: pg_up 0, errors counted by kind, one log line per
streak, and no password anywhere in logs, metrics or pages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from harness import Exporter, labels, wait_for
from pg_aio_exporter.demo.server import LocalServer, free_port

RIGHT = "R1ght-Passw0rd-xyz"
WRONG = "Wr0ng-Passw0rd-abc"


@pytest.fixture(scope="module")
def pw_server() -> Iterator[LocalServer]:
    server = LocalServer.create(hba=("host all monitor 127.0.0.1/32 scram-sha-256",))
    server.start()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE monitor LOGIN PASSWORD '{RIGHT}' IN ROLE pg_monitor")
    yield server
    server.destroy()


def everything_shown(exp: Exporter) -> str:
    return exp.text() + exp.get("/")[1] + exp.logs()


def assert_failing(exp: Exporter, kind: str) -> str:
    key = labels(target="default", collector="connection", kind=kind)
    wait_for(
        lambda: exp.scrape().get("pg_aio_exporter_poll_errors_total", {}).get(key, 0) >= 3,
        30,
        f"three {kind} errors",
    )
    samples = exp.scrape()
    assert samples["pg_up"][labels(target="default")] == 0
    assert exp.proc.poll() is None, "the exporter must keep running"
    log = exp.logs()
    assert log.count("poll failed") == 1, log
    assert f"kind={kind}" in log
    return log


def test_wrong_password(pw_server: LocalServer):
    exp = Exporter("--dsn", pw_server.dsn(user="monitor", password=WRONG), "--poll-interval", "1s")
    try:
        log = assert_failing(exp, "auth")
        assert "password authentication failed" in log
        assert WRONG not in everything_shown(exp)
    finally:
        exp.stop()


def test_right_password_from_password_file(pw_server: LocalServer, tmp_path: Path):
    (tmp_path / "pw").write_text(RIGHT + "\n")
    dsn = pw_server.dsn(user="monitor")
    (tmp_path / "c.yaml").write_text(
        f"targets:\n  - name: main\n    dsn: '{dsn}'\n    password_file: {tmp_path / 'pw'}\n"
        "    labels: {cluster: demo}\n"
    )
    exp = Exporter("--config", str(tmp_path / "c.yaml"), "--poll-interval", "1s")
    try:
        samples = exp.wait_poll()
        assert samples["pg_up"][labels(target="main", cluster="demo")] == 1
        assert RIGHT not in everything_shown(exp)
    finally:
        exp.stop()


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "no-such-host.invalid"], ids=["refused", "unresolvable"]
)
def test_unreachable(host: str):
    port = free_port()  # nothing listens there
    dsn = f"postgresql://app:{WRONG}@{host}:{port}/postgres"
    exp = Exporter("--dsn", dsn, "--poll-interval", "1s")
    try:
        started = time.perf_counter()
        exp.get("/metrics")
        assert time.perf_counter() - started < 0.05
        assert_failing(exp, "connection")
        assert WRONG not in everything_shown(exp)
    finally:
        exp.stop()

"""Passwords read again at every (re)connect: a password rotated in the password_file, or a
token from password_command, keeps the exporter up with no restart; a failing command is an
authentication error, logged once per failure streak, and no secret reaches a log or a page."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from harness import Exporter, labels, wait_for
from pg_aio_exporter.demo.server import LocalServer

ROLE = "rotating"  # conftest.pw_server makes it log in with a password over TCP
FAST = ("--poll-interval", "1s", "--sample-interval", "200ms", "--timeout", "2s")
T = labels(target="rot")
AUTH = labels(target="rot", collector="connection", kind="auth")


@pytest.fixture
def role(pw_server: LocalServer) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """The rotating role, and a superuser session that changes its password."""
    with psycopg.connect(pw_server.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD 'Rot-one-1111' IN ROLE pg_monitor")
        try:
            yield admin
        finally:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (ROLE,),
            )
            admin.execute(f"DROP ROLE {ROLE}")


def rotate(admin: psycopg.Connection[tuple[object, ...]], password: str) -> None:
    admin.execute(f"ALTER ROLE {ROLE} PASSWORD '{password}'")


def kick(admin: psycopg.Connection[tuple[object, ...]]) -> float:
    """Terminate the exporter's session, as a failover or an idle timeout would; the moment."""
    moment = time.time()
    (killed,) = admin.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = %s",
        (ROLE,),
    ).fetchone() or (0,)
    assert killed == 1, killed
    return moment


def start(pw_server: LocalServer, tmp_path: Path, source: str) -> Exporter:
    dsn = pw_server.dsn(user=ROLE)
    config = tmp_path / "targets.yaml"
    config.write_text(f"targets:\n  - name: rot\n    dsn: '{dsn}'\n{source}")
    return Exporter("--config", str(config), *FAST)


def auth_errors(exp: Exporter) -> float:
    return exp.scrape().get("pg_aio_exporter_poll_errors_total", {}).get(AUTH, 0.0)


def wait_up(exp: Exporter, after: float) -> None:
    def up() -> bool:
        return exp.wait_poll(after=after)["pg_up"][T] == 1

    wait_for(up, 30, "pg_up 1 after a poll later than the change")


def wait_auth_failing(exp: Exporter) -> None:
    def failing() -> bool:
        return auth_errors(exp) >= 2 and exp.scrape()["pg_up"].get(T) == 0

    wait_for(failing, 30, "authentication errors and pg_up 0")


def test_password_file_rotated_then_reconnect(
    pw_server: LocalServer, role: psycopg.Connection[tuple[object, ...]], tmp_path: Path
) -> None:
    secret = tmp_path / "pw"
    secret.write_text("Rot-one-1111\n")
    exp = start(pw_server, tmp_path, f"    password_file: {secret}\n")
    try:
        wait_up(exp, time.time())
        pid = exp.proc.pid
        # Rotated as Vault or an operator would: server first, then the file; the open
        # session lives on until it is dropped.
        rotate(role, "Rot-two-2222")
        secret.write_text("Rot-two-2222\n")
        wait_up(exp, kick(role))
        assert auth_errors(exp) == 0, "the new password was read at the reconnect"
        # The file lagging behind the server: authentication fails until it is updated, and
        # the file is read again at every attempt, so fixing it is enough.
        rotate(role, "Rot-three-3333")
        kick(role)
        wait_auth_failing(exp)
        secret.write_text("Rot-three-3333\n")
        wait_up(exp, time.time())
        assert exp.proc.pid == pid and exp.proc.poll() is None, "no restart"
        shown = exp.text() + exp.get("/")[1] + exp.logs()
        for password in ("Rot-one-1111", "Rot-two-2222", "Rot-three-3333"):
            assert password not in shown
    finally:
        exp.stop()


HELPER = """\
import pathlib, sys, time
mode = pathlib.Path(sys.argv[1]).read_text().strip()
if mode == "fail":
    print("helper debug: the token would have been Rot-one-1111", file=sys.stderr)
    sys.exit(3)
if mode == "hang":
    time.sleep(30)
print("Rot-one-1111")
"""


def test_password_command_failures_are_auth_errors_logged_once_per_streak(
    pw_server: LocalServer, role: psycopg.Connection[tuple[object, ...]], tmp_path: Path
) -> None:
    helper, mode = tmp_path / "token.py", tmp_path / "mode"
    helper.write_text(HELPER)
    mode.write_text("fail")
    argv = f"[{sys.executable}, {helper}, {mode}]"
    exp = start(
        pw_server,
        tmp_path,
        # 3 s: a Python helper that exits at once took over 0.5 s to start at load 11 (CI,
        # 2026-11-28) and was reported as timed out; the hanging one sleeps 30 s.
        f"    password_command: {argv}\n    password_command_timeout: 3s\n",
    )
    try:
        wait_auth_failing(exp)
        failures = auth_errors(exp)
        # More failing polls and samples, still one streak.
        wait_for(lambda: auth_errors(exp) > failures, 10, "more authentication errors")
        mode.write_text("ok")
        wait_up(exp, time.time())
        # A new streak: the helper hangs past its timeout.
        mode.write_text("hang")
        wait_auth_failing_again = auth_errors(exp)
        kick(role)
        wait_for(lambda: auth_errors(exp) > wait_auth_failing_again, 30, "a timed-out helper")
        mode.write_text("ok")
        wait_up(exp, time.time())
        log = exp.logs()
        failed = [line for line in log.splitlines() if "failed" in line and "kind=auth" in line]
        assert len(failed) == 2, log
        assert "exited with status 3" in failed[0] and "timed out after 3s" in failed[1]
        assert log.count("connection recovered") == 2, log
        assert "Rot-one-1111" not in log + exp.text() + exp.get("/")[1]
    finally:
        exp.stop()

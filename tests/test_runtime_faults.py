"""Runtime faults keep the exporter up: pg_up 0, errors counted by kind, one log line per
streak, and no password anywhere in logs, metrics or pages."""

from __future__ import annotations

import socketserver
import threading
import time
from pathlib import Path

import psycopg
import pytest

from cpu import Stopwatch, assert_median_within, scrape_path
from harness import MONITOR_PASSWORD, Exporter, labels, wait_for
from pg_aio_exporter.demo.server import LocalServer, free_port
from startup import SLOW_LOGIN_ROLE, add_slow_login, drop_slow_login, stuck_in_authentication

WRONG = "Wr0ng-Passw0rd-abc"


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
    assert log.count("level=error") == 1, log
    assert f"kind={kind}" in log
    return log


def test_wrong_password(pw_server: LocalServer) -> None:
    exp = Exporter("--dsn", pw_server.dsn(user="monitor", password=WRONG), "--poll-interval", "1s")
    try:
        log = assert_failing(exp, "auth")
        assert "password authentication failed" in log
        assert WRONG not in everything_shown(exp)
    finally:
        exp.stop()


def test_role_that_does_not_exist(pw_server: LocalServer) -> None:
    exp = Exporter("--dsn", pw_server.dsn(user="no_such_role"), "--poll-interval", "1s")
    try:
        log = assert_failing(exp, "auth")  # the runbook's "auth", not "is PostgreSQL up"
        assert 'role \\"no_such_role\\" does not exist' in log, log
    finally:
        exp.stop()


def test_right_password_from_password_file(pw_server: LocalServer, tmp_path: Path) -> None:
    (tmp_path / "pw").write_text(MONITOR_PASSWORD + "\n")
    dsn = pw_server.dsn(user="monitor")
    (tmp_path / "c.yaml").write_text(
        f"targets:\n  - name: main\n    dsn: '{dsn}'\n    password_file: {tmp_path / 'pw'}\n"
        "    labels: {cluster: demo}\n"
    )
    exp = Exporter("--config", str(tmp_path / "c.yaml"), "--poll-interval", "1s")
    try:
        samples = exp.wait_poll()
        assert samples["pg_up"][labels(target="main", cluster="demo")] == 1
        assert MONITOR_PASSWORD not in everything_shown(exp)
    finally:
        exp.stop()


@pytest.mark.timing
@pytest.mark.parametrize(
    "host", ["127.0.0.1", "no-such-host.invalid"], ids=["refused", "unresolvable"]
)
def test_unreachable(host: str) -> None:
    port = free_port()  # nothing listens there
    dsn = f"postgresql://app:{WRONG}@{host}:{port}/postgres"
    exp = Exporter("--dsn", dsn, "--poll-interval", "1s")
    try:
        clock = Stopwatch(scrape_path(exp.proc.pid))
        for _ in range(5):
            clock.get(exp.url + "/metrics")
        # The median: one scrape may be scheduled late.
        assert_median_within(clock.timings, 0.05)
        assert_failing(exp, "connection")
        assert WRONG not in everything_shown(exp)
    finally:
        exp.stop()


def exporter_as(server: LocalServer, role: str, grants: str) -> Exporter:
    """The exporter logged in as a fresh role created with `grants` (e.g. "IN ROLE pg_monitor")."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN {grants}")
    return Exporter(
        "--dsn", server.dsn(user=role), "--poll-interval", "1s", "--sample-interval", "100ms"
    )


def test_pg_monitor_role_sees_everything(pg18: LocalServer) -> None:
    exp = exporter_as(pg18, "pgaio_monitor", "IN ROLE pg_monitor")
    try:
        exp.wait_poll()
        scraped = exp.wait_poll()
        t = labels(target="default")
        assert scraped["pg_up"][t] == 1
        assert scraped["pg_aio_io_workers"][t] == 3, "background processes are visible"
        assert "pg_aio_in_flight_max" in scraped, "pg_aios is readable"
        assert "pg_stat_io_reads_total" in scraped
        assert not any(scraped.get("pg_aio_exporter_poll_errors_total", {}).values())
        assert "level=error" not in exp.logs()
    finally:
        exp.stop()


def test_role_without_pg_monitor_degrades_gracefully(pg18: LocalServer) -> None:
    exp = exporter_as(pg18, "pgaio_nopriv", "")
    try:
        exp.wait_poll()
        time.sleep(1)
        scraped = exp.wait_poll()
        t = labels(target="default")
        assert scraped["pg_up"][t] == 1
        assert "pg_stat_io_reads_total" in scraped, "pg_stat_io needs no privilege"
        assert "pg_aio_io_method" in scraped
        errors = scraped["pg_aio_exporter_poll_errors_total"]
        for collector in ("activity", "pg_aios"):
            key = labels(target="default", collector=collector, kind="privilege")
            assert errors[key] > 5, f"{collector}: every affected sample is counted"
        assert "pg_aio_io_workers" not in scraped, "unknowable without pg_aios: absent, not 0"
        log = exp.logs()
        assert log.count("level=error") == 2, log  # once per collector, not once per sample
        assert "grant it pg_monitor" in log
        assert "permission denied for view pg_aios" in log
        assert exp.proc.poll() is None
    finally:
        exp.stop()


# Clients starting up: in a login event trigger (state NULL), in authentication ('starting').
STARTING = (
    "SELECT count(*) FILTER (WHERE state IS NULL), count(*) FILTER (WHERE state = 'starting')"
    " FROM pg_stat_activity WHERE backend_type = 'client backend'"
)


def connect_in_a_loop(dsn: str, stop: threading.Event) -> None:
    while not stop.is_set():
        psycopg.connect(dsn).close()


def test_clients_starting_up_are_not_hidden_from_a_superuser(pw_server: LocalServer) -> None:
    """Clients connecting all the time, as applications without a pool do. A superuser
    exporter sees each of them while it starts up, and must not count it as a process hidden
    from its role (it did: kind=privilege, "grant it pg_monitor", PgAioPollsFailing pending)."""
    add_slow_login(pw_server.dsn(), 0.2)
    exp = Exporter("--dsn", pw_server.dsn(), "--poll-interval", "1s", "--sample-interval", "100ms")
    stop = threading.Event()
    clients = threading.Thread(
        target=connect_in_a_loop, args=(pw_server.dsn(user=SLOW_LOGIN_ROLE), stop)
    )
    try:
        with (
            stuck_in_authentication(pw_server.port, "monitor"),
            psycopg.connect(pw_server.dsn(), autocommit=True) as observer,
        ):
            clients.start()
            exp.wait_poll()

            def starting() -> tuple[int, int]:
                return observer.execute(STARTING).fetchone() or (0, 0)

            # The loop's thread may not have reached its first login yet on a busy host.
            wait_for(lambda: starting()[0] >= 1, 30, "a loop client in its login trigger")
            seen = [starting() for _ in range(20)]
            time.sleep(2)
            scraped = exp.wait_poll()
        assert max(in_trigger for in_trigger, _ in seen) >= 1, "the loop's clients were seen"
        assert min(authenticating for _, authenticating in seen) == 1
        errors = scraped["pg_aio_exporter_poll_errors_total"]
        assert errors[labels(target="default", collector="activity", kind="privilege")] == 0
        assert "kind=privilege" not in exp.logs(), exp.logs()
        assert "level=error" not in exp.logs(), exp.logs()
    finally:
        stop.set()
        if clients.is_alive():
            clients.join(10)
        exp.stop()
        with psycopg.connect(pw_server.dsn(), autocommit=True) as conn:
            drop_slow_login(conn)


class _Banner(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def test_not_a_postgresql_server() -> None:
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Banner) as http:
        threading.Thread(target=http.serve_forever, daemon=True).start()
        port = http.server_address[1]
        exp = Exporter("--dsn", f"host=127.0.0.1 port={port} user=x", "--poll-interval", "1s")
        try:
            log = assert_failing(exp, "connection")
            assert "invalid response to SSL negotiation" in log or "protocol" in log, log
        finally:
            exp.stop()
            http.shutdown()

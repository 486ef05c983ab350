"""Fault injection against real PostgreSQL 18 servers. Each fault asserts, from outside: the
process lives, /metrics answers within 50 ms (median) during the fault, pg_up and the error
counters tell the truth (right collector and kind), the exporter's counters never go back, and
it recovers within one poll once the fault ends.

Plain stop/start is tests/test_core.py, unresolvable DNS tests/test_runtime_faults.py.
Measurements are printed (pytest -s) for docs/reliability.md.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import pgbins
from certs import Certs, make_certs
from faultkit import (
    ERRORS,
    TARGET,
    Watch,
    assert_fast,
    errors,
    fds,
    threads,
    up_is,
)
from harness import (
    MONITOR_PASSWORD,
    Exporter,
    Samples,
    flush_stats,
    labels,
    observer,
    pg_stat_io,
    wait_for,
)
from iocheck import CHECKED, check_counters_between
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table
from proxy import Proxy

POLL = 1.0
TIMEOUT = 2.0
FAST = ("--poll-interval", "1s", "--sample-interval", "200ms", "--timeout", "2s")
# A statement or connect attempt in flight when a fault starts ends after --timeout plus the
# worker's client slack (1 s) and cancel grace (0.25 s).
IN_FLIGHT = TIMEOUT + 1.25
RESET = "pg_stat_io_stats_reset_timestamp_seconds"


def report(what: str, **numbers: float) -> None:
    print(f"[faults] {what}: " + ", ".join(f"{k}={v:.3f}" for k, v in numbers.items()))


@pytest.fixture(scope="module")
def tls() -> Iterator[tuple[LocalServer, Path]]:
    """ssl=on with a certificate from a CA made here; pg_hba accepts TLS connections only.
    Yields the server and its CA certificate. PostgreSQL 18.4 from npm: the 18.6 wheel has
    no OpenSSL."""
    server = LocalServer.create(
        bin_dir=pgbins.bin_dir("18-ssl"),
        hba=("hostssl all all 127.0.0.1/32 trust", "hostnossl all all 0.0.0.0/0 reject"),
    )
    owner = server.root.stat().st_uid  # the OS user PostgreSQL runs as
    made = make_certs(server.root, names=("server",), owner=owner if owner != 0 else None)
    server_cert, server_key = made.pair("server")
    server.configure(
        {
            "ssl": "on",
            "ssl_cert_file": f"'{server_cert}'",
            "ssl_key_file": f"'{server_key}'",
        }
    )
    server.start()
    yield server, made.ca
    server.destroy()


def localhost_dsn(server: LocalServer, **params: str) -> str:
    """The server by name, so that verify-full checks the certificate's DNS:localhost."""
    return server.dsn(**params).replace("host=127.0.0.1", "host=localhost")


def exporter_backend(server: LocalServer) -> tuple[int, bool | None] | None:
    """(pid, ssl) of the exporter's backend, None while it has none."""
    with psycopg.connect(localhost_dsn(server, sslmode="require"), autocommit=True) as c:
        row = c.execute(
            "SELECT a.pid, s.ssl FROM pg_stat_activity a LEFT JOIN pg_stat_ssl s USING (pid)"
            " WHERE a.application_name = 'pg_aio_exporter'"
        ).fetchone()
    return (row[0], row[1]) if row else None


def query_errors(samples: Samples) -> float:
    return sum(v for k, v in samples.get(ERRORS, {}).items() if ("kind", "query") in k)


# -- restarts ------------------------------------------------------------------------------


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["immediate", "fast"])
def test_restart_with_and_without_stats_reset(mode: str) -> None:
    """immediate = a crash: PostgreSQL discards its statistics in crash recovery, so
    pg_stat_io counters drop. fast keeps them. Either way the per-interval gauges skip the
    interval spanning the restart (new postmaster start time) and come back after it."""
    server = LocalServer.create(settings={"shared_buffers": "16MB", "track_io_timing": "on"})
    server.start()
    create_table(server.dsn(), 24)  # larger than shared_buffers: every scan reads
    workload = Workload(server.dsn(), clients=1, pause=0.1).start()
    exp = Exporter("--dsn", server.dsn(), *FAST)
    watch = Watch(exp)
    try:
        gauge = "pg_aio_read_size_bytes"
        watch.until(lambda s: gauge in s, 15, "read gauges before the fault")
        before = watch.scrape()
        reads_before = sum(before["pg_stat_io_reads_total"].values())
        start_before = before["pg_postmaster_start_time_seconds"][TARGET]
        reset_before = before.get(RESET, {}).get(TARGET)

        server.stop(mode)
        down = watch.until(up_is(0), POLL + IN_FLIGHT, "pg_up 0")
        # Each failed reconnect is counted, kind=connection: two within a few polls.
        watch.until(lambda s: errors(s) >= 2, 4 * POLL, "two failed reconnects counted")
        during = watch.scrape()
        assert "pg_stat_io_reads_total" not in during, "no stale data while down"
        median = assert_fast(exp)

        server.start()
        recovered = watch.until(up_is(1), POLL + 1, "pg_up 1 within one poll")
        # The first scrape after the restart: one more, on a busy host, may follow the next
        # poll, whose gauges are rightly back.
        after = watch.last
        assert after["pg_postmaster_start_time_seconds"][TARGET] > start_before
        assert gauge not in after, "no gauge across a restart"
        reads_after = sum(after["pg_stat_io_reads_total"].values())
        reset_after = after.get(RESET, {}).get(TARGET)
        if mode == "immediate":
            # Counters alone prove nothing here: the workload reads fast enough to pass the
            # old totals within a second. The reset timestamp is the witness.
            assert reset_after is not None and reset_after != reset_before
        else:
            assert reads_after >= reads_before, "a clean shutdown keeps the statistics"
            assert reset_after == reset_before
        watch.until(lambda s: gauge in s, 10, "read gauges after the restart")
        log = exp.logs()
        assert log.count("level=error") == 1, log
        assert "connection recovered" in log
        report(f"restart {mode}", to_pg_up_0=down, scrape_median=median, to_recover=recovered)
    finally:
        workload.stop()
        exp.stop()
        server.destroy()


# -- slow server ---------------------------------------------------------------------------


def test_poll_stamp_says_when_the_data_was_read(pw_server: LocalServer) -> None:
    """Replies 1 s late: a poll stamped after moment t read its counters after t, so they are
    at least what pg_stat_io said at t. Stamped when the reply arrived, a poll that asked just
    before t would pass for newer than t and its counters would be older than the test's own."""
    proxy = Proxy(pw_server.port)
    dsn = f"host=127.0.0.1 port={proxy.port} user=postgres"
    exp = Exporter("--dsn", dsn, "--poll-interval", "3s", "--sample-interval", "60s")
    obs = observer(pw_server.dsn())
    try:
        exp.wait_poll()
        proxy.delay = 1.0
        for _ in range(2):
            sent = proxy.requests

            def more_requests(sent: int = sent) -> bool | None:
                return proxy.requests > sent or None

            wait_for(more_requests, 10, "the next poll's queries")
            time.sleep(0.3)  # the server has answered; the proxy holds the reply
            with psycopg.connect(pw_server.dsn(), autocommit=True) as conn:
                conn.execute("SELECT count(*) FROM pg_class")  # moves the hit counters
                flush_stats(conn)
            asked = time.time()
            before = pg_stat_io(obs)
            scraped = exp.wait_poll(after=asked, timeout=15)
            assert check_counters_between(scraped, before, pg_stat_io(obs)) > CHECKED
    finally:
        obs.close()
        exp.stop()
        proxy.stop()


@pytest.mark.timing
@pytest.mark.parametrize(("fault", "timeout"), [("delay", 1.0), ("black_hole", TIMEOUT)])
def test_slow_server_is_bounded_by_timeouts(
    pw_server: LocalServer, fault: str, timeout: float
) -> None:
    """A 2 s delay on every reply (longer than --timeout 1s) or a black hole, between exporter
    and server, after the exporter connected. Every statement and connect attempt ends at the
    client timeout: no pile-up of connections, threads or fds, and /metrics stays fast."""
    proxy = Proxy(pw_server.port)
    in_flight = timeout + 1.25
    exp = Exporter("--dsn", f"host=127.0.0.1 port={proxy.port} user=postgres",
                   "--poll-interval", "1s", "--sample-interval", "200ms",
                   "--timeout", f"{timeout}s")  # fmt: skip
    watch = Watch(exp)
    try:
        exp.wait_poll()
        base_threads, base_fds = threads(exp), fds(exp)
        if fault == "delay":
            proxy.delay = 2.0
        else:
            proxy.black_hole = True
        started = time.monotonic()
        # The statement in flight times out, then so does the next connect attempt (it needs
        # two round trips, 4 s with the delay) before the poll can say pg_up 0.
        down = watch.until(up_is(0), 2 * in_flight + POLL + 1, "pg_up 0")
        assert errors(watch.scrape(), kind="timeout") >= 1
        medians = []
        while time.monotonic() - started < 12:
            medians.append(assert_fast(exp))
            assert threads(exp) <= base_threads + 2
            assert fds(exp) <= base_fds + 3
            time.sleep(0.5)
        during = watch.scrape()
        assert during["pg_up"][TARGET] == 0
        timeouts = errors(during, kind="timeout")
        assert timeouts >= 2, "every attempt ends in a counted timeout"
        # At most one attempt per --timeout (each ends at the client timeout, then backs off),
        # each a connection or a cancel request: a retry loop or a pile-up would exceed it.
        attempts = (time.monotonic() - started) / timeout + 1
        assert timeouts <= attempts, timeouts
        assert proxy.connections <= 1 + 2 * attempts, proxy.connections

        proxy.delay, proxy.black_hole = 0.0, False
        # A connect attempt in flight (its replies delayed, or inside the black hole) must
        # end first: one client timeout, then the next poll.
        recovered = watch.until(up_is(1), in_flight + POLL + 1, "recovery")
        log = exp.logs()
        assert log.count("level=error") == 1, log
        assert "kind=timeout" in log
        report(
            f"slow server {fault}",
            to_pg_up_0=down,
            scrape_median_max=max(medians),
            to_recover=recovered,
            proxy_connections=proxy.connections,
            timeouts=timeouts,
        )
    finally:
        exp.stop()
        proxy.stop()


# -- lock contention -----------------------------------------------------------------------


@pytest.mark.timing
@pytest.mark.parametrize(
    ("timeout", "message"),
    [("2s", "lock timeout"), ("500ms", "statement timeout")],
    ids=["lock_timeout", "statement_timeout"],
)
def test_lock_on_a_catalog_the_sampler_reads(
    pw_server: LocalServer, timeout: str, message: str
) -> None:
    """ACCESS EXCLUSIVE on pg_database blocks pg_stat_activity and pg_stat_database (both join
    pg_database) but not the other views. The exporter's lock_timeout (1 s) or, when shorter,
    its statement_timeout (--timeout) ends each wait: kind=timeout for collectors activity and
    pg_stat_database, pg_up stays 1 and the other collectors are polled meanwhile."""
    exp = Exporter("--dsn", pw_server.dsn(), "--poll-interval", "1s", "--sample-interval", "200ms",
                   "--timeout", timeout)  # fmt: skip
    watch = Watch(exp)
    polled = "pg_aio_exporter_poll_duration_seconds_count"
    pg_stat_io = labels(target="default", collector="pg_stat_io")
    try:
        exp.wait_poll()
        with psycopg.connect(pw_server.dsn(), autocommit=True) as locker, locker.transaction():
            locker.execute("LOCK TABLE pg_catalog.pg_database IN ACCESS EXCLUSIVE MODE")
            watch.until(lambda s: errors(s, "activity", "timeout") >= 2, 10, "timeouts")
            watch.until(
                lambda s: errors(s, "pg_stat_database", "timeout") >= 1, 10, "a poll timed out"
            )
            first = watch.scrape()[polled][pg_stat_io]
            # Polls go on meanwhile: pg_stat_io is read again.
            watch.until(lambda s: s[polled][pg_stat_io] > first, 5, "a new poll")
            during = watch.scrape()
            assert during["pg_up"][TARGET] == 1, "the server is reachable: pg_up 1"
            assert "pg_stat_database_xact_commit_total" not in during, "no stale series"
            assert errors(during, "connection", "timeout") == 0
            assert query_errors(during) == 0, exp.logs()
            median = assert_fast(exp)
            samples_during = during["pg_aio_sampler_samples_total"][TARGET]
        # The statement waiting for the lock gets it now; the next sample is counted.
        recovered = watch.until(
            lambda s: s["pg_aio_sampler_samples_total"][TARGET] > samples_during,
            1.5,
            "a successful sample",
        )
        wait_for(lambda: "activity recovered" in exp.logs(), 2, "recovery logged")
        after = exp.wait_poll(after=time.time())
        assert "pg_stat_database_xact_commit_total" in after
        time.sleep(1)
        after = watch.scrape()
        # Regression: psycopg's prepared statement behind the aborted pipeline broke pg_aios
        # ("prepared statement _pg3_0 does not exist", kind=query) until a reconnect.
        assert query_errors(after) == 0, exp.logs()
        assert "pg_aio_in_flight_max" in after, "pg_aios is read again"
        log = exp.logs()
        assert log.count("level=error") == 2, log
        assert "collector=activity kind=timeout" in log and message in log, log
        assert "collector=pg_stat_database kind=timeout" in log, log
        assert "pg_stat_database recovered" in log, log
        assert exp.proc.poll() is None
        report(f"lock {timeout}", scrape_median=median, to_recover=recovered)
    finally:
        exp.stop()


# -- max_connections -----------------------------------------------------------------------


# What PostgreSQL says to a non-superuser when only superuser_reserved_connections are left.
FULL = "remaining connection slots are reserved for roles with the SUPERUSER attribute"


@pytest.mark.timing
def test_max_connections_exhausted_on_reconnect() -> None:
    server = LocalServer.create(
        settings={"max_connections": "6", "superuser_reserved_connections": "3"},
        hba=("host all monitor 127.0.0.1/32 trust",),
    )
    server.start()
    admin = psycopg.connect(server.dsn(), autocommit=True)  # a reserved superuser slot
    admin.execute("CREATE ROLE monitor LOGIN IN ROLE pg_monitor")
    monitor = server.dsn(user="monitor")
    fillers: list[psycopg.Connection[tuple[object, ...]]] = []

    def fill() -> None:
        """Take every free slot: until the server refuses."""
        while True:
            try:
                fillers.append(psycopg.connect(monitor, autocommit=True))
            except psycopg.OperationalError as exc:
                assert FULL in str(exc)
                return

    first = Exporter("--dsn", monitor, *FAST)
    second = None
    watch = Watch(first)
    try:
        first.wait_poll()
        fill()
        # Frozen while its backend is killed and its slot taken: it reconnects within
        # milliseconds of noticing, and must find the server full.
        os.kill(first.proc.pid, signal.SIGSTOP)
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE application_name = 'pg_aio_exporter'"
            )
            fill()  # the slot it had
        finally:
            os.kill(first.proc.pid, signal.SIGCONT)
        down = watch.until(up_is(0), POLL + IN_FLIGHT, "pg_up 0")
        second = Exporter("--dsn", monitor, *FAST)  # an exporter (re)started into a full server
        wait_for(lambda: errors(second.scrape()) >= 2, 10, "the new exporter's errors")
        watch.until(lambda s: errors(s) >= 3, 10, "failed reconnects")
        assert second.scrape()["pg_up"][TARGET] == 0
        median = assert_fast(first)
        assert_fast(second)
        # One line per failure streak: the running exporter logs what started it, the new
        # one what it met.
        assert first.logs().count("level=error") == 1
        assert "collector=connection kind=connection" in first.logs()
        assert second.logs().count("level=error") == 1
        assert FULL in second.logs()
        for conn in fillers:
            conn.close()
        fillers.clear()
        recovered = watch.until(up_is(1), POLL + 1, "recovery")
        wait_for(lambda: second.scrape()["pg_up"][TARGET] == 1, POLL + 1, "second recovers")
        report("max_connections", to_pg_up_0=down, scrape_median=median, to_recover=recovered)
    finally:
        for conn in fillers:
            conn.close()
        admin.close()
        first.stop()
        if second is not None:
            second.stop()
        server.destroy()


# -- TLS -----------------------------------------------------------------------------------


@pytest.mark.timing
def test_verify_full_with_the_suites_ca(tls: tuple[LocalServer, Path]) -> None:
    server, ca = tls
    exp = Exporter(
        "--dsn", localhost_dsn(server, sslmode="verify-full", sslrootcert=str(ca)), *FAST
    )
    try:
        assert exp.wait_poll()["pg_up"][TARGET] == 1
        backend = wait_for(lambda: exporter_backend(server), 5, "the exporter's backend")
        assert backend[1] is True, "pg_stat_ssl: the exporter's connection is encrypted"
        assert "level=error" not in exp.logs()
    finally:
        exp.stop()


def assert_refused(exp: Exporter, kind: str, message: str) -> None:
    watch = Watch(exp)
    watch.until(lambda s: errors(s, kind=kind) >= 2, 10, f"kind={kind} errors")
    assert watch.scrape()["pg_up"][TARGET] == 0
    assert_fast(exp)
    log = exp.logs()
    assert log.count("level=error") == 1, log
    assert f"kind={kind}" in log and message in log, log


def test_tls_required_by_the_server_not_offered(tls: tuple[LocalServer, Path]) -> None:
    server, _ = tls
    exp = Exporter("--dsn", server.dsn(sslmode="disable"), *FAST)
    try:
        # Refused by pg_hba.conf: an authentication problem (SQLSTATE 28000), not the network.
        assert_refused(exp, "auth", "pg_hba.conf rejects connection")
        assert "no encryption" in exp.logs()
    finally:
        exp.stop()


def test_tls_required_by_the_client_not_offered(pw_server: LocalServer) -> None:
    exp = Exporter("--dsn", pw_server.dsn(sslmode="require"), *FAST)
    try:
        assert_refused(exp, "connection", "server does not support SSL, but SSL was required")
    finally:
        exp.stop()


def test_verify_full_rejects_another_ca(tls: tuple[LocalServer, Path], certs: Certs) -> None:
    server, _ = tls
    dsn = localhost_dsn(server, sslmode="verify-full", sslrootcert=str(certs.ca))
    exp = Exporter("--dsn", dsn, *FAST)
    try:
        assert_refused(exp, "connection", "certificate verify failed")
    finally:
        exp.stop()


# -- secrets -------------------------------------------------------------------------------


def pgpass(directory: Path, *lines: str) -> Path:
    path = directory / "pgpass"
    path.write_text("".join(line + "\n" for line in lines))
    path.chmod(0o600)  # libpq ignores a password file others can read
    return path


def all_output(exp: Exporter) -> str:
    pages = [exp.get(path)[1] for path in ("/metrics", "/", "/healthz")]
    try:
        exp.get("/nothing-here")
    except OSError as exc:  # 404
        pages.append(str(exc))
    return "\n".join(pages) + exp.logs()


def test_password_from_pgpassfile(pw_server: LocalServer, tmp_path: Path) -> None:
    other = "Other-Line-Secret-5521"
    path = pgpass(tmp_path, f"db.example:5432:*:app:{other}",
                  f"127.0.0.1:{pw_server.port}:postgres:monitor:{MONITOR_PASSWORD}")  # fmt: skip
    exp = Exporter("--dsn", pw_server.dsn(user="monitor"), *FAST, env={"PGPASSFILE": str(path)})
    try:
        assert exp.wait_poll()["pg_up"][TARGET] == 1
        shown = all_output(exp)
        assert MONITOR_PASSWORD not in shown and other not in shown and "db.example" not in shown
    finally:
        exp.stop()


def test_no_password_in_any_output_of_a_failing_run(
    pw_server: LocalServer, tls: tuple[LocalServer, Path], certs: Certs, tmp_path: Path
) -> None:
    """Five targets failing five ways, each with its own password, at debug level; then every
    page, the metrics and the whole log (including shutdown) are searched for each one."""
    secrets = {name: f"Leak-{name}-Secret-{i}93" for i, name in enumerate(
        ["keyword", "uri", "file", "hole", "pgpass"])}  # fmt: skip
    proxy = Proxy(pw_server.port)
    proxy.black_hole = True
    tls_server, _ = tls
    (tmp_path / "pw").write_text(secrets["file"] + "\n")
    passfile = pgpass(tmp_path, f"127.0.0.1:{pw_server.port}:*:pgpassuser:{secrets['pgpass']}")
    dsn_wrong = pw_server.dsn(user="monitor", password=secrets["keyword"])
    tls_dsn = tls_server.dsn(sslmode="verify-full", sslrootcert=str(certs.ca))
    (tmp_path / "c.yaml").write_text(
        "targets:\n"
        f"  - {{name: keyword, dsn: '{dsn_wrong}'}}\n"
        f"  - name: uri\n    dsn: postgresql://monitor:{secrets['uri']}@127.0.0.1:{pw_server.port}/x\n"
        f"  - {{name: file, dsn: '{tls_dsn}', password_file: {tmp_path / 'pw'}}}\n"
        f"  - {{name: hole, dsn: 'host=127.0.0.1 port={proxy.port} password={secrets['hole']}'}}\n"
        f"  - {{name: pgpass, dsn: '{pw_server.dsn(user='pgpassuser')}'}}\n"
    )
    exp = Exporter("--config", str(tmp_path / "c.yaml"), *FAST, "--log.level", "debug",
                   env={"PGPASSFILE": str(passfile)})  # fmt: skip
    expected = {"keyword": "auth", "uri": "auth", "file": "connection", "hole": "timeout"}
    try:

        def all_failing() -> bool:
            got = exp.scrape().get("pg_aio_exporter_poll_errors_total", {})
            want = {**expected, "pgpass": "auth"}
            return all(
                got.get(labels(target=t, collector="connection", kind=k), 0) >= 2
                for t, k in want.items()
            )

        wait_for(all_failing, 20, "every target failing its way")
        shown = all_output(exp)
    finally:
        exp.stop()
        proxy.stop()
    shown += exp.log_path.read_text()  # with the shutdown lines
    for name, secret in secrets.items():
        assert secret not in shown, f"{name}: password leaked"
        assert secret[5:-3] not in shown, f"{name}: part of the password leaked"
    assert "certificate verify failed" in shown and "password authentication failed" in shown

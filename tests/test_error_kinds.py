"""Error kinds come from the SQLSTATE and libpq, not from the language of the server's messages:
a server whose lc_messages is German (Debian's PostgreSQL 15 ships the translations) refuses a
wrong password in German, and the exporter still counts kind="auth"."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import psycopg
import pytest

import pgbins
from harness import Exporter, Labels, compiled_locale, labels, wait_for
from pg_aio_exporter.demo.server import LocalServer

pytestmark = pytest.mark.integration
GERMAN = "de_DE.UTF-8"


@pytest.fixture(scope="module")
def german_server() -> Iterator[LocalServer]:
    locales = compiled_locale(GERMAN)
    server = LocalServer.create(
        pgbins.bin_dir("15"),
        settings={"lc_messages": f"'{GERMAN}'"},
        hba=("host all monitor 127.0.0.1/32 scram-sha-256",),
        env={"LOCPATH": str(locales)},
    )
    try:
        server.start()
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE ROLE monitor LOGIN PASSWORD 'the-right-one' IN ROLE pg_monitor")
        yield server
    finally:
        server.destroy()
        shutil.rmtree(locales)


def test_a_wrong_password_is_auth_in_any_language(german_server: LocalServer) -> None:
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(german_server.dsn(user="monitor", password="wrong"))
    assert "Passwort-Authentifizierung" in str(refused.value), "the server answers in German"
    exporter = Exporter(
        "--dsn", german_server.dsn(user="monitor", password="wrong"), "--poll-interval", "1s"
    )
    try:
        auth = labels(target="default", collector="connection", kind="auth")

        def counted() -> dict[Labels, float] | None:
            errors = exporter.scrape().get("pg_aio_exporter_poll_errors_total", {})
            return errors if errors.get(auth) else None

        errors = wait_for(counted, 15, "an auth error")
        assert errors[labels(target="default", collector="connection", kind="connection")] == 0
        assert exporter.value("pg_up", target="default") == 0
        assert "Passwort-Authentifizierung" in exporter.logs()
    finally:
        exporter.stop()

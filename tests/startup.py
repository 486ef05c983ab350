"""Clients held in their startup, as a monitoring role sees them in pg_stat_activity: a login
event trigger that sleeps (PostgreSQL 17+: state NULL, the user known), and a client that never
answers the password request (18: state 'starting' while it authenticates)."""

from __future__ import annotations

import socket
import struct

import psycopg

SLOW_LOGIN_ROLE = "slow_login"


def add_slow_login(dsn: str, seconds: float) -> None:
    """Every login of role slow_login sleeps `seconds` in a login event trigger (17+)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_slow_login(conn)
        conn.execute(f"CREATE ROLE {SLOW_LOGIN_ROLE} LOGIN")
        conn.execute(
            "CREATE FUNCTION slow_login() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF current_user = '{SLOW_LOGIN_ROLE}' THEN PERFORM pg_sleep({seconds}); END IF;"
            " END $$"
        )
        conn.execute("CREATE EVENT TRIGGER slow_login ON login EXECUTE FUNCTION slow_login()")


def drop_slow_login(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    conn.execute("DROP EVENT TRIGGER IF EXISTS slow_login")
    conn.execute("DROP FUNCTION IF EXISTS slow_login()")
    conn.execute(f"DROP ROLE IF EXISTS {SLOW_LOGIN_ROLE}")


def stuck_in_authentication(port: int, user: str) -> socket.socket:
    """A client that sends its startup packet for `user` (who must log in with a password)
    and never answers: its backend waits in authentication until the socket is closed."""
    sock = socket.create_connection(("127.0.0.1", port))
    params = f"user\0{user}\0database\0postgres\0\0".encode()
    sock.sendall(struct.pack("!ii", 8 + len(params), 3 << 16) + params)  # protocol 3.0
    return sock

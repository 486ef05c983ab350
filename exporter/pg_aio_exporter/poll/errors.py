"""What went wrong, as a low-cardinality `kind` label for pg_aio_exporter_poll_errors_total."""

from __future__ import annotations

import re
from collections.abc import Iterable

import psycopg

from pg_aio_exporter.expose.selfmetrics import INTERNAL


class UnsupportedServerError(Exception):
    """Connected, but not to a PostgreSQL this exporter can read."""


class PasswordSourceError(Exception):
    """A target's password_file or password_command gave no password: an authentication error,
    since the server cannot be logged into without one."""


_KINDS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((UnsupportedServerError,), "unsupported"),
    ((TimeoutError,), "timeout"),
    ((PasswordSourceError,), "auth"),
)
# By SQLSTATE (the server's own code, the same in every lc_messages): a full code first, then
# its class. 57014 is statement_timeout, 55P03 lock_timeout: the same bounded wait. Class 28:
# invalid authorization (wrong password 28P01, no pg_hba.conf entry or no such role 28000).
_SQLSTATES = {
    "57014": "timeout",
    "55P03": "timeout",
    "42501": "privilege",
    "28": "auth",
    "08": "connection",
    "53": "connection",  # too many connections, out of memory or disk
    "57": "connection",  # shutting down, starting up, crash of another backend
}
# A connection that libpq could not open carries no SQLSTATE (libpq keeps only the text), and
# the server writes that text in its lc_messages: what libpq itself knows comes first, the
# text last, and only for what it cannot tell.
_CONNECT_MESSAGES = (
    (re.compile("authentication failed|no password supplied"), "auth"),
    # "no pg_hba.conf entry" / "pg_hba.conf rejects connection" (e.g. hostssl only, client
    # without TLS): the file's name is in every translation.
    (re.compile(r'pg_hba\.conf|role ".*" does not exist'), "auth"),
    (re.compile("timeout expired"), "timeout"),
)


def error_kind(exc: BaseException) -> str:
    """A low-cardinality label for what went wrong."""
    for types, kind in _KINDS:
        if isinstance(exc, types):
            return kind
    if not isinstance(exc, psycopg.Error):
        return "query"
    sqlstate = exc.sqlstate or ""
    if sqlstate:
        return _SQLSTATES.get(sqlstate, _SQLSTATES.get(sqlstate[:2], "query"))
    if not isinstance(exc, psycopg.OperationalError):
        return "query"
    pgconn = exc.pgconn
    # libpq's own flags on a connection that never completed its start-up (a connection lost
    # later has a server version): the server asked for a password and none was at hand, or
    # one was sent and the server then refused the connection: a wrong password, in any
    # language (also a database that does not exist, refused after a password was accepted).
    refused = pgconn is not None and (pgconn.needs_password or pgconn.used_password)
    if refused and pgconn is not None and pgconn.server_version == 0:
        return "auth"
    text = str(exc)
    return next((kind for pattern, kind in _CONNECT_MESSAGES if pattern.search(text)), "connection")


# The kinds each `collector` label of pg_aio_exporter_poll_errors_total can come with: the
# connection fails before any statement ("connection"), a collector's own statement fails or
# its code raises ("internal"), a bug ends a round (the worker's "poll" or "sample" step), or
# the target's task ended and was restarted ("worker", app.py).
WORKER = "worker"  # the collector label of a target's task that ended and was restarted
RENDER = "render"  # the collector label of the /metrics render task that ended (app.py)
CONNECTION_KINDS = ("connection", "auth", "timeout", "unsupported")
STATEMENT_KINDS = ("timeout", "privilege", "query")


def known_failures(collectors: Iterable[str], rounds: Iterable[str]) -> list[tuple[str, str]]:
    """The (collector, kind) label pairs a target can report, to start at 0: a counter that
    appears at 1 shows no increase() until its second error."""
    return [
        *(("connection", kind) for kind in CONNECTION_KINDS),
        *((collector, kind) for collector in collectors for kind in [*STATEMENT_KINDS, INTERNAL]),
        *((round_, INTERNAL) for round_ in [*rounds, WORKER]),
    ]

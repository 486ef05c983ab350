"""What went wrong, as a low-cardinality `kind` label for pg_aio_exporter_poll_errors_total."""

from __future__ import annotations

import re
from collections.abc import Iterable

import psycopg

# Every `kind` the worker counts: error_kind's, and "internal" for a bug in a poll or sample.
KINDS = ("connection", "auth", "timeout", "privilege", "query", "unsupported", "internal")
INTERNAL = "internal"


class UnsupportedServerError(Exception):
    """Connected, but not to a PostgreSQL this exporter can read."""


class PasswordSourceError(Exception):
    """A target's password_file or password_command gave no password: an authentication error,
    since the server cannot be logged into without one."""


_KINDS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((UnsupportedServerError,), "unsupported"),
    # LockNotAvailable is lock_timeout firing: the same bounded wait as statement_timeout.
    ((TimeoutError, psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable), "timeout"),
    ((psycopg.errors.InsufficientPrivilege,), "privilege"),
    (
        (
            PasswordSourceError,
            psycopg.errors.InvalidPassword,
            psycopg.errors.InvalidAuthorizationSpecification,
        ),
        "auth",
    ),
)
# libpq reports connection failures as text only, without a SQLSTATE.
_CONNECT_MESSAGES = (
    (re.compile("authentication failed|no password supplied"), "auth"),
    # "no pg_hba.conf entry" / "pg_hba.conf rejects connection" (e.g. hostssl only, client
    # without TLS), and a role that does not exist: SQLSTATE 28000, which is "auth" when
    # psycopg has the SQLSTATE.
    (re.compile(r'pg_hba\.conf|role ".*" does not exist'), "auth"),
    (re.compile("timeout expired"), "timeout"),
)


def error_kind(exc: BaseException) -> str:
    """A low-cardinality label for what went wrong."""
    for types, kind in _KINDS:
        if isinstance(exc, types):
            return kind
    if isinstance(exc, psycopg.OperationalError):
        text = str(exc)
        return next(
            (kind for pattern, kind in _CONNECT_MESSAGES if pattern.search(text)), "connection"
        )
    return "query"


# The kinds each `collector` label of pg_aio_exporter_poll_errors_total can come with: the
# connection fails before any statement ("connection"), a collector's own statement fails or
# a poll collector's code raises ("internal"), or a bug ends a round (the worker's "poll" or
# "sample" step).
CONNECTION_KINDS = ("connection", "auth", "timeout", "unsupported")
STATEMENT_KINDS = ("timeout", "privilege", "query")


def known_failures(
    collectors: Iterable[str], rounds: Iterable[str], isolated: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """The (collector, kind) label pairs a target can report, to start at 0: a counter that
    appears at 1 shows no increase() until its second error. `isolated`: the collectors whose
    own bugs are counted under their name (the poll collectors)."""
    return [
        *(("connection", kind) for kind in CONNECTION_KINDS),
        *((collector, kind) for collector in collectors for kind in STATEMENT_KINDS),
        *((collector, INTERNAL) for collector in isolated),
        *((round_, INTERNAL) for round_ in rounds),
    ]

"""What went wrong, as a low-cardinality `kind` label for pg_aio_exporter_poll_errors_total."""

from __future__ import annotations

import psycopg


class UnsupportedServerError(Exception):
    """Connected, but not to a PostgreSQL this exporter can read."""


_KINDS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((UnsupportedServerError,), "unsupported"),
    # LockNotAvailable is lock_timeout firing: the same bounded wait as statement_timeout.
    ((TimeoutError, psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable), "timeout"),
    ((psycopg.errors.InsufficientPrivilege,), "privilege"),
    ((psycopg.errors.InvalidPassword, psycopg.errors.InvalidAuthorizationSpecification), "auth"),
)
# libpq reports connection failures as text only, without a SQLSTATE.
_CONNECT_MESSAGES = (
    ("authentication failed", "auth"),
    ("no password supplied", "auth"),
    # "no pg_hba.conf entry" / "pg_hba.conf rejects connection" (e.g. hostssl only, client
    # without TLS): SQLSTATE 28000, which is "auth" when psycopg has the SQLSTATE.
    ("pg_hba.conf", "auth"),
    ("timeout expired", "timeout"),
)


def error_kind(exc: BaseException) -> str:
    """A low-cardinality label for what went wrong."""
    for types, kind in _KINDS:
        if isinstance(exc, types):
            return kind
    if isinstance(exc, psycopg.OperationalError):
        text = str(exc)
        return next((kind for needle, kind in _CONNECT_MESSAGES if needle in text), "connection")
    return "query"

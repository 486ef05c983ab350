"""What libpq refuses in connection parameters only when it connects, found before it does.

libpq's own parser (`conninfo_to_dict`) checks the syntax and the keywords, but the values of
`port`, `sslmode` and the like only at the first connection attempt (fe-connect.c), so a typo
would be `pg_up 0` on every poll instead of a configuration error at start. This module checks
them the way libpq does (exact spellings, integers as its strtol-based parser reads them), with
the values of PG* environment variables where the DSN leaves a keyword out, as libpq would.
psycopg reads `connect_timeout` itself: its own parser checks that one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import timeout_from_conninfo

# fe-connect.c compares these with strcmp: case matters, and an empty value is refused.
CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ),
    "load_balance_hosts": ("disable", "random"),
    "sslnegotiation": ("postgres", "direct"),
    "sslcertmode": ("disable", "allow", "require"),
}
ENCRYPTED = ("require", "verify-ca", "verify-full")  # the sslmodes that insist on TLS
# Compared without case, in this order; empty means no bound.
TLS_VERSIONS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
TLS_BOUNDS = ("ssl_min_protocol_version", "ssl_max_protocol_version")
INTEGERS = (
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)
# parse_int_param: strtol (leading blanks, a sign, decimal digits), trailing blanks.
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_PORT_MAX = 65535


@cache
def _defaults() -> dict[str, tuple[str | None, str | None]]:
    """keyword -> the environment variable libpq falls back to (PGSSLMODE for sslmode, ...),
    and its built-in default."""
    return {
        option.keyword.decode(): (
            option.envvar.decode() if option.envvar else None,
            option.compiled.decode() if option.compiled else None,
        )
        for option in pq.Conninfo.get_defaults()
    }


def _explicit(params: dict[str, Any], keyword: str) -> tuple[str | None, str]:
    """The value given for `keyword` in the DSN or the environment, and where (for messages)."""
    if keyword in params:
        return str(params[keyword]), keyword
    envvar, _ = _defaults().get(keyword, (None, None))
    if envvar is not None and envvar in os.environ:
        return os.environ[envvar], envvar
    return None, keyword


def _value(params: dict[str, Any], keyword: str) -> tuple[str | None, str]:
    """The value libpq would use for `keyword`: given, or its built-in default."""
    value, source = _explicit(params, keyword)
    return (_defaults().get(keyword, (None, None))[1] if value is None else value), source


def _port(text: str) -> bool:
    return bool(_INTEGER.fullmatch(text)) and 1 <= int(text) <= _PORT_MAX


def _count(value: str | None) -> int:
    return len(value.split(",")) if value else 0


def refusal(params: dict[str, Any]) -> str | None:
    """Why libpq (or psycopg) would refuse to connect with these parameters, or None."""
    checks = (_choices, _ssl_combinations, _tls_bounds, _integers, _hosts_and_ports, _timeout)
    return next((problem for check in checks for problem in check(params)), None)


def _choices(params: dict[str, Any]) -> Iterator[str]:
    for keyword, allowed in CHOICES.items():
        value, source = _value(params, keyword)
        if value is not None and value not in allowed:
            yield f"invalid {source} value {value!r}: use one of {', '.join(allowed)}"


def _ssl_combinations(params: dict[str, Any]) -> Iterator[str]:
    """What libpq refuses to combine with a weak sslmode (its messages, PostgreSQL 16 and 17)."""
    sslmode, _ = _value(params, "sslmode")
    if _value(params, "sslnegotiation")[0] == "direct" and sslmode not in ENCRYPTED:
        yield f"weak sslmode {sslmode!r} may not be used with sslnegotiation=direct"
    explicit, source = _explicit(params, "sslmode")
    if _value(params, "sslrootcert")[0] == "system" and explicit not in (None, "verify-full"):
        yield f"weak {source} {explicit!r} may not be used with sslrootcert=system"


def _tls_bounds(params: dict[str, Any]) -> Iterator[str]:
    known = [version.lower() for version in TLS_VERSIONS]
    bounds = []
    for keyword in TLS_BOUNDS:
        value, source = _value(params, keyword)
        if not value:
            continue
        if value.lower() not in known:
            yield f"invalid {source} value {value!r}: use one of {', '.join(TLS_VERSIONS)}"
            return
        bounds.append(known.index(value.lower()))
    if len(bounds) == 2 and bounds[0] > bounds[1]:
        yield "invalid SSL protocol version range: ssl_min_protocol_version above the maximum"


def _integers(params: dict[str, Any]) -> Iterator[str]:
    # What every libpq refuses: versions differ on the rest (an empty value is unset for 16
    # and refused by 18, a value beyond a C int the other way round), left to libpq.
    for keyword in INTEGERS:
        value, source = _value(params, keyword)
        if value and not _INTEGER.fullmatch(value):
            yield f"{source} {value!r} is not an integer"


def _hosts_and_ports(params: dict[str, Any]) -> Iterator[str]:
    ports, source = _value(params, "port")
    for port in (ports or "").split(","):
        # An empty entry is the default port.
        if port and not _port(port):
            yield f"invalid port number {port!r} in {source}"
    hosts, _ = _value(params, "host")
    hostaddrs, _ = _value(params, "hostaddr")
    if hosts and hostaddrs and _count(hosts) != _count(hostaddrs):
        yield f"could not match {_count(hosts)} host names to {_count(hostaddrs)} hostaddr values"
    targets = _count(hostaddrs) or _count(hosts) or 1
    if _count(ports) > 1 and _count(ports) != targets:
        yield f"could not match {_count(ports)} port numbers to {targets} hosts"


def _timeout(params: dict[str, Any]) -> Iterator[str]:
    try:
        timeout_from_conninfo(params)
    except psycopg.ProgrammingError as exc:
        yield str(exc)

"""Keep passwords out of every message the exporter prints or exports."""

from __future__ import annotations

import re

# password=secret / password='se cret' in key=value DSNs, user:secret@ in URIs.
_KEYWORD_PASSWORD = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"(?<=://)[^:/@\s]*:([^@\s]*)@")


def secrets_in(dsn: str) -> list[str]:
    """Password-like fragments of a DSN, found without trusting it to parse."""
    found = [m.group(1).strip("'") for m in _KEYWORD_PASSWORD.finditer(dsn)]
    found += [m.group(1) for m in _URI_PASSWORD.finditer(dsn)]
    return [s for s in found if s]


def scrub(message: str, dsn: str | None = None, password: str | None = None) -> str:
    """Remove from `message` the password of `dsn`, `password`, and anything password-shaped."""
    secrets = secrets_in(dsn) if dsn else []
    if password:
        secrets.append(password)
    # Longest first, so a password that contains another is removed whole.
    for secret in sorted(set(secrets), key=len, reverse=True):
        message = message.replace(secret, "<redacted>")
    message = _KEYWORD_PASSWORD.sub("password=<redacted>", message)
    return _URI_PASSWORD.sub(lambda m: m.group(0).replace(m.group(1), "<redacted>"), message)

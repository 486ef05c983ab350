"""Stage 1, what to watch: targets from flags or a config file, and the web endpoint's TLS and
basic auth. Everything here runs before the first connection; any problem is a ConfigError."""

from __future__ import annotations

from pathlib import Path


class ConfigError(Exception):
    """A configuration problem the user must fix; str() is one printable line."""


def read_text_file(path: str, what: str) -> str:
    """The text of a file the user named; ConfigError naming `what` when it cannot be read."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text") from None

"""Stage 1, what to watch: targets from flags or a config file, and the web endpoint's TLS and
basic auth. Everything here runs before the first connection; any problem is a ConfigError."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration problem the user must fix; str() is one printable line."""

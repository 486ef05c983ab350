"""Stage 3, what to watch: targets from flags or a config file, and the web endpoint's TLS and
basic auth. Everything here runs before the first connection; any problem is a ConfigError."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class ConfigError(Exception):
    """A configuration problem the user must fix; str() is one printable line."""


def read_text_file(path: str, what: str) -> str:
    """The text of a file the user named; `what` names the file in messages ("config file")."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text") from None


def read_yaml(path: str, what: str) -> Any:
    """The document in a YAML file; `what` names the file in messages ("config file")."""
    import yaml  # noqa: PLC0415 (RSS: PyYAML only when a file is read, docs/performance.md)

    text = read_text_file(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"{what} {path} is not valid YAML{line}") from None
    except RecursionError:
        # PyYAML composes nodes recursively: a few hundred unclosed "[" exhaust the stack.
        raise ConfigError(f"{what} {path} is nested too deeply") from None


def key_list(keys: set[Any]) -> str:
    """Keys for a message. YAML keys may be ints, null, or text with a newline: the message must
    stay one line and sortable, so anything but printable text is shown as its repr."""
    shown = (k if isinstance(k, str) and k.isprintable() else repr(k) for k in keys)
    return ", ".join(sorted(shown))

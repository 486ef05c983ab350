"""Numbers in words for people: the report's one way to print each kind of figure.

Sizes use PostgreSQL's units (1 kB = 1024 bytes), times milliseconds, waits per MiB.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

from pg_aio_exporter.vocabulary import MIB

NONE = "n/a"


def _g(value: float) -> str:
    """Three significant digits, thousands separated, no exponent."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if 0 < abs(value) < 0.001:
        return "<0.001"
    return f"{value:.3g}"


def rate(per_second: float) -> str:
    return _g(per_second)


def count(value: float) -> str:
    return f"{value:g}"


def sessions(average: float) -> str:
    return f"{average:.2f}"


def ms(seconds: float | None) -> str:
    return NONE if seconds is None else f"{_g(seconds * 1000)} ms"


def per_mib(seconds_per_byte: float | None) -> str:
    return NONE if seconds_per_byte is None else f"{_g(seconds_per_byte * MIB * 1000)} ms/MiB"


def mib(nbytes: float) -> str:
    return f"{_g(nbytes / MIB)} MiB"


def size(nbytes: float | None) -> str:
    if nbytes is None:
        return NONE
    if nbytes >= MIB:
        return f"{_g(nbytes / MIB)} MB"
    return f"{_g(nbytes / 1024)} kB"


def ratio(value: float | None) -> str:
    return NONE if value is None else f"{value:.2f}x"


def interval(low: float, high: float) -> str:
    """A ratio's interval: "1.35-1.48x" (under 0.1, two significant digits: "0.0043-83.27x")."""
    return f"{low:.2f}-{high:.2f}x" if low >= 0.1 else f"{low:.2g}-{high:.2f}x"


def percent(share: float | None) -> str:
    return NONE if share is None else f"{share * 100:.0f}%"


def fraction(value: float | None) -> str:
    return NONE if value is None else f"{value:.2f}"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m {rest}s"


def timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def terminal(text: str) -> str:
    """`text` safe for a terminal: each control or format character but the line breaks (an
    escape sequence or a bidi override in a SQL comment, a statement text, a name) shown as
    U+FFFD, one column for one character, so the layout's widths hold."""
    return "".join(
        "\ufffd" if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text
    )

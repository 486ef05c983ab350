"""The families one poll or sample of one target produces, with the target's labels on each.

Samples are rendered to exposition text as they are added, as prometheus_client's
generate_latest writes them (the daemon does not import it: see process.py): each poll or
sample is formatted once, and the /metrics body is assembled from these texts without
formatting anything again.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping


def _label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def series(name: str, labels: Mapping[str, str]) -> str:
    """`name{a="x",b="y"} ` (labels sorted by name, as generate_latest does), before a value."""
    if not labels:
        return f"{name} "
    # Label names are the collectors' own, all legal as they are (docs/metrics.md).
    pairs = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{pairs}}} "


@functools.cache
def header(name: str, doc: str, kind: str) -> bytes:
    """HELP and TYPE lines, encoded; `name` as exposed (counters with their _total). Cached:
    every target's every poll has the same few dozen, and each is kept until the next poll."""
    doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n".encode()


def number(value: float) -> str:
    """A sample value or `le` bound as prometheus_client writes it: Python's shortest repr,
    but with an exponent from 1e+06 up (1.234567e+06, where repr writes 1234567.0), where Go's
    and Prometheus' formatting switch to one. From 1e+10 the exponent is Go's (1e+10), where
    prometheus_client writes 1e+010."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    whole, dot, fraction = text.partition(".")
    if value <= 0 or not dot or len(whole) < 7:
        return text
    digits = (whole + fraction).rstrip("0")
    mantissa = digits[0] + ("." + digits[1:] if digits[1:] else "")
    return f"{mantissa}e+{len(whole) - 1:02d}"


def value(amount: float) -> str:
    """The rest of a sample line after `series`."""
    return number(amount) + "\n"


class Family:
    """One metric family of one target: its header and its rendered sample lines."""

    __slots__ = ("header", "lines", "name")

    def __init__(self, name: str, doc: str, kind: str) -> None:
        self.name = name
        self.header = header(name + "_total" if kind == "counter" else name, doc, kind)
        self.lines: list[str] = []


class MetricSet:
    """Accumulates samples by family; every sample carries the target's base labels first."""

    def __init__(self, base_labels: dict[str, str]) -> None:
        self._base = base_labels
        self._families: dict[str, Family] = {}

    def _family(self, name: str, doc: str, kind: str) -> Family:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = Family(name, doc, kind)
        return family

    def _line(self, sample: str, number: float, labels: dict[str, str]) -> str:
        return series(sample, {**self._base, **labels}) + value(number)

    def gauge(self, name: str, doc: str, value: float, /, **labels: str) -> None:
        self._family(name, doc, "gauge").lines.append(self._line(name, value, labels))

    def counter(self, name: str, doc: str, value: float, /, **labels: str) -> None:
        """`name` without the _total suffix, which the exposition adds."""
        family = self._family(name, doc, "counter")
        family.lines.append(self._line(name + "_total", value, labels))

    def sibling(self) -> MetricSet:
        """An empty set with the same base labels: one collector's, collected apart."""
        return MetricSet(self._base)

    def families(self) -> list[Family]:
        return list(self._families.values())

    def add(self, other: MetricSet) -> None:
        """Append `other`'s samples (a collector's, collected apart so that a collector that
        fails half-way leaves nothing behind)."""
        for name, family in other._families.items():
            mine = self._families.get(name)
            if mine is None:
                self._families[name] = family
            else:
                mine.lines += family.lines

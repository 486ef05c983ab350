"""The families one poll or sample of one target produces, with the target's labels on each.

Samples are rendered to exposition text as they are added, byte for byte what
prometheus_client's generate_latest writes: each poll or sample is formatted once, and the
/metrics body is assembled from these texts without formatting anything again.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from prometheus_client.openmetrics.exposition import escape_label_name
from prometheus_client.utils import floatToGoString

_label_names: dict[str, str] = {}


def _label_name(name: str) -> str:
    # The few label names repeat on every sample: escape each once.
    escaped = _label_names.get(name)
    if escaped is None:
        escaped = _label_names[name] = escape_label_name(name)
    return escaped


def _label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def series(name: str, labels: Mapping[str, str]) -> str:
    """`name{a="x",b="y"} ` (labels sorted by name, as generate_latest does), before a value."""
    if not labels:
        return f"{name} "
    pairs = ",".join(f'{_label_name(k)}="{_label_value(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{pairs}}} "


@functools.cache
def header(name: str, doc: str, kind: str) -> bytes:
    """HELP and TYPE lines, encoded; `name` as exposed (counters with their _total). Cached:
    every target's every poll has the same few dozen, and each is kept until the next poll."""
    doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n".encode()


def number(value: float) -> str:
    """A sample value or `le` bound as Go (hence Prometheus) writes it."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


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

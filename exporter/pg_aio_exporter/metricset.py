"""The families one poll or sample of one target produces, with the target's labels on each."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric


class MetricSet:
    """Accumulates samples by family; every sample carries the target's base labels first."""

    def __init__(self, base_labels: dict[str, str]) -> None:
        self._base = base_labels
        self._families: dict[str, Metric] = {}

    def _family(self, name: str, doc: str, kind: str) -> Metric:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = Metric(name, doc, kind)
        return family

    def gauge(self, name: str, doc: str, value: float, /, **labels: str) -> None:
        self._family(name, doc, "gauge").add_sample(name, {**self._base, **labels}, value)

    def counter(self, name: str, doc: str, value: float, /, **labels: str) -> None:
        """`name` without the _total suffix, which the exposition adds."""
        family = self._family(name, doc, "counter")
        family.add_sample(name + "_total", {**self._base, **labels}, value)

    def families(self) -> list[Metric]:
        return list(self._families.values())


def merge(groups: Iterable[Iterable[Metric]]) -> list[Metric]:
    """One family per name across targets: the text format allows a single HELP/TYPE each."""
    merged: dict[str, Metric] = {}
    for group in groups:
        for family in group:
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = Metric(family.name, family.documentation, family.type)
            into.samples.extend(family.samples)
    return list(merged.values())

"""One shape for a side of the report, reads and writes alike: counts over the seconds they
cover (per-second figures), the figures by name that the JSON, the text and the comparison
show, and the comparison of a figure with the baseline's, judged by the side's own baseline
settings (thresholds.yaml: PgAioReadLatencyRegression and PgAioStorageSaturated for reads,
PgAioWriteLatencyRegression and PgAioStorageSaturatedByWrites for writes).

summary.Reads and written.Writes are the two sides; compare.py, document.py and text.py show
both through the helpers here, findings/reads.py and findings/writes.py judge both with `against`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.thresholds import BaselineSettings

# A side's figures by name (None: not measured); the order is the output's.
Figures = dict[str, float | None]
# How the text shows each figure: name -> (label, formatter).
Shown = Mapping[str, tuple[str, Callable[[float | None], str]]]


def rate(count: float, seconds: float) -> float:
    """`count` per second of `seconds`; 0 when no time was counted."""
    return count / seconds if seconds > 0 else 0.0


@dataclass(frozen=True)
class Regression:
    """A figure now against the baseline's: time per byte, for both sides."""

    now: float
    before: float
    ratio: float  # now / before

    def regressed(self, settings: BaselineSettings) -> bool:
        """Slower than the side's regression alert allows."""
        return self.ratio > settings.regression_factor

    def saturating(self, settings: BaselineSettings) -> bool:
        """Slower than the side's saturation alert takes as a signal."""
        return self.ratio > settings.latency_factor


def against(now: float | None, before: float | None) -> Regression | None:
    """`now` against the baseline's `before`, when both were measured (and `before` is not 0)."""
    if now is None or before is None or before <= 0:
        return None
    return Regression(now, before, now / before)


@dataclass(frozen=True)
class Change:
    before: float | None
    after: float | None

    @property
    def ratio(self) -> float | None:
        if self.before is None or self.after is None or self.before <= 0:
            return None
        return self.after / self.before

    def to_json(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after, "ratio": self.ratio}


def changes(before: Figures, after: Figures, names: Iterable[str]) -> dict[str, Change]:
    """Each named figure of a side before and after."""
    return {name: Change(before[name], after[name]) for name in names}


def change_cells(compared: Mapping[str, Change], shown: Shown) -> list[tuple[str, list[str]]]:
    """The comparison's text cells of one side: label, then before, after and the ratio."""
    out = []
    for name, change in compared.items():
        label, show = shown[name]
        out.append((label, [show(change.before), show(change.after), units.ratio(change.ratio)]))
    return out

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
from pg_aio_exporter.report.margin import Estimate, Ratio, ratio_rse
from pg_aio_exporter.thresholds import BaselineSettings

# A side's figures by name (None: not measured); the order is the output's.
Figures = dict[str, float | None]
# How the text shows each figure: name -> (label, formatter).
Shown = Mapping[str, tuple[str, Callable[[float | None], str]]]
# A side's time and bytes per sub-window of at least half a poll interval (report/runner.py):
# (seconds of read wait or write time, bytes, seconds of window), whose spread is the error of
# its time per byte.
Batches = tuple[tuple[float, float, float], ...]


def rate(count: float, seconds: float) -> float:
    """`count` per second of `seconds`; 0 when no time was counted."""
    return count / seconds if seconds > 0 else 0.0


def per_byte(value: float | None, batches: Batches | None, seconds: float) -> Estimate | None:
    """A side's time per byte with its relative error from the window's sub-windows
    (margin.ratio_rse); None when not measured, or with too few sub-windows to tell a spread
    (windows under about four poll intervals, a report saved before sub-windows were kept)."""
    if value is None or batches is None:
        return None
    rse = ratio_rse(batches, seconds)
    return None if rse is None else Estimate.of(value, rse)


@dataclass(frozen=True)
class Regression:
    """A figure now against the baseline's: time per byte, for both sides, with the ratio's 90%
    interval where both windows had sub-windows enough to tell one (margin: None)."""

    now: float
    before: float
    ratio: float  # now / before
    margin: Ratio | None = None

    @property
    def slower(self) -> bool:
        """Slower is claimed: by the claim rule where there is an interval (margin.py: above 1
        by at least its half-width), by the ratio alone where there is none."""
        return self.ratio > 1 if self.margin is None else self.margin.slower

    @property
    def faster(self) -> bool:
        """Faster is claimed, likewise."""
        return self.ratio < 1 if self.margin is None else self.margin.faster

    def regressed(self, settings: BaselineSettings) -> bool:
        """Slower than the side's regression alert allows, and slower claimed."""
        return self.ratio > settings.regression_factor and self.slower

    def saturating(self, settings: BaselineSettings) -> bool:
        """Slower than the side's saturation alert takes as a signal, and slower claimed."""
        return self.ratio > settings.latency_factor and self.slower

    @property
    def shown(self) -> str:
        """The ratio in words, with its interval where there is one: "2.28x (1.90-2.74x)"."""
        return units.ratio(self.ratio) + interval_words(self.margin)

    @property
    def undecided(self) -> str:
        """Why no direction is claimed, in words, for a ratio with an interval that claims
        none: "about the same (0.90-1.20x)" or "too close to call (1.02-1.30x)"."""
        assert self.margin is not None
        low, high = self.margin.interval
        kind = "about the same" if self.margin.holds_one else "too close to call"
        return f"{kind} ({units.interval(low, high)})"


def interval_words(margin: Ratio | None) -> str:
    """ " (low-high)" for a ratio with an interval, else nothing."""
    return "" if margin is None else f" ({units.interval(*margin.interval)})"


def interval_json(margin: Ratio | None) -> list[float] | None:
    """A ratio's interval as the JSON has it, [low, high], or null without one."""
    return None if margin is None else list(margin.interval)


def against(
    now: float | None,
    before: float | None,
    now_estimate: Estimate | None = None,
    before_estimate: Estimate | None = None,
) -> Regression | None:
    """`now` against the baseline's `before`, when both were measured (and `before` is not 0),
    with the ratio's interval from both windows' estimates where both have one."""
    if now is None or before is None or before <= 0:
        return None
    return Regression(now, before, now / before, Ratio.of(now_estimate, before_estimate))


@dataclass(frozen=True)
class Change:
    before: float | None
    after: float | None
    margin: Ratio | None = None  # the ratio with its 90% interval (time per byte only)

    @property
    def ratio(self) -> float | None:
        if self.before is None or self.after is None or self.before <= 0:
            return None
        return self.after / self.before

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "ratio": self.ratio,
            "interval": interval_json(self.margin),
        }


def changes(
    before: Figures,
    after: Figures,
    names: Iterable[str],
    margins: Mapping[str, Ratio | None] | None = None,
) -> dict[str, Change]:
    """Each named figure of a side before and after, with the intervals of those in
    `margins`."""
    return {name: Change(before[name], after[name], (margins or {}).get(name)) for name in names}


def change_cells(compared: Mapping[str, Change], shown: Shown) -> list[tuple[str, list[str]]]:
    """The comparison's text cells of one side: label, then before, after and the ratio."""
    out = []
    for name, change in compared.items():
        label, show = shown[name]
        ratio = units.ratio(change.ratio) + interval_words(change.margin)
        out.append((label, [show(change.before), show(change.after), ratio]))
    return out

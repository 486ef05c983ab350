"""Margins: a measured figure with its standard error, and the ratio of two with a 90% interval.

The report states every ratio of workload time with the interval the data allow (docs/report.md,
"How sure is the answer"). Each window's figure carries its relative standard error, built from
the window itself: the sampling error of the sampled sessions (batch means over consecutive
sub-windows, never less than the Poisson error of the sessions seen), the per-call variance
pg_stat_statements keeps, and the counts' lag at the window's ends. Two windows are independent,
so the log of their ratio has the sum of their variances; the interval is symmetric in the log.

A ratio is never divided by zero: `Ratio.of` refuses a denominator or numerator that is zero or
not measured (None), so "not measured" and 0 stay apart from any ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

Z90 = 1.6449  # a two-sided 90% interval of a normal estimate
# Below this the figure's own error is no guide: what the server's counts leave out of the
# client's time (round trips, the client's CPU) moves by ~1-2% between runs (issue 22's table:
# the report within 0.3-2.3% of pgbench's ratio on 10 s windows of scans). Every window's
# relative error is at least this.
FLOOR = 0.01
BATCHES = 10  # sub-windows for the spread of the sampled sessions, at most
MIN_BATCHES = 4  # fewer sub-windows say nothing of the spread: Poisson alone
# Samples per sub-window, at least: neighbouring samples are correlated (a statement seen in
# several samples in a row is one event), and sub-windows of one or two samples would count
# them as independent. Under MIN_BATCHES x this many samples (20: `--duration 1m
# --sample-interval 5s` has 12), Poisson alone.
BATCH_SAMPLES = 5
# The spread of k sub-windows is itself an estimate with k - 1 degrees of freedom: Student's t
# for a two-sided 90% interval (its 0.95 quantile, from the standard tables), by degrees of
# freedom, over the normal's.
T90 = {3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833}
# Below this many sessions seen working, the sub-windows are mostly empty and their spread no
# guide: the Poisson error of the count bounds it.
MIN_SEEN = 30
# The smallest change an undecided answer is sized for: "how long a window would decide it"
# for a change of 1% or none at all would be hours, and says nothing useful.
MIN_CHANGE = 1.05
# The range of window lengths, as a factor of the windows measured, over which decisive_after
# looks: LONGEST stands for "however long" (the shrinking errors then 1e-6 of theirs).
SHORTEST, LONGEST = 1e-6, 1e12
# A direction (faster, slower) is claimed only when the ratio is this many half-widths of its
# 90% interval from 1: the interval's nearer end then lies at least a half-width beyond 1, and
# any ratio inside the interval (a client's, such as pgbench's) moved by more than the margin.
# An interval twice as wide (99.9%) clears 1. With 1 (a claim as soon as the interval cleared
# 1), probes where pgbench moved 4-8% were claimed faster or slower with a margin of 10-15%
# (bench/workload_margin.py, docs/report.md).
CLAIM_WIDTHS = 2.0
# A backend adds its counts to the statistics views (pg_stat_database, pg_stat_io) when it goes
# idle, at most once a second while busy: at either end of a window the counts lag by up to
# about this (seconds).
STATS_LAG = 1.0


@dataclass(frozen=True)
class Estimate:
    """A figure measured over one window and its relative standard error (sd / value)."""

    value: float
    rse: float
    # The part of rse that a longer window at the same load narrows (sampling, per-call
    # variance, the counts' lag and the report's own transactions at the ends); the rest is
    # FLOOR, which no window narrows. None: all of rse.
    shrinking: float | None = None

    @classmethod
    def of(cls, value: float, *rses: float) -> Estimate:
        """A figure with its independent relative errors together, never below FLOOR."""
        shrinking = math.sqrt(sum(r * r for r in rses))
        return cls(value, max(FLOOR, shrinking), shrinking)

    def longer(self, factor: float, shift: float = 1.0) -> Estimate:
        """As over a window `factor` times as long at the same load, its value x `shift`: the
        shrinking part falls with the square root of the window (the lag and the report's own
        fall as the window itself: the sooner a window decides, the later this says)."""
        if self.shrinking is None:
            return Estimate(self.value * shift, self.rse / math.sqrt(factor))
        shrinking = self.shrinking / math.sqrt(factor)
        return Estimate(self.value * shift, max(FLOOR, shrinking), shrinking)


@dataclass(frozen=True)
class Ratio:
    """after / before, with a 90% interval."""

    value: float
    log_sd: float  # standard error of log(value)
    # The interval widened to hold another estimate of the same ratio (`holding`); None: the
    # interval is this estimate's own.
    bounds: tuple[float, float] | None = None
    # What the ratio was made of, for what longer windows would make of it (decisive_after):
    # its two windows' estimates (after, before; None: log_sd falls with the square root of
    # the window), and the estimates it was widened to hold, each with `holding`'s `own`.
    parts: tuple[Estimate, Estimate] | None = None
    held: tuple[tuple[Ratio, bool], ...] = ()

    @classmethod
    def of(cls, after: Estimate | None, before: Estimate | None) -> Ratio | None:
        """None when either side is not measured or is zero: a zero denominator is refused,
        and a zero numerator has no interval in the log (the caller says what it means)."""
        if after is None or before is None or before.value <= 0 or after.value <= 0:
            return None
        return cls(
            after.value / before.value, math.hypot(after.rse, before.rse), parts=(after, before)
        )

    @property
    def interval(self) -> tuple[float, float]:
        if self.bounds is not None:
            return self.bounds
        spread = math.exp(Z90 * self.log_sd)
        return self.value / spread, self.value * spread

    def holding(self, other: Ratio, *, own: bool = False) -> Ratio:
        """This ratio with an interval that also holds `other`'s value, with this one's
        precision around it: two estimates of the same change that disagree leave the client's
        answer anywhere between them, and the other's own sampling error adds nothing. `own`:
        with the other's precision where it is the wider, for an estimate of the client's time
        whose error this one does not share (the counts' lag at the windows' ends)."""
        spread = math.exp(Z90 * max(self.log_sd, other.log_sd if own else 0.0))
        low, high = self.interval
        return replace(
            self,
            bounds=(min(low, other.value / spread), max(high, other.value * spread)),
            held=(*self.held, (other, own)),
        )

    @property
    def half_width(self) -> float:
        """The interval's half-width in the log: the margin, ln(high / low) / 2."""
        low, high = self.interval
        return math.log(high / low) / 2

    @property
    def faster(self) -> bool:
        """Faster is claimed: the interval is below 1 by at least its own half-width
        (CLAIM_WIDTHS), so that any ratio inside it moved by more than the margin."""
        high = self.interval[1]
        return high < 1 and -math.log(high) >= (CLAIM_WIDTHS - 1) * self.half_width

    @property
    def slower(self) -> bool:
        """Slower is claimed: the interval is above 1 by at least its own half-width."""
        low = self.interval[0]
        return low > 1 and math.log(low) >= (CLAIM_WIDTHS - 1) * self.half_width

    @property
    def decided(self) -> bool:
        return self.faster or self.slower

    @property
    def holds_one(self) -> bool:
        """The interval holds 1: about as fast. Neither this nor decided: the interval clears
        1, by less than its half-width (too close to call)."""
        low, high = self.interval
        return low <= 1 <= high

    def decisive_after(self, seconds: float, change: float = MIN_CHANGE) -> float | None:
        """How long both windows would have to be (seconds) for a direction to be claimed,
        were the ratio as it is (or, within `change` of 1, a change of `change`, the
        estimates it holds moved alike); None when no length would: what a longer window
        leaves (the floor, another estimate held that disagrees) keeps the interval within its
        margin of 1. Only the shrinking errors fall, with the square root of the window."""
        distance = max(abs(math.log(self.value)), math.log(change))
        shift = math.exp(math.copysign(distance, math.log(self.value)) - math.log(self.value))
        if not self._longer(LONGEST, shift).decided:
            return None
        # Longer windows narrow the interval, so the shortest that decides is found by halving
        # the range of window lengths (in the log).
        low, high = math.log(SHORTEST), math.log(LONGEST)
        for _ in range(60):
            middle = (low + high) / 2
            if self._longer(math.exp(middle), shift).decided:
                high = middle
            else:
                low = middle
        return seconds * math.exp(high)

    def _longer(self, factor: float, shift: float) -> Ratio:
        """This ratio as over windows `factor` times as long at the same load, its value and
        those of the estimates it holds x `shift`. Bounds set outright (not by `holding`) are
        dropped: no window narrows the clients' bound (compare_workload), nor is one asked of
        it."""
        if self.parts is None:
            ratio = Ratio(self.value * shift, self.log_sd / math.sqrt(factor))
        else:
            after, before = self.parts
            longer = Ratio.of(after.longer(factor, shift), before.longer(factor))
            assert longer is not None  # the same positive values as this one's
            ratio = longer
        for other, own in self.held:
            ratio = ratio.holding(other._longer(factor, shift), own=own)
        return ratio


def poisson_rse(events: float) -> float:
    """Relative error of a count of independent events; infinite for none."""
    return 1 / math.sqrt(events) if events > 0 else math.inf


def batch_means(series: Sequence[float]) -> tuple[float, ...] | None:
    """A series of consecutive samples cut into up to BATCHES sub-windows of at least
    BATCH_SAMPLES samples, each one's mean; None when too short to tell a spread."""
    n = len(series)
    batches = min(BATCHES, n // BATCH_SAMPLES)
    if batches < MIN_BATCHES:
        return None
    parts = [series[b * n // batches : (b + 1) * n // batches] for b in range(batches)]
    return tuple(sum(part) / len(part) for part in parts)


def batch_rse(means: Sequence[float] | None) -> float:
    """Relative standard error of a window's mean from its sub-windows' means (batch means):
    their spread holds the correlation of neighbouring samples and any drift of the load. 0
    when there are too few sub-windows or their mean is 0 (other terms bound the error)."""
    if means is None or len(means) < MIN_BATCHES:
        return 0.0
    mean = sum(means) / len(means)
    if mean <= 0:
        return 0.0
    var = sum((m - mean) ** 2 for m in means) / (len(means) - 1)
    return math.sqrt(var / len(means)) / mean


def sampling_rse(seen: float | None, means: Sequence[float] | None) -> float:
    """Relative error of sampled sessions: the Poisson error of the count (infinite when none
    was seen), or the spread of the sub-windows widened by Student's t for their number where
    that is the larger (enough sub-windows, and enough sessions seen to fill them). The spread
    alone can be 0 (a steady load in every sub-window) where a second run would differ by the
    count's own error. Neither known (a schema 2 report without samples): 0, the floor then
    bounds it."""
    if seen is None:
        return 0.0
    poisson = poisson_rse(seen)
    spread = batch_spread(means)
    if spread is None or seen < MIN_SEEN:
        return poisson
    return max(poisson, spread)


def batch_spread(means: Sequence[float] | None) -> float | None:
    """batch_rse widened by Student's t for the number of sub-windows; None when there are too
    few to tell a spread."""
    if means is None or len(means) < MIN_BATCHES:
        return None
    # A saved report's sub-windows may number more than BATCHES: t for 9 degrees of freedom
    # is then a little wide.
    t = T90[min(len(means), BATCHES) - 1] / Z90
    return batch_rse(means) * t


def join_short(parts: Sequence[Sequence[float]], least: float) -> list[list[float]]:
    """Consecutive sub-windows, each a list of counts whose last is its seconds, summed with
    the next until each lasts at least `least` seconds (a short last one joins the one before):
    a span of a second or two between polls is mostly the counts' flush lag (STATS_LAG)."""
    joined: list[list[float]] = []
    for part in parts:
        if joined and joined[-1][-1] < least:
            joined[-1] = [a + b for a, b in zip(joined[-1], part, strict=True)]
        else:
            joined.append(list(part))
    if len(joined) > 1 and joined[-1][-1] < least:
        last = joined.pop()
        joined[-1] = [a + b for a, b in zip(joined[-1], last, strict=True)]
    return joined


def flush_lag_rse(batches: Sequence[float], seconds: float) -> float:
    """The relative error that the statistics' flush lag at the window's two ends gives a ratio
    of two counts a backend flushes together (active time per transaction, read wait per byte).
    At either end each backend's last second of work at most (STATS_LAG) is not yet in the
    view, missing from the numerator and the denominator alike. The ratio then moves only by
    how that second's figure differs from the window's: its share of the window (STATS_LAG /
    seconds) times the spread of one second's figure, taken from the spread of the `batches`
    (the window's sub-windows, of seconds / len(batches) each) as for independent seconds (sd
    by the square root of the length); the two ends independent. 0 when the batches do not
    tell a spread (fewer than 2, or no time)."""
    k = len(batches)
    mean = sum(batches) / k if k else 0.0
    if k < 2 or mean <= 0 or seconds <= 0:
        return 0.0
    batch_sd = math.sqrt(sum((b - mean) ** 2 for b in batches) / (k - 1)) / mean
    second_sd = batch_sd * math.sqrt(seconds / k / STATS_LAG)
    return math.sqrt(2) * STATS_LAG / seconds * second_sd


def ratio_batches(parts: Sequence[Sequence[float]]) -> tuple[float, ...] | None:
    """The sub-windows of a ratio of sums R = sum(N) / sum(D) (read wait per byte: time over
    bytes), each (N_i, D_i), as values whose mean is R and whose spread is R's: R + (N_i - R
    D_i) / mean(D), the ratio estimator's linearisation. A sub-window's own N_i / D_i would
    count one with a few bytes as much as one with many, and its noise with it. None when
    sum(D) is 0."""
    total = sum(p[1] for p in parts)
    if not parts or total <= 0:
        return None
    ratio = sum(p[0] for p in parts) / total
    mean = total / len(parts)
    return tuple(ratio + (n - ratio * d) / mean for n, d, *_ in parts)


def ratio_rse(parts: Sequence[Sequence[float]], seconds: float) -> float | None:
    """Relative error of sum(N) / sum(D) over a window of `seconds` from its sub-windows (N_i,
    D_i): their spread widened by Student's t for their number (batch_spread), and the flush
    lag at the window's ends (flush_lag_rse); None with too few sub-windows to tell a spread
    (MIN_BATCHES)."""
    batches = ratio_batches(parts)
    spread = batch_spread(batches)
    if batches is None or spread is None:
        return None
    return math.hypot(spread, flush_lag_rse(batches, seconds))

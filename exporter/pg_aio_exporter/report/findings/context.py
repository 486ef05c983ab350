"""What every finding is judged from and made of: the `Context` (the window's summary, the
thresholds and, optionally, a baseline window, with the figures the checks share), the
`Finding` they return, and the words that place a latency among the storage classes (read and
write checks alike)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.report.side import Regression, against
from pg_aio_exporter.report.summary import ServerFacts, Summary
from pg_aio_exporter.report.workload import WorkloadComparison, compare_workload
from pg_aio_exporter.thresholds import StorageClass, Thresholds


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # ok, info, warning, critical
    summary: str
    evidence: dict[str, Any]
    advice: str


@dataclass(frozen=True)
class Context:
    summary: Summary
    thresholds: Thresholds
    baseline: Summary | None = None

    @property
    def reads_per_second(self) -> float:
        return self.summary.total.reads_per_second

    @property
    def enough_reads(self) -> bool:
        """The alerts' traffic guard: below it, per-read figures are noise."""
        return self.reads_per_second >= self.thresholds.min_read_ops_per_second

    @property
    def read_wait_sessions(self) -> float:
        return self.summary.activity.read_wait_sessions(self.thresholds.io_wait_events)

    @property
    def sampled(self) -> bool:
        """The sessions' waits were sampled (not merely samples taken: pg_stat_activity read)."""
        return self.summary.waits_read

    def severity(self, name: str) -> str:
        """thresholds.yaml's severity of an alert, or of a finding only the report makes (by
        its id)."""
        return self.thresholds.severities[name]

    def seconds_per_read(self) -> float | None:
        figures = self.summary.total.figures
        return None if figures is None else figures.latency_seconds

    def seconds_per_byte(self) -> float | None:
        return self.summary.total.seconds_per_byte()

    def latency_limit(self) -> float | None:
        """PgAioReadLatencyHigh's limit for this window's average read size."""
        figures = self.summary.total.figures
        if figures is None:
            return None
        return self.thresholds.allowed_seconds_per_read(figures.size_bytes)

    def read_class_words(self) -> str | None:
        """Per-read wait judged by the target's storage class, and the class it looks like:
        "4.08 ms per 20 kB read: slow for network-ssd (up to 2.16 ms), usual for hdd"."""
        figures = self.summary.total.figures
        if figures is None or figures.latency_seconds is None:
            return None
        t, per_read, size = self.thresholds, figures.latency_seconds, figures.size_bytes
        return f"{units.ms(per_read)} per {units.size(size)} read: " + class_words(
            t, per_read, t.allowed_seconds_per_read(size), t.usual_for_reads(per_read, size)
        )

    def regression(self) -> Regression | None:
        """Read wait per byte against the baseline's, when both windows measured waits."""
        if self.baseline is None:
            return None
        return against(
            self.seconds_per_byte(),
            self.baseline.total.seconds_per_byte(),
            self.summary.read_estimate(),
            self.baseline.read_estimate(),
        )

    def other_regime(self) -> str | None:
        """Why the baseline's time per byte is no storage signal, in words, or None when it is
        one: the baseline ran another major version or io_method. Either changes how much of
        each read (or write) overlaps other work with no change in the storage, so the rules
        compare a target only within its regime (alerts/recording.py, regime_rules) and the
        report alike; a minor update keeps the regime."""
        if self.baseline is None:
            return None
        now, then = self.summary.server, self.baseline.server
        if _regime(now) == _regime(then):
            return None
        return (
            f"the baseline ran PostgreSQL {then.version} with io_method {then.io_method_shown},"
            f" this window {now.version} with {now.io_method_shown}"
        )

    def storage_regression(self) -> Regression | None:
        """regression() when the baseline is a storage signal (other_regime), else None."""
        return self.regression() if self.other_regime() is None else None

    def workload(self) -> WorkloadComparison | None:
        """Workload time now against the baseline: the answer to "faster or slower"."""
        if self.baseline is None:
            return None
        return compare_workload(
            self.baseline.workload,
            self.summary.workload,
            self.thresholds.min_matched_statement_share,
        )

    def reads_uncounted(self) -> bool:
        """Sessions waited on reads while pg_stat_io counted too few to judge: queries that
        read through the whole window, counted only when they end. The sampled wait is not
        held against the counted read time: under io_method=worker a session waits for its
        io workers several times longer than the read time pg_stat_io counts, even when every
        read is counted (docs/report.md)."""
        if not self.sampled or self.enough_reads:
            return False
        return self.read_wait_sessions >= self.thresholds.min_uncounted_read_sessions


Check = Callable[[Context], Finding | None]


def _regime(server: ServerFacts) -> tuple[int, str | None]:
    """The major version and io_method: what the rules' regime label holds."""
    return server.version_num // 10000, server.io_method


def class_words(t: Thresholds, value: float, limit: float, usual: StorageClass | None) -> str:
    """ "slow for network-ssd (up to 2.16 ms), usual for hdd": `value` against the target's
    class's `limit`, and the fastest class for which it is `usual`."""
    own = t.storage.name
    if value <= limit:
        said = f"usual for {own} (up to {units.ms(limit)})"
        if usual is not None and usual.name != own:
            said += f", as fast as {usual.name}"
        return said
    said = f"slow for {own} (up to {units.ms(limit)})"
    return said + (f", usual for {usual.name}" if usual else ", slow for every storage class")

"""Latency judged as the rules judge it: per interval, not over the window's operations.

A window's count-weighted average lets the healthy operations before an incident that
collapses throughput outweigh it (every fsync 10 ms slower: 28x fewer syncs, and a 10-minute
window whose last 8 minutes are slow averages 1.43 ms per sync, "usual"). The rules count each
scrape interval the same whatever its throughput (alerts/alerting.py, mostly_above); the report
counts each of its polls' intervals (report/series.py) alike: of the intervals with the traffic
to judge, the share whose own latency was above the limit, against the alert's min_share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.report.findings.context import Context


@dataclass(frozen=True)
class SlowIntervals:
    slow: int
    judged: int  # intervals with the traffic to judge

    @property
    def share(self) -> float:
        return self.slow / self.judged

    def words(self, what: str) -> str:
        """ "12 of the window's 60 polls with reads (20%)": the caller says what they were."""
        return (
            f"{self.slow} of the window's {self.judged} polls with {what}"
            f" ({units.percent(self.share)})"
        )

    def evidence(self, min_share: float) -> dict[str, Any]:
        return {
            "slow_intervals": self.slow,
            "judged_intervals": self.judged,
            "slow_interval_share": self.share,
            "min_slow_interval_share": min_share,
        }


def _polls(ctx: Context, *names: str) -> Mapping[str, Any] | None:
    """The window's per-poll figures, if it has all of `names` (a report saved before issue
    49 has none)."""
    polls = (ctx.summary.series or {}).get("polls")
    if not isinstance(polls, Mapping) or any(name not in polls for name in names):
        return None
    return polls


def _slow(
    latencies: list[float | None],
    rates: list[float | None],
    min_rate: float,
    limit: Callable[[int], float],
) -> SlowIntervals | None:
    """None when no interval had the traffic to judge."""
    slow = judged = 0
    for i, (latency, rate) in enumerate(zip(latencies, rates, strict=True)):
        if latency is None or rate is None or rate < min_rate:
            continue
        judged += 1
        slow += latency > limit(i)
    return SlowIntervals(slow, judged) if judged else None


def read_intervals(ctx: Context) -> SlowIntervals | None:
    """Polls whose own wait per read was above PgAioReadLatencyHigh's limit for their own
    read size, of those with min_read_ops_per_second."""
    polls = _polls(ctx, "read_latency_seconds", "read_ops_per_second", "read_size_bytes")
    if polls is None:
        return None
    sizes = polls["read_size_bytes"]
    return _slow(
        polls["read_latency_seconds"],
        polls["read_ops_per_second"],
        ctx.thresholds.min_read_ops_per_second,
        lambda i: ctx.thresholds.allowed_seconds_per_read(sizes[i] or 0.0),
    )


def sync_intervals(
    ctx: Context, max_seconds_per_sync: float, min_syncs: float
) -> SlowIntervals | None:
    """Polls whose own time per WAL sync was above the storage class's seconds_per_sync, of
    those with min_syncs_per_second."""
    polls = _polls(ctx, "wal_seconds_per_sync", "wal_syncs_per_second")
    if polls is None:
        return None
    return _slow(
        polls["wal_seconds_per_sync"],
        polls["wal_syncs_per_second"],
        min_syncs,
        lambda _: max_seconds_per_sync,
    )

"""Before/after: this window against a saved one, per pg_stat_io row and for the whole server.

Each figure with its ratio (after / before). Wait per byte is the one that compares PostgreSQL
17 and 18 fairly: 18 merges blocks into larger reads, so its wait per read rises with no
change in storage.
"""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.collectors.intervals import LabelKey
from pg_aio_exporter.report.summary import Reads, Summary

# name -> how to read it from a window's Reads; the order of the output.
FIGURES = (
    "seconds_per_byte",
    "seconds_per_read",
    "read_size_bytes",
    "bytes_per_second",
    "reads_per_second",
    "hit_ratio",
)


def figure(reads: Reads, name: str) -> float | None:
    if name == "bytes_per_second":
        return reads.bytes_per_second
    if name == "reads_per_second":
        return reads.reads_per_second
    figures = reads.figures
    if figures is None:
        return None
    return {
        "seconds_per_byte": figures.seconds_per_byte,
        "seconds_per_read": figures.latency_seconds,
        "read_size_bytes": figures.size_bytes,
        "hit_ratio": figures.hit_ratio,
    }[name]


@dataclass(frozen=True)
class Change:
    before: float | None
    after: float | None

    @property
    def ratio(self) -> float | None:
        if self.before is None or self.after is None or self.before <= 0:
            return None
        return self.after / self.before


@dataclass(frozen=True)
class RowComparison:
    key: LabelKey | None  # None: the whole server
    changes: dict[str, Change]


def compare_reads(before: Reads, after: Reads, key: LabelKey | None) -> RowComparison:
    return RowComparison(key, {n: Change(figure(before, n), figure(after, n)) for n in FIGURES})


def compare(before: Summary, after: Summary, min_reads_per_second: float) -> list[RowComparison]:
    """The whole server first, then every row that read at least `min_reads_per_second` in both
    windows: a few reads a minute make ratios of noise."""
    rows = [compare_reads(before.total, after.total, None)]
    for key in after.reading_rows():
        if key not in before.rows:
            continue
        then, now = before.reads(key), after.reads(key)
        if min(then.reads_per_second, now.reads_per_second) >= min_reads_per_second:
            rows.append(compare_reads(then, now, key))
    return rows

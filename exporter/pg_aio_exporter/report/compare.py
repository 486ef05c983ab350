"""Before/after: this window against a saved one, per pg_stat_io row and for the whole server.

Each figure with its ratio (after / before). Wait per byte is the one that compares PostgreSQL
17 and 18 fairly: 18 merges blocks into larger reads, so its wait per read rises with no
change in storage.
"""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.collectors.intervals import LabelKey
from pg_aio_exporter.report.margin import Ratio
from pg_aio_exporter.report.side import Change, changes
from pg_aio_exporter.report.summary import READ_FIGURES, Reads, Summary
from pg_aio_exporter.report.written import WRITE_FIGURES, Writes


@dataclass(frozen=True)
class RowComparison:
    key: LabelKey | None  # None: the whole server
    changes: dict[str, Change]


def compare_reads(
    before: Reads, after: Reads, key: LabelKey | None, margin: Ratio | None = None
) -> RowComparison:
    """A row's read figures; `margin`: the interval of its wait per byte (the whole server's
    only: the sub-windows are kept for it alone)."""
    return RowComparison(
        key, changes(before.named(), after.named(), READ_FIGURES, {"seconds_per_byte": margin})
    )


def compare(before: Summary, after: Summary, min_reads_per_second: float) -> list[RowComparison]:
    """The whole server first, then every row that read at least `min_reads_per_second` in both
    windows: a few reads a minute make ratios of noise."""
    margin = Ratio.of(after.read_estimate(), before.read_estimate())
    rows = [compare_reads(before.total, after.total, None, margin)]
    for key in after.reading_rows():
        if key not in before.rows:
            continue
        then, now = before.reads(key), after.reads(key)
        if min(then.reads_per_second, now.reads_per_second) >= min_reads_per_second:
            rows.append(compare_reads(then, now, key))
    return rows


def _write_figures(writes: Writes | None) -> dict[str, float | None]:
    return dict.fromkeys(WRITE_FIGURES) if writes is None else writes.named()


def compare_writes(before: Summary, after: Summary) -> dict[str, Change]:
    """The whole server's write figures before and after, write time per byte with its
    interval."""
    margin = None
    if before.writes is not None and after.writes is not None:
        margin = Ratio.of(after.writes.estimate(), before.writes.estimate())
    return changes(
        _write_figures(before.writes),
        _write_figures(after.writes),
        WRITE_FIGURES,
        {"write_seconds_per_byte": margin},
    )

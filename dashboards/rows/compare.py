"""The comparison's read figures now against $offset ago (the rules' io_formulas): per target,
with their change over the range and the io workers and I/O waits beside them, then per
pg_stat_io row chosen with the variables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from alerts import promql

from dashboards.figures import BEFORE, IO_WAITS, NO_IO_WORKERS, ROW_LEGEND, io_figure
from dashboards.panels import Grid, Item
from dashboards.rows.offset import change, now_vs_before
from pg_aio_exporter.vocabulary import MIB


@dataclass(frozen=True)
class Figure:
    title: str
    formula: str  # a name of alerts/promql.py io_formulas
    unit: str
    what: str
    scale: int = 1


FIGURES = (
    Figure(
        "Read wait per operation",
        "read_latency_seconds",
        "s",
        "Wait time per read operation. Rises after a 17 -> 18 upgrade because one operation "
        "reads up to io_combine_limit blocks: read it with the per-MiB panel next to it.",
    ),
    Figure(
        "Read wait per MiB",
        "read_seconds_per_byte",
        "s",
        "Wait time per MiB read: where time goes, not how fast the work ran. Under io_method "
        "worker and io_uring it counts only the part of each read not overlapped with other "
        "work, so across versions and io_method settings it can rise while the workload gets "
        "faster: judge by the workload time row above.",
        scale=MIB,
    ),
    Figure(
        "Average read size",
        "read_size_bytes",
        "bytes",
        "Bytes per read operation: I/O combining at work (8 KiB = none, PostgreSQL 17).",
    ),
    Figure(
        "Read operations per second",
        "read_ops_per_second",
        "iops",
        "Read operations per second. Falls on 18 for the same bytes when reads are combined.",
    ),
    Figure(
        "Read throughput",
        "read_bytes_per_second",
        "Bps",
        "Bytes read from outside shared buffers per second: the same work should read the same "
        "bytes before and after.",
    ),
    Figure(
        "Buffer hit ratio",
        "hit_ratio",
        "percentunit",
        "hits / (hits + blocks read), in blocks on both versions (18 reads many blocks per "
        "operation). If it moved, the workload or the cache changed, and the latency "
        "comparison is between different work.",
    ),
)
# Higher is worse for these: the change stat turns orange and red as they rise.
WORSE_UP = {"read_latency_seconds", "read_seconds_per_byte"}


def figure(fig: Figure, *, per_target: bool, scale: bool = True) -> Callable[[promql.Scope], str]:
    """The figure of `fig` over a scope, per target or per pg_stat_io row chosen."""
    return lambda scope: io_figure(
        fig.formula, scope, per_target=per_target, scale=fig.scale if scale else 1
    )


def per_target(g: Grid) -> list[Item]:
    """Change over the range of the first four figures, then each figure, io worker utilisation
    and sessions waiting on I/O now vs before."""
    return [
        g.row(f"Per target: now vs {BEFORE}"),
        *(
            g.place(
                change(
                    fig.title,
                    "The figure over the dashboard's whole time range (from the counters' rates "
                    f"over it) divided by the same over the range {BEFORE}, minus 1. {fig.what}",
                    # A ratio of two of the same figure: its scale cancels out.
                    figure(fig, per_target=True, scale=False),
                    ((None, "green"), (0.2, "orange"), (0.5, "red"))
                    if fig.formula in WORSE_UP
                    else ((None, "blue"),),
                ),
                6,
                4,
            )
            for fig in FIGURES[:4]
        ),
        *(
            g.place(
                now_vs_before(
                    fig.title,
                    fig.what,
                    figure(fig, per_target=True),
                    fig.unit,
                    "{{target}}",
                    maximum=1 if fig.unit == "percentunit" else None,
                ),
                12,
                8,
            )
            for fig in FIGURES
        ),
        g.place(
            now_vs_before(
                "io worker utilisation",
                "Share of samples in which io workers were busy (only io_method=worker has "
                "io workers).",
                lambda scope: promql.io_worker_utilization(scope).expr,
                "percentunit",
                "{{target}}",
                maximum=1,
            ).no_value(NO_IO_WORKERS),
            12,
            8,
        ),
        g.place(
            now_vs_before(
                "Sessions waiting on I/O",
                "Average sessions in IO wait events (all backend types, io workers included).",
                lambda scope: f"sum by (target) ({promql.active_sessions(scope, *IO_WAITS).expr})",
                "none",
                "{{target}}",
            ),
            12,
            8,
        ),
    ]


def by_row(g: Grid) -> list[Item]:
    """The first two figures, one series per pg_stat_io row chosen."""
    return [
        g.row(f"By backend type, object and context: now vs {BEFORE}"),
        *(
            g.place(
                now_vs_before(
                    f"{fig.title} by pg_stat_io row",
                    f"{fig.what} One series per pg_stat_io row chosen with the variables.",
                    figure(fig, per_target=False),
                    fig.unit,
                    ROW_LEGEND,
                ),
                12,
                8,
            )
            for fig in FIGURES[:2]
        ),
    ]

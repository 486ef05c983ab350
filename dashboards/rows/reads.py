"""The overview's read latency row: the rules' read figures (alerts/promql.py io_formulas) per
pg_stat_io row chosen with the variables."""

from __future__ import annotations

from dashboards.figures import OVER, ROW_LEGEND, io_figure, series
from dashboards.panels import Grid, Item, Q, graph
from pg_aio_exporter.vocabulary import MIB


def panels(g: Grid) -> list[Item]:
    """Read wait per operation and per MiB, read size, hit ratio."""
    return [
        g.row("Read latency: time spent waiting for reads"),
        g.place(
            graph(
                "Read wait per operation",
                f"read_time / reads {OVER} "
                "(as pg_aio_target:read_latency_seconds, per row): how long a "
                "backend waited per read operation. Under AIO this is wait time, not device "
                "time. On PostgreSQL 18 one operation covers up to io_combine_limit blocks, so "
                "this rises after a 17 -> 18 upgrade with no storage change: judge storage by "
                "the per-MiB panel next to it.",
                [Q(io_figure("read_latency_seconds"), ROW_LEGEND)],
                "s",
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Read wait per MiB",
                f"read_time / read_bytes {OVER}, scaled to one MiB "
                ""
                "(as pg_aio_target:read_seconds_per_byte x 2^20, per row). "
                "Independent of how many blocks each "
                "read combines, hence comparable across PostgreSQL 17 and 18 and across "
                "io_method settings.",
                [Q(io_figure("read_seconds_per_byte", scale=MIB), ROW_LEGEND)],
                "s",
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Average read size",
                f"read_bytes / reads {OVER} (as pg_aio_target:read_size_bytes, per row), dashed: "
                "io_combine_limit. 8 KiB means no combining (random access, or PostgreSQL 17); "
                "sequential scans on 18 approach io_combine_limit.",
                [
                    Q(io_figure("read_size_bytes"), ROW_LEGEND),
                    Q(series("pg_settings_io_combine_limit_bytes"), "{{target}} io_combine_limit"),
                ],
                "bytes",
                dashed_refs=("B",),
            ),
            12,
            8,
        ),
        g.place(
            graph(
                "Buffer hit ratio",
                f"hits / (hits + blocks read) {OVER} "
                "(as pg_aio_target:hit_ratio, per row), blocks read = "
                "bytes read / block_size: on 18 one read covers many blocks. Near 100% almost "
                "nothing is read from storage, so io_method and AIO settings cannot matter "
                "much for that row.",
                [Q(io_figure("hit_ratio"), ROW_LEGEND)],
                "percentunit",
                maximum=1,
            ),
            12,
            8,
        ),
    ]

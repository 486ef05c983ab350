"""The overview's throughput row: reads from the rules' read figures, writes and extends as
raw rates per row."""

from __future__ import annotations

from dashboards.figures import NOW, OVER, ROW_LABELS, ROW_LEGEND, io_figure
from dashboards.panels import Grid, Item, Q, graph
from pg_aio_exporter.vocabulary import WRITE_OPERATIONS


def panels(g: Grid) -> list[Item]:
    """Read operations, read bytes, write and extend bytes per second."""
    return [
        g.row("Read and write throughput"),
        g.place(
            graph(
                "Read operations per second",
                f"Read operations per second {OVER} "
                "(as pg_aio_target:read_ops_per_second, per row). After "
                "a 17 -> 18 upgrade this falls for the same bytes read because reads are "
                "combined: read throughput next to it is the like-for-like figure.",
                [Q(io_figure("read_ops_per_second"), ROW_LEGEND)],
                "iops",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Read throughput",
                f"Bytes read from outside shared buffers per second {OVER} "
                ""
                "(as pg_aio_target:read_bytes_per_second, per row). "
                "Compare with the volume's throughput limit "
                "(cloud volumes often cap it).",
                [Q(io_figure("read_bytes_per_second"), ROW_LEGEND)],
                "Bps",
            ),
            8,
            8,
        ),
        g.place(
            graph(
                "Write and extend throughput",
                f"Bytes written and bytes added by relation extension per second {OVER} "
                "(pg_stat_io_write_bytes_total, pg_stat_io_extend_bytes_total). Writes by client "
                "backends mean the background writer and checkpointer do not keep up with "
                "dirty buffers.",
                [
                    Q(
                        f"sum by (target, backend_type, context) "
                        f"({NOW.rate(f'pg_stat_io_{op.bytes}_total', *ROW_LABELS)})",
                        f"{{{{target}}}} {op.name} {{{{backend_type}}}} / {{{{context}}}}",
                    )
                    for op in WRITE_OPERATIONS.values()
                    if op.bytes
                ],
                "Bps",
            ),
            8,
            8,
        ),
    ]

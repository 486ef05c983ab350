"""reads_not_combined: sequential scans on PostgreSQL 18 that read one block at a time, and
which of the settings that shape read combining (the collector's list) explain it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pg_aio_exporter.collectors import settings as aio_settings
from pg_aio_exporter.report import units
from pg_aio_exporter.report.findings.context import Context, Finding
from pg_aio_exporter.vocabulary import BLOCK_BYTES

BULK_READS = ("relation", "bulkread")  # object, context of large sequential scans


def reads_not_combined(ctx: Context) -> Finding | None:
    server, t = ctx.summary.server, ctx.thresholds
    if not server.aio:
        return None
    rows: list[dict[str, Any]] = []
    for key in ctx.summary.reading_rows():
        reads = ctx.summary.reads(key)
        figures = reads.figures
        if key[1:] != BULK_READS or figures is None:
            continue
        if reads.reads_per_second < t.min_read_ops_per_second:
            continue
        if figures.size_bytes <= t.max_uncombined_read_size_bytes:
            rows.append(
                {
                    "backend_type": key[0],
                    "object": key[1],
                    "context": key[2],
                    "read_size_bytes": figures.size_bytes,
                    "reads_per_second": reads.reads_per_second,
                }
            )
    if not rows:
        return None
    settings = server.settings
    shown = ", ".join(
        f"{units.size(r['read_size_bytes'])} per read ({r['backend_type']})" for r in rows
    )
    return Finding(
        "reads_not_combined",
        ctx.severity("reads_not_combined"),
        f"Sequential scans read {shown}: PostgreSQL 18 does not combine blocks here, so the AIO"
        " gain is lost.",
        {"rows": rows, **combining_settings(settings)},
        _why_not_combined(settings),
    )


def combining_settings(settings: Mapping[str, float]) -> dict[str, float | None]:
    """The settings that shape read combining, from the collector's list, as measured."""
    return {s.key: settings.get(s.key) for s in aio_settings.AIO_SETTINGS if s.combining}


def _why_not_combined(settings: Mapping[str, float]) -> str:
    reasons = []
    combine = settings.get("io_combine_limit_bytes")
    if combine is not None and combine <= BLOCK_BYTES:
        reasons.append(
            f"io_combine_limit is {units.size(combine)}: set it back to 128kB (the default,"
            " 16 blocks)"
        )
    concurrency = settings.get("io_max_concurrency")
    if concurrency is not None and concurrency < 16:
        shared = settings.get("shared_buffers_bytes")
        reasons.append(
            f"io_max_concurrency is {units.count(concurrency)}, sized by PostgreSQL from"
            f" shared_buffers ({units.size(shared) if shared else '?'}) and max_connections:"
            " too few reads in flight per backend to combine. Raise shared_buffers, lower"
            " max_connections, or set io_max_concurrency (restart)"
        )
    effective = settings.get("effective_io_concurrency")
    if effective is not None and effective <= 1:
        reasons.append(
            f"effective_io_concurrency is {units.count(effective)}: read-ahead is off; raise it"
            " (16 is the default)"
        )
    if not reasons:
        return "The settings allow combining; check for concurrent scans of the same table."
    return "; ".join(reasons) + "."

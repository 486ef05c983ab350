"""`pg-aio-exporter report`, once the flags are checked (cli.py): measure, judge, write.

Exit codes: 0 when a report was made, whatever it found; 1 when --fail-on names a severity a
finding reaches, or when the server cannot be reached or the role cannot log in.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from pg_aio_exporter import thresholds
from pg_aio_exporter.config.targets import Target
from pg_aio_exporter.report import document, text, units
from pg_aio_exporter.report.outcome import exit_code, judge
from pg_aio_exporter.report.runner import measure
from pg_aio_exporter.report.summary import Summary


class SaveFailed(Exception):
    """--save could not be written; str() is one line."""


@dataclass(frozen=True)
class ReportOptions:
    duration: float
    sample_interval: float
    timeout: float
    output_format: str  # text, json or html
    save: Path | None
    baseline: Summary | None
    fail_on: str | None


def show_progress(left: float, samples: int) -> None:
    sys.stderr.write(f"\rreport: {units.duration(left)} left, {samples} samples taken  ")
    sys.stderr.flush()


def run_report(target: Target, options: ReportOptions) -> int:
    storage = target.storage
    limits = replace(
        thresholds.load(storage.storage_class),
        volume_max_ops=storage.iops,
        volume_max_bytes=storage.bytes_per_second,
    )
    terminal = sys.stderr.isatty()
    try:
        summary = asyncio.run(
            measure(
                target,
                duration=options.duration,
                sample_interval=options.sample_interval,
                timeout=options.timeout,
                progress=show_progress if terminal else None,
            )
        )
    finally:
        if terminal:
            sys.stderr.write("\r" + " " * 60 + "\r")
    report = judge(summary, limits, options.baseline)
    if options.save is not None:
        try:
            options.save.write_text(document.dumps(report, limits))
        except OSError as exc:
            raise SaveFailed(f"cannot write --save {options.save}: {exc.strerror}") from None
    if options.output_format == "json":
        sys.stdout.write(document.dumps(report, limits))
    elif options.output_format == "html":
        from pg_aio_exporter.report import page  # noqa: PLC0415 (the html extra)

        base = options.baseline
        series = None if base is None or base.series is None else dict(base.series)
        sys.stdout.write(page.render_report(document.to_json(report, limits), series))
    else:
        sys.stdout.write(text.render(report, limits))
    return exit_code(report, options.fail_on)

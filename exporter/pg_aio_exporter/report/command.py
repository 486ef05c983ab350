"""`pg-aio-exporter report`, once the flags are checked (cli.py): measure, judge, write.

Exit codes: 0 when a report was made, whatever it found; 1 when --fail-on names a severity a
finding reaches, or when the server cannot be reached or the role cannot log in.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pg_aio_exporter.config.targets import Target
from pg_aio_exporter.poll.errors import UnsupportedServerError, error_kind
from pg_aio_exporter.redact import scrub
from pg_aio_exporter.report import document, text, thresholds, units
from pg_aio_exporter.report.outcome import exit_code, judge
from pg_aio_exporter.report.runner import measure
from pg_aio_exporter.report.summary import Summary

CAUSES = {
    "auth": "login refused",
    "timeout": "no answer in time",
    "unsupported": "server not supported",
}


class Unreachable(Exception):
    """The server could not be reached or the role could not log in; str() is one line."""


class SaveFailed(Exception):
    """--save could not be written; str() is one line."""


@dataclass(frozen=True)
class ReportOptions:
    duration: float
    sample_interval: float
    timeout: float
    output_format: str  # text or json
    save: Path | None
    baseline: Summary | None
    fail_on: str | None


def connect_failure(target: Target, exc: BaseException) -> str:
    message = str(exc).strip().split("\n")[0] or type(exc).__name__
    cause = CAUSES.get(error_kind(exc), "server unreachable")
    safe = scrub(message, dsn=target.conninfo, password=target.password)
    return f"cannot connect to {target.address}: {cause}: {safe}"


def show_progress(left: float, samples: int) -> None:
    sys.stderr.write(f"\rreport: {units.duration(left)} left, {samples} samples taken  ")
    sys.stderr.flush()


def run_report(target: Target, options: ReportOptions) -> int:
    limits = thresholds.load()
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
    except (psycopg.Error, OSError, TimeoutError, UnsupportedServerError) as exc:
        raise Unreachable(connect_failure(target, exc)) from None
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
    else:
        sys.stdout.write(text.render(report, limits))
    return exit_code(report, options.fail_on)

"""Command line: flags -> targets and options, handed to the app (or the demo).

Bad configuration exits 2 with one line on stderr. Runtime faults (server down, wrong password)
never exit: they show up as pg_up 0 and error counters.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pg_aio_exporter import __version__, logs
from pg_aio_exporter.app import Options, run_exporter
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import (
    STORAGE_KEYS,
    Target,
    load_config,
    parse_duration,
    storage_of,
    target_from_dsn,
)
from pg_aio_exporter.config.webconfig import WebConfig, load_web_config
from pg_aio_exporter.web.server import parse_listen_address

# The report and the demo are imported where they run (report_main, compare_main, main's demo
# branch): the daemon never loads them (docs/performance.md, its memory).
if TYPE_CHECKING:
    from pg_aio_exporter.report.command import ReportOptions

PROG = "pg-aio-exporter"
MIN_SAMPLE, MAX_SAMPLE = 0.1, 60.0
_ZERO = re.compile(r"0+(\.0*)?(ms|s|m|h)?")  # --sample-interval 0: no sampling
MAX_TIMEOUT = 600.0  # statement_timeout is an int of milliseconds; no poll needs minutes
FORMATS = ("text", "json", "html")  # report and compare
MIN_REPORT, MAX_REPORT = 10.0, 86400.0  # the report's --duration: enough samples, within a day
DEFAULT_LISTEN = ":9188"  # postgres_exporter owns 9187; the two often run side by side


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def fail(message: str) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def add_common_flags(
    parser: argparse.ArgumentParser, *, poll_default: str, listen_default: str = DEFAULT_LISTEN
) -> None:
    parser.add_argument(
        "--web.listen-address",
        dest="listen",
        default=listen_default,
        help=f"address to serve metrics on (default {listen_default})",
    )
    parser.add_argument(
        "--web.health-listen-address",
        dest="health_listen",
        help="also serve /healthz, and only it, as plain HTTP on this address, for probes"
        " that cannot speak the web config's TLS or auth (default: none)",
    )
    parser.add_argument(
        "--web.config.file",
        dest="web_config",
        help="TLS and basic auth for the endpoints (exporter-toolkit format)",
    )
    parser.add_argument(
        "--web.telemetry-path",
        dest="metrics_path",
        default="/metrics",
        help="path of the metrics endpoint (default /metrics)",
    )
    parser.add_argument(
        "--poll-interval",
        default=poll_default,
        help=f"how often pg_stat_io and settings are read (default {poll_default})",
    )
    parser.add_argument(
        "--sample-interval",
        default="1s",
        help="how often wait events, io workers and pg_aios are sampled, 100ms..60s, or 0 to"
        " turn sampling off (default 1s)",
    )
    parser.add_argument(
        "--timeout",
        default="5s",
        help="connect and statement timeout towards PostgreSQL (default 5s)",
    )
    for name in registry.names():
        parser.add_argument(
            f"--collector.{name}",
            dest=f"collector_{name}",
            action=argparse.BooleanOptionalAction,
            default=True,
            help=f"read the {name} view (--no-collector.{name} turns it off; default on)",
        )
    parser.add_argument(
        "--collector.pg_stat_io.idle_rows",
        dest="idle_io_rows",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="also export pg_stat_io's rows that never counted, the full raw view: about 650"
        " more series per target on 18 (default off)",
    )
    parser.add_argument("--log.level", dest="log_level", choices=logs.LEVELS, default="info")
    parser.add_argument("--log.format", dest="log_format", choices=logs.FORMATS, default="logfmt")


def options_from(args: argparse.Namespace) -> Options:
    try:
        listen = parse_listen_address(args.listen)
        health = None
        if args.health_listen:
            health = parse_listen_address(args.health_listen, flag="--web.health-listen-address")
        poll = parse_duration(args.poll_interval, what="--poll-interval")
        sample = (
            0.0
            if _ZERO.fullmatch(args.sample_interval.strip())
            else parse_duration(args.sample_interval, what="--sample-interval")
        )
        timeout = parse_duration(args.timeout, what="--timeout")
        web = load_web_config(args.web_config) if args.web_config else WebConfig()
    except ConfigError as exc:
        fail(str(exc))
    if timeout > MAX_TIMEOUT:
        fail(f"invalid --timeout {args.timeout!r}: at most 10m")
    if sample and not MIN_SAMPLE <= sample <= MAX_SAMPLE:
        fail(
            f"invalid --sample-interval {args.sample_interval!r}: must be within 100ms..60s,"
            " or 0 (off)"
        )
    if not args.metrics_path.startswith("/") or args.metrics_path in ("/", "/healthz"):
        fail(f"invalid --web.telemetry-path {args.metrics_path!r}")
    enabled = frozenset(name for name in registry.names() if getattr(args, f"collector_{name}"))
    return Options(
        listen,
        args.metrics_path,
        poll,
        sample,
        timeout,
        web,
        enabled,
        idle_io_rows=args.idle_io_rows,
        health_listen=health,
        web_config_file=args.web_config,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Prometheus exporter for PostgreSQL asynchronous I/O (pg_stat_io, AIO"
        " settings). Run '%(prog)s demo' for a self-contained demonstration, '%(prog)s report"
        " --help' for a report without Prometheus.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--dsn",
        help="PostgreSQL DSN (key=value or URI); default:"
        " the DATA_SOURCE_NAME environment variable",
    )
    source.add_argument("--config", help="YAML file with a list of targets")
    parser.add_argument(
        "--target-name",
        help="the `target` label of the --dsn server (default: its host:port/dbname)",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra label on every series of the --dsn server; repeatable",
    )
    add_storage_flags(parser)
    add_common_flags(parser, poll_default="30s")
    return parser


def flag_names() -> list[str]:
    return [f"--{key.replace('_', '-')}" for key in STORAGE_KEYS]


def add_storage_flags(parser: argparse.ArgumentParser) -> None:
    """The --dsn server's storage (a --config file's storage_class, volume_iops and
    volume_bytes_per_second keys)."""
    parser.add_argument(
        "--storage-class",
        metavar="CLASS",
        # Not listed here: PyYAML would load at every start (RSS, docs/performance.md).
        help="what the --dsn server's data sits on, which its reads and WAL syncs are judged by:"
        " a storage class of thresholds.yaml (docs/runbooks.md lists them; default: its"
        " default_storage_class)",
    )
    parser.add_argument(
        "--volume-iops", metavar="N", help="the volume's IOPS limit, when known (gp3: 3000)"
    )
    parser.add_argument(
        "--volume-bytes-per-second",
        metavar="N",
        help="the volume's throughput limit in bytes/s, when known (gp3: 131072000)",
    )


def targets_from(args: argparse.Namespace) -> list[Target]:
    try:
        if args.config:
            given = any(getattr(args, key) is not None for key in STORAGE_KEYS)
            if args.target_name is not None or args.label or given:
                fail(
                    f"--target-name, --label and {', '.join(flag_names())} are for --dsn; a"
                    " --config file names its targets and their storage"
                )
            return load_config(args.config)
        dsn = args.dsn or os.environ.get("DATA_SOURCE_NAME")
        if not dsn:
            fail("give --dsn, --config, or the DATA_SOURCE_NAME environment variable")
        storage = storage_of({k: getattr(args, k) for k in STORAGE_KEYS}, "--dsn")
        return [
            target_from_dsn(
                dsn, name=args.target_name, labels=label_flags(args.label), storage=storage
            )
        ]
    except ConfigError as exc:
        fail(str(exc))


def label_flags(flags: list[str]) -> dict[str, str]:
    """--label NAME=VALUE flags -> labels, checked by the config file's rules later."""
    labels: dict[str, str] = {}
    for flag in flags:
        name, sep, value = flag.partition("=")
        if not sep:
            raise ConfigError(f"invalid --label {flag!r}: use NAME=VALUE")
        if name in labels:
            raise ConfigError(f"invalid --label {flag!r}: {name} given twice")
        labels[name] = value
    return labels


def build_demo_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=f"{PROG} demo",
        description="Run PostgreSQL 18 (or 19) with a read workload and the exporter on it.",
    )
    # The demo's passwords are public: it serves this machine only.
    add_common_flags(parser, poll_default="5s", listen_default="127.0.0.1:9188")
    parser.add_argument(
        "--table-mb",
        type=int,
        default=128,
        help="size of the scanned table (default 128, 8x shared_buffers)",
    )
    parser.add_argument(
        "--io-method",
        choices=("worker", "sync", "io_uring"),
        default="worker",
        help="default worker; io_uring needs PostgreSQL 18 built with liburing, see"
        " scripts/build-postgres-io-uring.py",
    )
    parser.add_argument("--clients", type=int, default=2, help="workload connections")
    parser.add_argument(
        "--postgres",
        choices=("18", "19"),
        default="18",
        help="the server's major version (default 18); 19 is fetched once from Debian's"
        " archive (its experimental suite) into ~/.cache/pg_aio_exporter, which needs apt-get"
        " and patchelf",
    )
    return parser


def build_report_parser() -> argparse.ArgumentParser:
    from pg_aio_exporter.report.outcome import FAIL_ON  # noqa: PLC0415 (see the imports)

    parser = Parser(
        prog=f"{PROG} report",
        description="Watch one server for a while with the exporter's collectors and answer:"
        " did reads get faster or slower, is storage saturated, is the io worker pool big"
        " enough? No Prometheus needed. Exit 0 when a report was made, 1 when --fail-on"
        " matches or the server cannot be reached, 2 on bad input.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--dsn", help="PostgreSQL DSN; default: the DATA_SOURCE_NAME environment variable"
    )
    source.add_argument(
        "--config", metavar="FILE", help="YAML file with a list of targets (with --target)"
    )
    parser.add_argument("--target", metavar="NAME", help="which target of --config to report on")
    # A --dsn target is named as the exporter names it; labels are for series, not reports.
    parser.set_defaults(target_name=None, label=[])
    add_storage_flags(parser)
    parser.add_argument("--duration", default="2m", help="how long to watch, 10s..24h (default 2m)")
    parser.add_argument(
        "--sample-interval",
        default="1s",
        help="how often wait events, io workers and pg_aios are sampled, 100ms..60s (default 1s)",
    )
    parser.add_argument(
        "--timeout", default="5s", help="connect and statement timeout (default 5s)"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        dest="output_format",
        help="text fits 100 columns; json is schema 3 of docs/report.md; html one self-contained"
        " page with charts (the html extra) (default text)",
    )
    parser.add_argument("--save", metavar="FILE", help="also write the report as JSON to FILE")
    parser.add_argument("--baseline", metavar="FILE", help="compare with a report saved by --save")
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        help="exit 1 when a finding of this severity or worse exists (for cron and CI)",
    )
    return parser


def report_target(args: argparse.Namespace) -> Target:
    if args.target and not args.config:
        fail("--target needs --config")
    targets = targets_from(args)
    if not args.config:
        return targets[0]
    names = ", ".join(t.name for t in targets)
    if args.target is None:
        if len(targets) == 1:
            return targets[0]
        fail(f"give --target, one of: {names}")
    chosen = [t for t in targets if t.name == args.target]
    if not chosen:
        fail(f"no target {args.target!r} in {args.config}: one of {names}")
    return chosen[0]


def html_ready(output_format: str) -> None:
    """--format html without the html extra: one line and exit 2, before any measuring."""
    if output_format == "html":
        from pg_aio_exporter.report import page  # noqa: PLC0415 (only for html)

        try:
            page.require()
        except ConfigError as exc:
            fail(str(exc))


def report_options(args: argparse.Namespace) -> ReportOptions:
    from pg_aio_exporter.report.command import ReportOptions  # noqa: PLC0415 (see the imports)
    from pg_aio_exporter.report.reload import load_baseline  # noqa: PLC0415

    html_ready(args.output_format)
    try:
        duration = parse_duration(args.duration, what="--duration")
        sample = parse_duration(args.sample_interval, what="--sample-interval")
        timeout = parse_duration(args.timeout, what="--timeout")
        baseline = load_baseline(args.baseline) if args.baseline else None
    except ConfigError as exc:
        fail(str(exc))
    if not MIN_REPORT <= duration <= MAX_REPORT:
        fail(f"invalid --duration {args.duration!r}: must be within 10s..24h")
    if not MIN_SAMPLE <= sample <= min(MAX_SAMPLE, duration):
        fail(
            f"invalid --sample-interval {args.sample_interval!r}: must be within 100ms..60s"
            " and at most --duration"
        )
    if timeout > MAX_TIMEOUT:
        fail(f"invalid --timeout {args.timeout!r}: at most 10m")
    save = Path(args.save) if args.save else None
    if save is not None and (save.is_dir() or not os.access(save.parent, os.W_OK)):
        fail(f"cannot write --save {args.save}: not a writable file path")
    return ReportOptions(
        duration, sample, timeout, args.output_format, save, baseline, args.fail_on
    )


def report_main(argv: list[str]) -> int:
    from pg_aio_exporter.report.command import SaveFailed, run_report  # noqa: PLC0415
    from pg_aio_exporter.report.runner import Unreachable  # noqa: PLC0415

    args = build_report_parser().parse_args(argv)
    target = report_target(args)
    options = report_options(args)
    try:
        return run_report(target, options)
    except Unreachable as exc:
        print(f"{PROG} report: error: {exc}", file=sys.stderr)
        return 1
    except SaveFailed as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        print(f"{PROG} report: interrupted", file=sys.stderr)
        return 130


def build_compare_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=f"{PROG} compare",
        description="Saved reports (report --save) side by side, workload time first, each"
        " against the first; names the fastest. Exit 0, or 2 on bad input.",
    )
    parser.add_argument("reports", nargs="+", metavar="REPORT.json")
    parser.add_argument("--format", choices=FORMATS, default="text", dest="output_format")
    return parser


def compare_main(argv: list[str]) -> int:
    from pg_aio_exporter import thresholds  # noqa: PLC0415 (see the imports)
    from pg_aio_exporter.report import sidebyside  # noqa: PLC0415 (see the imports)

    args = build_compare_parser().parse_args(argv)
    if len(args.reports) < 2:
        fail("compare needs at least two saved reports")
    html_ready(args.output_format)
    try:
        out = sidebyside.render(args.reports, thresholds.load(), args.output_format)
    except ConfigError as exc:
        fail(str(exc))
    sys.stdout.write(out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        return report_main(argv[1:])
    if argv[:1] == ["compare"]:
        return compare_main(argv[1:])
    demo = argv[:1] == ["demo"]
    args = build_demo_parser().parse_args(argv[1:]) if demo else build_parser().parse_args(argv)
    targets = [] if demo else targets_from(args)
    options = options_from(args)
    logs.setup(args.log_level, args.log_format)
    try:
        if demo:
            from pg_aio_exporter.demo.run import run_demo  # noqa: PLC0415 (the demo extra)

            run_demo(
                options,
                table_mb=args.table_mb,
                io_method=args.io_method,
                clients=args.clients,
                major=args.postgres,
            )
        else:
            # SIGHUP and POST /-/reload read a --config file and the web config again.
            reloadable = replace(options, reloadable=True, config_file=args.config)
            asyncio.run(run_exporter(targets, reloadable))
    except ConfigError as exc:
        fail(str(exc))
    return 0

"""Command line: flags -> targets and options, handed to the app (or the demo).

Bad configuration exits 2 with one line on stderr. Runtime faults (server down, wrong password)
never exit: they show up as pg_up 0 and error counters.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from pg_aio_exporter import __version__, logs
from pg_aio_exporter.app import Options, run_exporter
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import Target, load_config, parse_duration, target_from_dsn
from pg_aio_exporter.config.webconfig import WebConfig, load_web_config
from pg_aio_exporter.web.server import parse_listen_address

PROG = "pg-aio-exporter"
MIN_SAMPLE, MAX_SAMPLE = 0.1, 60.0
MAX_TIMEOUT = 600.0  # statement_timeout is an int of milliseconds; no poll needs minutes
DEFAULT_LISTEN = ":9188"  # postgres_exporter owns 9187; the two often run side by side


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def fail(message: str) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def add_common_flags(parser: argparse.ArgumentParser, *, poll_default: str) -> None:
    parser.add_argument(
        "--web.listen-address",
        dest="listen",
        default=DEFAULT_LISTEN,
        help=f"address to serve metrics on (default {DEFAULT_LISTEN})",
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
        help="how often wait events, io workers and pg_aios are sampled, 100ms..60s (default 1s)",
    )
    parser.add_argument(
        "--timeout",
        default="5s",
        help="connect and statement timeout towards PostgreSQL (default 5s)",
    )
    parser.add_argument("--log.level", dest="log_level", choices=logs.LEVELS, default="info")
    parser.add_argument("--log.format", dest="log_format", choices=logs.FORMATS, default="logfmt")


def options_from(args: argparse.Namespace) -> Options:
    try:
        listen = parse_listen_address(args.listen)
        poll = parse_duration(args.poll_interval, what="--poll-interval")
        sample = parse_duration(args.sample_interval, what="--sample-interval")
        timeout = parse_duration(args.timeout, what="--timeout")
        web = load_web_config(args.web_config) if args.web_config else WebConfig()
    except ConfigError as exc:
        fail(str(exc))
    if timeout > MAX_TIMEOUT:
        fail(f"invalid --timeout {args.timeout!r}: at most 10m")
    if not MIN_SAMPLE <= sample <= MAX_SAMPLE:
        fail(f"invalid --sample-interval {args.sample_interval!r}: must be within 100ms..60s")
    if not args.metrics_path.startswith("/") or args.metrics_path in ("/", "/healthz"):
        fail(f"invalid --web.telemetry-path {args.metrics_path!r}")
    return Options(listen, args.metrics_path, poll, sample, timeout, web)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Prometheus exporter for PostgreSQL asynchronous I/O (pg_stat_io, AIO"
        " settings). Run '%(prog)s demo' for a self-contained demonstration.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--dsn",
        help="PostgreSQL DSN (key=value or URI); default:"
        " the DATA_SOURCE_NAME environment variable",
    )
    source.add_argument("--config", help="YAML file with a list of targets")
    add_common_flags(parser, poll_default="30s")
    return parser


def targets_from(args: argparse.Namespace) -> list[Target]:
    try:
        if args.config:
            return load_config(args.config)
        dsn = args.dsn or os.environ.get("DATA_SOURCE_NAME")
        if not dsn:
            fail("give --dsn, --config, or the DATA_SOURCE_NAME environment variable")
        return [target_from_dsn(dsn)]
    except ConfigError as exc:
        fail(str(exc))


def build_demo_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=f"{PROG} demo",
        description="Run PostgreSQL 18 with a read workload and the exporter on it.",
    )
    add_common_flags(parser, poll_default="5s")
    parser.set_defaults(listen="127.0.0.1:9188")
    parser.add_argument(
        "--table-mb",
        type=int,
        default=128,
        help="size of the scanned table (default 128, 8x shared_buffers)",
    )
    parser.add_argument("--io-method", choices=("worker", "sync"), default="worker")
    parser.add_argument("--clients", type=int, default=2, help="workload connections")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    demo = argv[:1] == ["demo"]
    args = build_demo_parser().parse_args(argv[1:]) if demo else build_parser().parse_args(argv)
    targets = [] if demo else targets_from(args)
    options = options_from(args)
    logs.setup(args.log_level, args.log_format)
    try:
        if demo:
            from pg_aio_exporter.demo.run import run_demo  # noqa: PLC0415 (the demo extra)

            run_demo(
                options, table_mb=args.table_mb, io_method=args.io_method, clients=args.clients
            )
        else:
            asyncio.run(run_exporter(targets, options))
    except ConfigError as exc:
        fail(str(exc))
    return 0

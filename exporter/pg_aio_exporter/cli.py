"""Command line: flags -> targets -> workers + HTTP server, until SIGINT/SIGTERM.

Bad configuration exits 2 with one line on stderr. Runtime faults (server down, wrong password)
never exit: they show up as pg_up 0 and error counters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from pg_aio_exporter import __version__, logs
from pg_aio_exporter.config import (
    ConfigError,
    Target,
    load_config,
    parse_duration,
    target_from_dsn,
)
from pg_aio_exporter.exposition import Exposition
from pg_aio_exporter.selfmetrics import SelfMetrics
from pg_aio_exporter.web import parse_listen_address, serve
from pg_aio_exporter.webconfig import WebConfig, load_web_config
from pg_aio_exporter.worker import TargetWorker

PROG = "pg-aio-exporter"
MIN_SAMPLE, MAX_SAMPLE = 0.1, 60.0
MAX_TIMEOUT = 600.0  # statement_timeout is an int of milliseconds; no poll needs minutes
DEFAULT_LISTEN = ":9188"  # postgres_exporter owns 9187; the two often run side by side
log = logging.getLogger("pg_aio_exporter")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def fail(message: str) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


@dataclass(frozen=True)
class Options:
    listen: tuple[str, int]
    metrics_path: str
    poll_interval: float
    sample_interval: float
    timeout: float
    web: WebConfig


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
    parser = _Parser(
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


async def run_exporter(targets: Sequence[Target], options: Options) -> None:
    """Serve until cancelled or signalled."""
    selfmetrics = SelfMetrics()
    exposition = Exposition(selfmetrics)
    host, port = options.listen
    try:
        server = serve((host, port), exposition, targets, options.metrics_path, options.web)
    except (OSError, socket.gaierror) as exc:
        fail(f"cannot listen on {host or '*'}:{port}: {exc.strerror or exc}")
    log.info(
        "listening",
        extra={"address": f"{host or '*'}:{port}", "targets": len(targets), "version": __version__},
    )
    workers = [
        TargetWorker(
            t,
            exposition,
            selfmetrics,
            poll_interval=options.poll_interval,
            sample_interval=options.sample_interval,
            timeout=options.timeout,
        )
        for t in targets
    ]
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tasks = [asyncio.create_task(w.run(), name=w.target.name) for w in workers]
    tasks.append(asyncio.create_task(exposition.run(), name="render"))
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        server.shutdown()
        server.server_close()
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        from pg_aio_exporter.demo.run import main as demo_main  # noqa: PLC0415

        return demo_main(argv[1:])
    args = build_parser().parse_args(argv)
    targets = targets_from(args)
    options = options_from(args)
    logs.setup(args.log_level, args.log_format)
    asyncio.run(run_exporter(targets, options))
    return 0

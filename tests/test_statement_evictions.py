"""pg_stat_statements evicts statements when more distinct ones run than
pg_stat_statements.max, and their counts leave the extension's sums: on a real PostgreSQL 18
with pg_stat_statements.max = 100 and 500 distinct statements, the extension's own sums go
back, the exported totals never do, and the evictions are exported as counted by the
extension (pg_stat_statements_info.dealloc)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from harness import Samples, labels, parse
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.worker import TargetWorker

MAX = 100  # the least pg_stat_statements.max allows
HEAVY = 50  # distinct statements of ROWS rows each, run first
ROWS = 1000
LIGHT = 450  # distinct statements of one row each, run after, in batches of BATCH
BATCH = 50
DEFAULT = labels(target="default")


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    server = LocalServer.create(
        settings={
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.max": str(MAX),
            "shared_buffers": "16MB",
        }
    )
    server.start()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    yield server
    server.destroy()


def heavy(k: int) -> str:
    """A statement of its own (k + 1 output columns: another query id) returning ROWS rows."""
    return f"SELECT g{', g' * k} FROM generate_series(1, {ROWS}) g"


def light(k: int) -> str:
    return f"SELECT 1{', 1' * k}"


def sums(conn: psycopg.Connection[tuple[float, float, float]]) -> tuple[float, float, float]:
    """The extension's own sums of calls and rows over top-level statements, and its dealloc."""
    row = conn.execute(
        "SELECT sum(calls)::float8, sum(rows)::float8,"
        " (SELECT dealloc FROM pg_stat_statements_info)::float8"
        " FROM pg_stat_statements WHERE toplevel"
    ).fetchone()
    assert row is not None
    return row


def test_evictions_never_take_the_totals_back(server: LocalServer) -> None:
    polls: list[Samples] = []
    raw: list[tuple[float, float, float]] = []

    async def run() -> None:
        selfmetrics = SelfMetrics()
        exposition = Exposition(selfmetrics)
        worker = TargetWorker(
            target_from_dsn(server.dsn(), name="default"),
            exposition,
            selfmetrics,
            poll_interval=30,
            sample_interval=0,
            timeout=5,
            collectors={"pg_stat_statements"},
        )

        async def poll() -> None:
            assert await worker.poll()
            exposition.render()
            chunks: list[bytes] = []
            exposition.body.write(chunks.append)
            polls.append(parse(b"".join(chunks).decode()))
            raw.append(sums(observer))

        batches = [[heavy(k) for k in range(HEAVY)]] + [
            [light(k) for k in range(start, start + BATCH)] for start in range(0, LIGHT, BATCH)
        ]
        with (
            psycopg.connect(server.dsn(), autocommit=True) as observer,
            psycopg.connect(server.dsn(), autocommit=True) as client,
        ):
            try:
                await poll()
                for batch in batches:
                    for sql in batch:
                        client.execute(sql)
                    await poll()
            finally:
                await worker._disconnect()

    asyncio.run(run())

    def exported(name: str) -> list[float]:
        return [samples[f"pg_aio_statements_{name}_total"][DEFAULT] for samples in polls]

    raw_rows = [rows for _, rows, _ in raw]
    # What the test makes happen: the heavy statements' rows were in the sums after their
    # batch, and evictions took them out again.
    assert raw_rows[1] >= HEAVY * ROWS
    assert raw_rows[-1] < HEAVY * ROWS / 2, "the heavy statements were evicted"
    assert raw[-1][2] > 0, "pg_stat_statements_info counted evictions"
    # The exported totals never went back, and still hold the evicted statements' counts.
    for name in ("calls", "rows", "exec_seconds", "shared_blocks_hit"):
        series = exported(name)
        assert series == sorted(series), f"{name} went back: {series}"
    rows = exported("rows")
    assert rows[-1] >= HEAVY * ROWS + LIGHT, "every batch was polled before it was evicted"
    calls = exported("calls")
    assert calls[-1] - calls[0] >= HEAVY + LIGHT
    # The evictions, as the extension counted them by the time of each poll.
    dealloc = [samples["pg_aio_statements_deallocations_total"][DEFAULT] for samples in polls]
    assert dealloc == sorted(dealloc) and dealloc[-1] > 0
    for (*_, after), counted in zip(raw, dealloc, strict=True):
        assert counted <= after
    assert polls[-1]["pg_aio_statements_entries"][DEFAULT] <= MAX

"""The report's own transactions, left out of DB time per transaction, are counted exactly: with
pg_stat_database.own_flush closing every round trip of the worker (a poll or a sample, one
transaction each), each is in pg_stat_database when the round trip returns. Without it, on 18,
samples that read no relation stayed unflushed until a later round trip did (20 round trips
counted as 1).

A server of its own with autovacuum off: its workers' transactions would count too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

import pgbins
from pg_aio_exporter.collectors.pg_stat_database import own_flush
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.worker import TargetWorker

SAMPLES = 20


@pytest.fixture(scope="module")
def quiet() -> Iterator[LocalServer]:
    server = LocalServer.create(pgbins.bin_dir("18"), settings={"autovacuum": "off"})
    server.start()
    yield server
    server.destroy()


def transactions(reader: psycopg.Connection[tuple[float]]) -> float:
    """The postgres database's transactions, read from another database (template1), so that
    the reading counts elsewhere."""
    reader.execute("SELECT pg_stat_clear_snapshot()")
    row = reader.execute(
        "SELECT (xact_commit + xact_rollback)::float8 FROM pg_stat_database"
        " WHERE datname = 'postgres'"
    ).fetchone()
    assert row is not None
    return row[0]


def test_every_round_trip_is_counted_when_it_returns(quiet: LocalServer) -> None:
    worker = TargetWorker(
        target_from_dsn(quiet.dsn()),
        None,
        SelfMetrics(),
        poll_interval=30,
        sample_interval=0.1,
        timeout=5,
        closing_statement=own_flush,
    )
    with psycopg.connect(quiet.dsn(dbname="template1"), autocommit=True) as reader:

        async def round_trips() -> list[float]:
            try:
                assert await worker.poll()
                seen = [transactions(reader)]
                for _ in range(SAMPLES):
                    assert await worker.sample()
                    seen.append(transactions(reader))
                assert await worker.poll()
                seen.append(transactions(reader))
                return seen
            finally:
                await worker._disconnect()

        seen = asyncio.run(round_trips())
    assert [after - seen[0] for after in seen] == list(range(SAMPLES + 2))

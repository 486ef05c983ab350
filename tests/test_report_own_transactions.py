"""The report's own transactions, left out of DB time per transaction, are counted exactly: with
pg_stat_database.own_flush closing every round trip of the worker (a poll or a sample, one
transaction each, more when it was rerun statement by statement), each is in pg_stat_database
when the round trip returns. Without it, on 18, samples that read no relation stayed unflushed
until a later round trip did (20 round trips counted as 1).

A server of its own with autovacuum off: its workers' transactions would count too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

import pgbins
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.pg_stat_database import own_flush
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.worker import TargetWorker
from pg_aio_exporter.report.runner import Recorder
from pg_aio_exporter.versions import PG15

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


WORKLOAD = 3  # the workload's transactions between two samples


def test_a_round_trip_rerun_statement_by_statement_counts_its_every_transaction(
    quiet: LocalServer,
) -> None:
    """A role denied pg_aios (issue 49 item 8a): every sample's pipeline fails on it and is
    rerun statement by statement, a transaction each. The report's window counts the
    transactions its round trips took, not one per round trip, so the workload's are what
    another session made, exactly (the issue saw about 3 phantom transactions per sample)."""
    recorder = Recorder()
    worker = TargetWorker(
        target_from_dsn(quiet.dsn(user="unprivileged")),
        None,
        SelfMetrics(),
        poll_interval=30,
        sample_interval=0.1,
        timeout=5,
        tap=recorder,
        poll_collectors=registry.report_collectors(),
        closing_statement=own_flush,
    )
    flush = own_flush(PG15)
    assert flush is not None
    # prepare_threshold: psycopg's own prepare of a statement run 5 times is a transaction.
    with psycopg.connect(quiet.dsn(), autocommit=True, prepare_threshold=None) as workload:
        workload.execute("CREATE ROLE unprivileged LOGIN")  # not pg_read_all_stats: no pg_aios
        # Counted before the window, with the connection's start (another connection's would
        # be counted at its exit, whenever that is).
        workload.execute(flush)

        async def window() -> int:
            made = 0
            try:
                assert await worker.poll()
                assert await worker.poll()
                recorder.start()
                assert await worker.poll()
                for _ in range(SAMPLES):
                    assert await worker.sample()
                    for _ in range(WORKLOAD - 1):
                        workload.execute("SELECT 1")
                    workload.execute(flush)  # in pg_stat_database before the next read
                    made += WORKLOAD
                assert await worker.poll()
                return made
            finally:
                await worker._disconnect()

        made = asyncio.run(window())
    assert "permission denied" in recorder.failures["pg_aios"][1], recorder.failures
    assert recorder.statements.workload(None).transactions == made

"""The exporter on a server without pg_stat_statements (the session's pg18 does not preload
it): one log line, no poll error, every other collector polled, pg_stat_database exported."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest
from psycopg.rows import tuple_row

from harness import parse
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.session import run_pipelined
from pg_aio_exporter.poll.worker import TargetWorker


def test_absent_pg_stat_statements_is_one_line_and_no_error(
    pg18: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    selfmetrics = SelfMetrics()

    async def three_polls() -> tuple[list[bool], str]:
        exposition = Exposition(selfmetrics)
        worker = TargetWorker(
            target_from_dsn(pg18.dsn(), name="default"),
            exposition,
            selfmetrics,
            poll_interval=30,
            sample_interval=0,
            timeout=5,
        )
        try:
            reached = [await worker.poll() for _ in range(3)]
        finally:
            await worker._disconnect()
        exposition.render()
        chunks: list[bytes] = []
        exposition.body.write(chunks.append)
        return reached, b"".join(chunks).decode()

    with caplog.at_level(logging.INFO, logger="pg_aio_exporter"):
        reached, body = asyncio.run(three_polls())
    assert reached == [True, True, True]
    # An optional extension left out is no fault: info. Nor may psycopg warn of the aborted
    # pipeline (it wrote "error ignored terminating" on the report's stderr).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    lines = [r.getMessage() for r in caplog.records if "pg_stat_statements" in r.getMessage()]
    # Not created in the database (nor preloaded): one line for three polls.
    assert lines == [
        "pg_stat_statements not read: extension not installed in this database"
        " (CREATE EXTENSION pg_stat_statements)"
    ]
    series = parse(body)
    assert not [name for name in series if name.startswith("pg_aio_statements_")]
    assert series["pg_stat_database_xact_commit_total"]
    assert series["pg_stat_io_reads_total"]
    errors = parse(b"".join(selfmetrics.render()).decode())["pg_aio_exporter_poll_errors_total"]
    assert sum(errors.values()) == 0
    success = parse(b"".join(selfmetrics.render()).decode())[
        "pg_aio_exporter_last_poll_success_timestamp_seconds"
    ]
    (stamp,) = success.values()
    assert stamp > 0, "every collector that exists succeeded"


def test_a_failed_statement_in_the_pipeline_is_no_warning(
    pg18: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The failing statement first and many after it, so that its error arrives while the
    later ones are still being sent (the report's stderr showed psycopg's "error ignored
    terminating ... pipeline aborted" when it did): each statement's own result, no warning."""

    async def run() -> list[list[Any] | Exception]:
        conn = await psycopg.AsyncConnection.connect(pg18.dsn(), autocommit=True)
        try:
            statements = ["SELECT * FROM no_such_view"] + ["SELECT 1"] * 200
            return (await run_pipelined(conn, [(sql, tuple_row) for sql in statements])).results
        finally:
            await conn.close()

    with caplog.at_level(logging.INFO):
        results = asyncio.run(run())
    assert isinstance(results[0], psycopg.errors.UndefinedTable)
    assert results[1:] == [[(1,)]] * 200
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

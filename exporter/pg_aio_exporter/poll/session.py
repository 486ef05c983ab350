"""The psycopg mechanics of one target's session: bounded waits, one-round-trip batches whose
statements each read their rows in their own shape, statements prepared once per connection."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import AsyncRowFactory, TupleRow

# Rows come in the shape each statement asks for (its row factory), none by default.
Connection = psycopg.AsyncConnection[TupleRow]
# What to send, and what each row of its answer is read into (psycopg.rows.class_row of a
# collector's row type).
Statement = tuple[str, AsyncRowFactory[Any]]
# Slack on top of the server-side timeouts, for a server that never answers at all.
CLIENT_TIMEOUT_SLACK = 1.0
# psycopg (3.3, AsyncConnection.wait) answers a cancelled statement by sending the server a
# cancel request and waiting up to 5 s for it, then up to 5 s for the statement to end, which
# stretches a wait behind a black hole well past --timeout + 1 (docs/reliability.md). A second
# cancellation makes it drop the connection at once. The server-side cancel is useless by then:
# the client timeout is longer than statement_timeout, so it only expires when the server or
# network is unresponsive.
CANCEL_GRACE = 0.25


@contextlib.asynccontextmanager
async def client_timeout(seconds: float) -> AsyncIterator[None]:
    """asyncio.timeout(seconds) that psycopg's query cancellation cannot stretch."""
    task = asyncio.current_task()
    assert task is not None
    forced = False

    def force() -> None:
        nonlocal forced
        forced = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(seconds + CANCEL_GRACE, force)
    try:
        async with asyncio.timeout(seconds):
            yield
    except asyncio.CancelledError:
        if not forced:
            raise  # cancelled from outside (shutdown): not ours to swallow
        task.uncancel()  # asyncio.timeout took back the first cancellation, this is the second
        raise TimeoutError from None
    finally:
        handle.cancel()


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """What run_pipelined got back: each statement's result in order, and how many transactions
    the server counted for it (pg_stat_database's xact_commit + xact_rollback): the pipeline
    is one (it rolls back when a statement fails), and each statement rerun singly after that
    one more. The report leaves its own out of the workload's (issue 49: a role denied pg_aios
    made every sample 4 transactions, not 1)."""

    results: list[list[Any] | Exception]
    transactions: int


async def run_pipelined(conn: Connection, statements: Sequence[Statement]) -> RoundTrip:
    """All statements in one round trip, each answer's rows read by its own row factory; if one
    fails, rerun them singly to know which. A statement's result is its rows, or its failure:
    a psycopg.Error from the server, or any other exception its row factory raised."""
    try:
        async with conn.pipeline():
            cursors = []
            for query, rows in statements:
                try:
                    cursors.append(await conn.cursor(row_factory=rows).execute(query))
                except psycopg.Error:
                    # Leave the block without an exception: psycopg logs "error ignored
                    # terminating" (a warning on stderr) when the pipeline's end fails too
                    # while one propagates. The end raises the pipeline's error itself.
                    break
        if len(cursors) == len(statements):
            return RoundTrip([await _rows(cur) for cur in cursors], 1)
    except psycopg.Error:
        if conn.closed or conn.broken:
            raise
    results: list[list[Any] | Exception] = []
    for query, rows in statements:
        try:
            results.append(await _rows(await conn.cursor(row_factory=rows).execute(query)))
        except psycopg.Error as exc:
            if conn.closed or conn.broken:
                raise
            results.append(exc)
    return RoundTrip(results, 1 + len(statements))


async def _rows(cursor: psycopg.AsyncCursor[Any]) -> list[Any] | Exception:
    """The cursor's rows, or why its row factory could not read them (a row type that does not
    fit its statement's columns: a bug of the one collector, not of the round trip)."""
    try:
        return await cursor.fetchall()
    except psycopg.Error:
        raise
    except Exception as exc:
        return exc


async def prepare(conn: Connection, queries: Sequence[str]) -> dict[str, str]:
    """Prepare each statement once per connection, so that samples skip parsing and planning
    (docs/performance.md): without parameters, PostgreSQL plans a prepared
    statement once and reuses the plan. One round trip each, at connect only; a statement the
    server refuses to prepare is sent as plain SQL instead."""
    statements = {}
    for number, sql in enumerate(queries):
        name = f"pg_aio_exporter_{number}"
        try:
            await conn.execute(f"PREPARE {name} AS {sql}")
            statements[sql] = f"EXECUTE {name}"
        except psycopg.DatabaseError:
            if conn.broken:
                raise
            statements[sql] = sql
    return statements

"""pg_stat_statements evicts statements when more distinct ones run than
pg_stat_statements.max, and their counts leave the extension's sums: on a real PostgreSQL 18
with pg_stat_statements.max = 100 and 500 distinct statements, the extension's own sums go
back, the exported totals never do, and the evictions are exported as counted by the
extension (pg_stat_statements_info.dealloc). And the exported totals are counters across
exporter restarts: each new exporter starts them at 0, so a restart reads as a reset and not
as the statements' whole history done at once."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

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


class Watch:
    """An exporter's worker for the server with only the pg_stat_statements collector, polled
    when the test says (no schedule): a new Watch is a restarted exporter."""

    def __init__(self, server: LocalServer) -> None:
        selfmetrics = SelfMetrics()
        self.exposition = Exposition(selfmetrics)
        self.worker = TargetWorker(
            target_from_dsn(server.dsn(), name="default"),
            self.exposition,
            selfmetrics,
            poll_interval=30,
            sample_interval=0,
            timeout=5,
            collectors={"pg_stat_statements"},
        )

    async def poll(self) -> Samples:
        assert await self.worker.poll()
        self.exposition.render()
        chunks: list[bytes] = []
        self.exposition.body.write(chunks.append)
        return parse(b"".join(chunks).decode())

    async def stop(self) -> None:
        await self.worker._disconnect()


def test_evictions_never_take_the_totals_back(server: LocalServer) -> None:
    polls: list[Samples] = []
    raw: list[tuple[float, float, float]] = []

    async def run() -> None:
        watch = Watch(server)

        async def poll() -> None:
            polls.append(await watch.poll())
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
                await watch.stop()

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
    assert rows[-1] - rows[0] >= HEAVY * ROWS + LIGHT, "every batch was polled before eviction"
    calls = exported("calls")
    assert calls[-1] - calls[0] >= HEAVY + LIGHT
    # The evictions, as the extension counted them by the time of each poll.
    dealloc = [samples["pg_aio_statements_deallocations_total"][DEFAULT] for samples in polls]
    assert dealloc == sorted(dealloc) and dealloc[-1] > 0
    for (*_, after), counted in zip(raw, dealloc, strict=True):
        assert counted <= after
    assert polls[-1]["pg_aio_statements_entries"][DEFAULT] <= MAX


ONE = "SELECT count(*) FROM generate_series(1, 10)"  # the statement called thousands of times
HISTORY = 3000  # its calls before any exporter watched
ROUNDS = 3  # per exporter run: CALLS of ONE and BATCH new distinct statements, then a poll
CALLS = 1000


def increase(values: Sequence[float]) -> float:
    """What Prometheus' increase() counts over these samples, without its extrapolation: a
    value below the one before is a counter reset, the new value counted whole."""
    return sum(b - a if b >= a else b for a, b in itertools.pairwise(values))


def test_exporter_restarts_read_as_resets_from_zero(server: LocalServer) -> None:
    """Thousands of calls of one statement, then hundreds of distinct statements (evictions)
    while three exporters run one after the other: each starts its totals at about 0, and
    the increase of calls over any window of polls, restarts included, is at most 10% above
    the calls this test made in it (the exporter's own few statements are counted too)."""
    exported: list[float] = []  # calls_total at each poll of every run, in order
    made: list[int] = []  # the test's calls by the time of each poll
    firsts: list[int] = []  # the index of each run's first poll
    calls = 0
    distinct = 0

    def call(sql: str, client: psycopg.Connection[Any]) -> None:
        nonlocal calls
        client.execute(sql)
        calls += 1

    async def run() -> None:
        nonlocal distinct
        with psycopg.connect(server.dsn(), autocommit=True) as client:
            for _ in range(HISTORY):
                call(ONE, client)
            for _ in range(2 * MAX):
                call(light(LIGHT + distinct), client)  # beyond the other test's statements
                distinct += 1
            for _ in range(3):
                watch = Watch(server)
                firsts.append(len(exported))
                try:
                    for round in range(ROUNDS + 1):
                        if round:
                            for _ in range(CALLS):
                                call(ONE, client)
                            for _ in range(BATCH):
                                call(light(LIGHT + distinct), client)
                                distinct += 1
                        samples = await watch.poll()
                        exported.append(samples["pg_aio_statements_calls_total"][DEFAULT])
                        made.append(calls)
                finally:
                    await watch.stop()

    asyncio.run(run())

    firsts_exported = [exported[i] for i in firsts]
    assert all(value < 10 for value in firsts_exported), (
        f"each run starts at about 0: {firsts_exported} after {HISTORY} calls of history"
    )
    for start in range(len(exported)):
        for end in range(start + 1, len(exported)):
            grew = increase(exported[start : end + 1])
            done = made[end] - made[start]
            assert grew <= 1.1 * done, (
                f"polls {start}..{end}: increase {grew} for {done} calls made: {exported}"
            )
    # And they count: every call of ONE made while an exporter watched is in them (ONE, the
    # most used, is never evicted).
    for first in firsts:
        last = first + ROUNDS
        assert increase(exported[first : last + 1]) >= ROUNDS * CALLS, exported

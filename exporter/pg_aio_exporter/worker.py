"""One target: a persistent connection, the poll loop, and publishing results.

Everything for a target runs on one connection, one statement at a time, so the exporter is
a single backend on the server and its queries can never overlap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import psycopg
from psycopg.rows import dict_row

from pg_aio_exporter.collectors import PollCollector, Row
from pg_aio_exporter.collectors.pg_stat_io import PgStatIoCollector
from pg_aio_exporter.collectors.server import ServerCollector
from pg_aio_exporter.collectors.settings import SettingsCollector
from pg_aio_exporter.config import Target
from pg_aio_exporter.exposition import Exposition
from pg_aio_exporter.metricset import MetricSet
from pg_aio_exporter.redact import scrub
from pg_aio_exporter.selfmetrics import SelfMetrics

log = logging.getLogger("pg_aio_exporter")

Connection = psycopg.AsyncConnection[Row]
# Slack on top of the server-side timeouts, for a server that never answers at all.
CLIENT_TIMEOUT_SLACK = 1.0
MAX_BACKOFF = 30.0


_KINDS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((TimeoutError, psycopg.errors.QueryCanceled), "timeout"),
    ((psycopg.errors.InsufficientPrivilege,), "privilege"),
    ((psycopg.errors.InvalidPassword, psycopg.errors.InvalidAuthorizationSpecification), "auth"),
)
# libpq reports connection failures as text only, without a SQLSTATE.
_CONNECT_MESSAGES = (
    ("authentication failed", "auth"),
    ("no password supplied", "auth"),
    ("timeout expired", "timeout"),
)


def error_kind(exc: BaseException) -> str:
    """A low-cardinality label for what went wrong."""
    for types, kind in _KINDS:
        if isinstance(exc, types):
            return kind
    if isinstance(exc, psycopg.OperationalError):
        text = str(exc)
        return next((kind for needle, kind in _CONNECT_MESSAGES if needle in text), "connection")
    return "query"


def next_tick(deadline: float, interval: float, now: float) -> tuple[float, int]:
    """The next deadline after `now` on the grid deadline + k*interval, and how many were missed."""
    following = deadline + interval
    missed = 0
    if following <= now:
        missed = int((now - following) // interval) + 1
        following += missed * interval
    return following, missed


async def run_pipelined(conn: Connection, queries: Sequence[str]) -> list[list[Row] | Exception]:
    """All queries in one round trip; if one fails, rerun them singly to know which."""
    try:
        async with conn.pipeline():
            cursors = [await conn.execute(q) for q in queries]
        return [await cur.fetchall() for cur in cursors]
    except psycopg.Error:
        if conn.closed or conn.broken:
            raise
    results: list[list[Row] | Exception] = []
    for query in queries:
        try:
            results.append(await (await conn.execute(query)).fetchall())
        except psycopg.Error as exc:
            if conn.closed or conn.broken:
                raise
            results.append(exc)
    return results


class TargetWorker:
    def __init__(
        self,
        target: Target,
        exposition: Exposition,
        selfmetrics: SelfMetrics,
        *,
        poll_interval: float,
        timeout: float,
    ) -> None:
        self.target = target
        self._exposition = exposition
        self._self = selfmetrics
        self._poll_interval = poll_interval
        self._timeout = timeout
        self._base_labels = {"target": target.name, **target.labels}
        self._collectors: list[PollCollector] = [
            PgStatIoCollector(),
            SettingsCollector(),
            ServerCollector(),
        ]
        self._conn: Connection | None = None
        self._failures = 0  # consecutive; the first of a streak is logged, the rest are not
        self._unsupported_logged: set[str] = set()

    def _log_fields(self, **extra: object) -> dict[str, object]:
        return {"target": self.target.name, "address": self.target.address, **extra}

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_poll = loop.time()
        try:
            while True:
                await self.poll()
                next_poll, _ = next_tick(next_poll, self._poll_interval, loop.time())
                await asyncio.sleep(next_poll - loop.time())
        finally:
            await self._disconnect()

    async def _connect(self) -> Connection:
        if self._conn is not None:
            return self._conn
        async with asyncio.timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
            conn = await psycopg.AsyncConnection.connect(
                self.target.conninfo, autocommit=True, row_factory=dict_row
            )
            try:
                # Our statements must never hold a lock wait or a slow plan past the timeout.
                await conn.execute(
                    f"SET statement_timeout = {int(self._timeout * 1000)}; SET lock_timeout = 1000"
                )
            except BaseException:
                await conn.close()
                raise
        self._conn = conn
        log.info("connected", extra=self._log_fields(server_version=conn.info.server_version))
        return conn

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _record_failure(self, collector: str, exc: BaseException) -> None:
        kind = error_kind(exc)
        self._self.poll_errors.labels(self.target.name, collector, kind).inc()
        self._failures += 1
        message = scrub(
            str(exc).strip().split("\n")[0] or type(exc).__name__,
            dsn=self.target.conninfo,
            password=self.target.password,
        )
        level = logging.ERROR if self._failures == 1 else logging.DEBUG
        log.log(
            level,
            "poll failed",
            extra=self._log_fields(
                collector=collector, kind=kind, err=message, streak=self._failures
            ),
        )

    async def poll(self) -> None:
        """Read every collector's view in one round trip and publish the result."""
        out = MetricSet(self._base_labels)
        started = time.perf_counter()
        try:
            conn = await self._connect()
            version = conn.info.server_version
            planned = [(c, c.query(version)) for c in self._collectors]
            for collector, sql in planned:
                if sql is None and collector.name not in self._unsupported_logged:
                    self._unsupported_logged.add(collector.name)
                    log.warning(
                        f"{collector.name} is not available on this server version",
                        extra=self._log_fields(server_version=version),
                    )
            runnable = [(c, sql) for c, sql in planned if sql is not None]
            async with asyncio.timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
                results = await run_pipelined(conn, [sql for _, sql in runnable])
        except (psycopg.Error, TimeoutError, OSError) as exc:
            # Unreachable, refused, timed out or dropped: start over on the next poll.
            await self._disconnect()
            self._record_failure("connection", exc)
            out.gauge("pg_up", "1 if the last poll reached the server.", 0.0)
            self._exposition.publish(self.target.name, "poll", out.families())
            return
        round_trip = time.perf_counter()
        all_ok = True
        for (collector, _), result in zip(runnable, results, strict=True):
            if isinstance(result, Exception):
                all_ok = False
                self._record_failure(collector.name, result)
                continue
            collected = time.perf_counter()
            collector.collect(result, out)
            own = time.perf_counter() - collected
            self._self.poll_duration.labels(self.target.name, collector.name).observe(
                round_trip - started + own
            )
        out.gauge("pg_up", "1 if the last poll reached the server.", 1.0)
        if all_ok:
            if self._failures:
                log.info("poll recovered", extra=self._log_fields(after_failures=self._failures))
            self._failures = 0
            self._self.last_poll_success.labels(self.target.name).set(time.time())
        self._exposition.publish(self.target.name, "poll", out.families())

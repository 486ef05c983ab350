"""One target: a persistent connection, the poll and sample schedule, and publishing results.

Everything for a target runs on one connection, one statement at a time, so the exporter is
a single backend on the server and its queries can never overlap: a sample that is due while
the previous sample (or a poll) still runs is skipped and counted as an overrun.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import psycopg
from psycopg.rows import dict_row

from pg_aio_exporter.collectors import PollCollector, Row, activity, pg_aios
from pg_aio_exporter.collectors.pg_stat_io import PG16 as PG_STAT_IO_SINCE
from pg_aio_exporter.collectors.pg_stat_io import PgStatIoCollector
from pg_aio_exporter.collectors.server import ServerCollector
from pg_aio_exporter.collectors.settings import SettingsCollector
from pg_aio_exporter.config import Target
from pg_aio_exporter.exposition import Exposition
from pg_aio_exporter.metricset import MetricSet
from pg_aio_exporter.redact import scrub
from pg_aio_exporter.sampler import SamplerState
from pg_aio_exporter.selfmetrics import SelfMetrics

log = logging.getLogger("pg_aio_exporter")

Connection = psycopg.AsyncConnection[Row]
# Slack on top of the server-side timeouts, for a server that never answers at all.
CLIENT_TIMEOUT_SLACK = 1.0
FIRST_RETRY = 1.0  # reconnect backoff doubles from here up to the poll interval
# psycopg (3.3, AsyncConnection.wait) answers a cancelled statement by sending the server a
# cancel request and waiting up to 5 s for it, then up to 5 s for the statement to end: behind
# a black hole a sample took 13 s instead of --timeout + 1. A second cancellation makes it drop
# the connection at once. The server-side cancel is useless by then: the client timeout is
# longer than statement_timeout, so it only expires when the server or network is unresponsive.
CANCEL_GRACE = 0.25


# backend_type in pg_stat_activity, which the sampler needs, exists since PostgreSQL 10.
MIN_SERVER_VERSION = 100000


class UnsupportedServerError(Exception):
    """Connected, but not to a PostgreSQL this exporter can read."""


_KINDS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((UnsupportedServerError,), "unsupported"),
    # LockNotAvailable is lock_timeout firing: the same bounded wait as statement_timeout.
    ((TimeoutError, psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable), "timeout"),
    ((psycopg.errors.InsufficientPrivilege,), "privilege"),
    ((psycopg.errors.InvalidPassword, psycopg.errors.InvalidAuthorizationSpecification), "auth"),
)
# libpq reports connection failures as text only, without a SQLSTATE.
_CONNECT_MESSAGES = (
    ("authentication failed", "auth"),
    ("no password supplied", "auth"),
    # "no pg_hba.conf entry" / "pg_hba.conf rejects connection" (e.g. hostssl only, client
    # without TLS): SQLSTATE 28000, which is "auth" when psycopg has the SQLSTATE.
    ("pg_hba.conf", "auth"),
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


async def _prepare(conn: Connection, queries: Sequence[str]) -> dict[str, str]:
    """Prepare each statement once per connection, so that samples skip parsing and planning
    (about half of their server time): without parameters, PostgreSQL plans a prepared
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


class TargetWorker:
    def __init__(
        self,
        target: Target,
        exposition: Exposition,
        selfmetrics: SelfMetrics,
        *,
        poll_interval: float,
        sample_interval: float,
        timeout: float,
    ) -> None:
        self.target = target
        self._exposition = exposition
        self._self = selfmetrics
        self._poll_interval = poll_interval
        self._sample_interval = sample_interval
        self._timeout = timeout
        self._base_labels = {"target": target.name, **target.labels}
        self._collectors: list[PollCollector] = [
            PgStatIoCollector(),
            SettingsCollector(),
            ServerCollector(),
        ]
        self._sampler = SamplerState()
        self._conn: Connection | None = None
        self._statements: dict[str, str] = {}  # SQL -> what to send: EXECUTE name, or the SQL
        # Collector -> kind of its current failure streak: one log line when a streak starts
        # or its cause changes, one when it ends, nothing in between.
        self._failing: dict[str, str] = {}
        self._unsupported_logged = False

    def _log_fields(self, **extra: object) -> dict[str, object]:
        return {"target": self.target.name, "address": self.target.address, **extra}

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_poll = next_sample = loop.time()
        backoff = 0.0
        try:
            while True:
                if loop.time() >= next_poll:
                    reached = await self._guarded(self.poll)
                    self._sampler.roll_window()
                    self._publish_samples(current=reached)
                    if reached:
                        backoff = 0.0
                        next_poll, _ = next_tick(next_poll, self._poll_interval, loop.time())
                    else:
                        backoff = min(max(2 * backoff, FIRST_RETRY), self._poll_interval)
                        next_poll = loop.time() + backoff
                if loop.time() >= next_sample:
                    sampled = self._conn is not None
                    if sampled:
                        await self._guarded(self.sample)
                        if self._conn is None:
                            next_poll = loop.time()  # lost it: let the poll say pg_up 0 now
                    next_sample, missed = next_tick(next_sample, self._sample_interval, loop.time())
                    if sampled and missed:
                        self._self.sample_overruns.labels(self.target.name).inc(missed)
                await asyncio.sleep(max(0.0, min(next_poll, next_sample) - loop.time()))
        finally:
            await self._disconnect()

    async def _guarded(self, step: Callable[[], Awaitable[bool]]) -> bool:
        """Run a poll or sample; a bug in either must cost one round, not the target's loop."""
        try:
            return await step()
        except Exception:
            log.exception("internal error", extra=self._log_fields(step=step.__name__))
            self._self.poll_errors.labels(self.target.name, step.__name__, "internal").inc()
            await self._disconnect()
            self._publish_samples(current=False)
            return False

    async def _connect(self) -> Connection:
        if self._conn is not None:
            return self._conn
        async with client_timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
            # No automatic prepared statements: psycopg (3.3) prepares a statement on its 6th
            # run, and when that run sits behind a failed statement in a pipeline, the server
            # skips the Parse but psycopg records the name: the statement then fails for good
            # ("prepared statement _pg3_0 does not exist"). Seen after a lock wait on
            # pg_stat_activity: pg_aios was lost until a reconnect. _prepare() does it instead,
            # outside any pipeline.
            conn = await psycopg.AsyncConnection.connect(
                self.target.conninfo, autocommit=True, row_factory=dict_row, prepare_threshold=None
            )
            try:
                version = conn.info.server_version
                if version < MIN_SERVER_VERSION:
                    raise UnsupportedServerError(
                        f"server version {version or 'unknown'} is not supported:"
                        " PostgreSQL 10 or newer required"
                    )
                # Our statements must never hold a lock wait or a slow plan past the timeout.
                await conn.execute(
                    f"SET statement_timeout = {int(self._timeout * 1000)}; SET lock_timeout = 1000"
                )
                self._statements = await _prepare(conn, self._queries(version))
            except BaseException:
                await conn.close()
                raise
        self._conn = conn
        log.info("connected", extra=self._log_fields(server_version=conn.info.server_version))
        return conn

    def _queries(self, version: int) -> list[str]:
        """Every statement this server version gets, polls and samples."""
        queries = [c.query(version) for c in self._collectors]
        queries += [activity.SQL, pg_aios.query(version)]
        return [q for q in queries if q is not None]

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _record_failure(self, collector: str, exc: BaseException, what: str = "poll") -> None:
        message = scrub(
            str(exc).strip().split("\n")[0] or type(exc).__name__,
            dsn=self.target.conninfo,
            password=self.target.password,
        )
        self._report(collector, error_kind(exc), message, what)

    def _report(self, collector: str, kind: str, message: str, what: str) -> None:
        self._self.poll_errors.labels(self.target.name, collector, kind).inc()
        if self._failing.get(collector) != kind:
            self._failing[collector] = kind
            log.error(
                f"{what} failed",
                extra=self._log_fields(collector=collector, kind=kind, err=message),
            )

    def _succeeded(self, collector: str) -> None:
        if self._failing.pop(collector, None) is not None:
            log.info(f"{collector} recovered", extra=self._log_fields(collector=collector))

    def _log_unsupported(self, version: int, collectors: list[str]) -> None:
        if collectors and not self._unsupported_logged:
            self._unsupported_logged = True
            log.warning(
                f"{', '.join(collectors)} not exported: needs PostgreSQL"
                f" {PG_STAT_IO_SINCE // 10000} or newer",
                extra=self._log_fields(server_version=version),
            )

    async def poll(self) -> bool:
        """Read every collector's view in one round trip and publish the result.

        Returns whether the server was reached."""
        out = MetricSet(self._base_labels)
        started = time.perf_counter()
        try:
            conn = await self._connect()
            version = conn.info.server_version
            planned = [(c, c.query(version)) for c in self._collectors]
            self._log_unsupported(version, [c.name for c, sql in planned if sql is None])
            runnable = [(c, sql) for c, sql in planned if sql is not None]
            async with client_timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
                results = await run_pipelined(conn, [self._statements[sql] for _, sql in runnable])
        except (psycopg.Error, TimeoutError, OSError, UnsupportedServerError) as exc:
            # Unreachable, refused, timed out or dropped: start over on the next poll.
            await self._disconnect()
            self._record_failure("connection", exc)
            out.gauge("pg_up", "1 if the last poll reached the server.", 0.0)
            self._exposition.publish(self.target.name, "poll", out.families())
            return False
        round_trip = time.perf_counter()
        self._succeeded("connection")
        all_ok = True
        for (collector, _), result in zip(runnable, results, strict=True):
            if isinstance(result, Exception):
                all_ok = False
                self._record_failure(collector.name, result)
                continue
            self._succeeded(collector.name)
            collected = time.perf_counter()
            collector.collect(result, out)
            own = time.perf_counter() - collected
            self._self.poll_duration.labels(self.target.name, collector.name).observe(
                round_trip - started + own
            )
        out.gauge("pg_up", "1 if the last poll reached the server.", 1.0)
        if all_ok:
            self._self.last_poll_success.labels(self.target.name).set(time.time())
        self._exposition.publish(self.target.name, "poll", out.families())
        return True

    async def sample(self) -> bool:
        """pg_stat_activity and (PG 18+) pg_aios in one round trip; False if it failed."""
        conn = self._conn
        assert conn is not None
        aios_sql = pg_aios.query(conn.info.server_version)
        queries = [activity.SQL] if aios_sql is None else [activity.SQL, aios_sql]
        started = time.perf_counter()
        try:
            async with client_timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
                results = await run_pipelined(conn, [self._statements[q] for q in queries])
        except (psycopg.Error, TimeoutError, OSError) as exc:
            await self._disconnect()
            self._record_failure("connection", exc, what="sample")
            self._publish_samples(current=False)
            return False
        self._self.sample_duration.labels(self.target.name).observe(time.perf_counter() - started)
        self._succeeded("connection")
        activity_rows, aios_rows = results[0], results[1] if aios_sql else None
        if isinstance(activity_rows, Exception):
            self._record_failure("activity", activity_rows, what="sample")
            self._publish_samples(current=False)
            return False
        if isinstance(aios_rows, Exception):
            self._record_failure("pg_aios", aios_rows, what="sample")
            aios_rows = None
        elif aios_rows is not None:
            self._succeeded("pg_aios")
        seen = activity.classify(activity_rows)
        if seen.hidden:
            self._report(
                "activity",
                "privilege",
                f"{seen.hidden} processes hidden from this role: grant it pg_monitor",
                "sample",
            )
        else:
            self._succeeded("activity")
        self._sampler.observe(seen, None if aios_rows is None else pg_aios.summarize(aios_rows))
        self._publish_samples(current=True)
        return True

    def _publish_samples(self, *, current: bool) -> None:
        out = MetricSet(self._base_labels)
        self._sampler.collect(out, current=current)
        self._exposition.publish(self.target.name, "sample", out.families())

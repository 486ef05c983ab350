"""One target: a persistent connection, the poll and sample schedule, and publishing results.

Everything for a target runs on one connection, one statement at a time, so the exporter is
a single backend on the server and its queries can never overlap: a sample that is due while
the previous sample (or a poll) still runs is skipped and counted as an overrun. A sample
skipped because the exporter itself woke late (no CPU for it) is a stall, not an overrun: the
remedy differs (CPU for the exporter, not a longer sample interval).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import traceback
import zlib
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import class_row, tuple_row

from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.base import (
    Collector,
    MayBeAbsent,
    OncePerConnection,
    PollCollector,
    SampleCollector,
    Snapshots,
)
from pg_aio_exporter.config.targets import Target
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.expose.selfmetrics import INTERNAL, SelfMetrics
from pg_aio_exporter.poll.errors import (
    PasswordSourceError,
    UnsupportedServerError,
    error_kind,
    known_failures,
)
from pg_aio_exporter.poll.passwords import read_password
from pg_aio_exporter.poll.sampler import Sampler
from pg_aio_exporter.poll.session import (
    CLIENT_TIMEOUT_SLACK,
    Connection,
    client_timeout,
    prepare,
    run_pipelined,
)
from pg_aio_exporter.redact import scrub
from pg_aio_exporter.versions import PG10

log = logging.getLogger("pg_aio_exporter")
PG_UP_HELP = "1 if the last poll reached the server."
FIRST_RETRY = 1.0  # reconnect backoff doubles from here up to the poll interval
# A view found absent (an extension not installed) is asked for again this much later: once
# created, it is read without a restart, and the server logs one error per retry, not per poll.
ABSENT_RETRY = 600.0
# What a target last published is dropped from /metrics once it is this many poll intervals
# older than a round may take (stale_after).
STALE_POLLS = 3


def stale_after(poll_interval: float, timeout: float) -> float:
    """How old a target's published families may get before the exposition drops them. A
    working target publishes after every poll (and, while it cannot connect, more often); a
    poll takes at most its connect and its round trip, each bounded by the timeout and its
    slack. A target silent for longer has a hung or dead task: its series go absent rather
    than serve the last values, pg_up 1 included, as current."""
    return STALE_POLLS * poll_interval + 2 * (timeout + CLIENT_TIMEOUT_SLACK)


def next_tick(deadline: float, interval: float, now: float) -> tuple[float, int]:
    """The next deadline after `now` on the grid deadline + k*interval, and how many were missed."""
    following = deadline + interval
    missed = 0
    if following <= now:
        missed = int((now - following) // interval) + 1
        following += missed * interval
    return following, missed


def stalled_ticks(deadline: float, interval: float, missed: int, stall: tuple[float, float]) -> int:
    """How many of the `missed` ticks deadline + k*interval (k = 1..missed) fell due inside
    `stall` = (when the loop meant to wake, when it woke), start excluded."""
    start, end = stall
    first = max(1, math.floor((start - deadline) / interval) + 1)
    last = min(missed, math.floor((end - deadline) / interval))
    return max(0, last - first + 1)


def poll_phase(name: str, interval: float) -> float:
    """Where in the poll interval a target's polls fall, the same at every start. Targets of
    one exporter then spread over the interval instead of all polling (and loading a shared
    server, and each replacing its text) at once; Prometheus offsets scrapes the same
    way, by a hash of the target."""
    return zlib.crc32(name.encode()) / 2**32 * interval


class Tap(Protocol):
    """A listener beside the exposition (the report): each poll collector's rows as read, the
    sample collectors' totals after each sample, and every failure the worker records."""

    def polled(self, collector: str, snapshot: object | None, read_at: float) -> None:
        """`collector` answered this poll; `snapshot`: its rows as the view's snapshot type
        (base.Snapshots), None for a collector that makes none."""

    def sampled(self, samples: int, totals: dict[str, Any], answered: list[str]) -> None:
        """`samples` taken so far; every sample collector's totals() in one mapping; the
        sample collectors that answered this sample."""

    def failed(self, collector: str, kind: str, message: str) -> None: ...

    def round_trip(self, transactions: int, ended: float, seconds: float) -> None:
        """A poll's or a sample's round trip returned at `ended` (epoch) after `seconds` on the
        client's clock, having made `transactions` transactions on the server
        (session.RoundTrip)."""


class TargetWorker:
    def __init__(
        self,
        target: Target,
        exposition: Exposition | None,
        selfmetrics: SelfMetrics,
        *,
        poll_interval: float,
        sample_interval: float,
        timeout: float,
        collectors: Collection[str] | None = None,
        tap: Tap | None = None,
        logger: logging.Logger = log,
        poll_collectors: list[PollCollector[Any]] | None = None,
        closing_statement: Callable[[int], str | None] | None = None,
    ) -> None:
        """`exposition` None publishes nothing (the report reads the tap only);
        `sample_interval` 0 turns sampling off; `collectors` names the enabled ones (all
        when None); `tap` listens beside the exposition; `logger` gets its log lines;
        `poll_collectors`: these instead of the registry's (the report's own list);
        `closing_statement`: by server version, a statement sent last in each round trip (the
        report's flushes this backend's own counts, pg_stat_database.own_flush)."""
        self.target = target
        self._log = logger
        self._exposition = exposition
        self._self = selfmetrics
        self._poll_interval = poll_interval
        self._sample_interval = sample_interval
        self._timeout = timeout
        self._tap = tap
        self._closing_statement = closing_statement
        self._base_labels = {"target": target.name, **target.labels}
        self._collectors: list[PollCollector[Any]] = (
            registry.poll_collectors(collectors) if poll_collectors is None else poll_collectors
        )
        sampled = registry.sample_collectors(collectors) if sample_interval else []
        self._sampler = Sampler(sampled) if sampled else None
        self._conn: Connection | None = None
        self._statements: dict[str, str] = {}  # SQL -> what to send: EXECUTE name, or the SQL
        # Collector -> kind of its current failure streak: one log line when a streak starts
        # or its cause changes, one when it ends, nothing in between.
        self._failing: dict[str, str] = {}
        # (collector, step) -> the bug it last logged, for internal_error.
        self._bugs: dict[tuple[str, str], str] = {}
        self._unsupported_logged = False
        self._absent: dict[str, float] = {}  # collector -> time.monotonic() to ask again
        self._read_once: set[str] = set()  # OncePerConnection collectors read on this connection
        sampling = self._sampler.collectors if self._sampler is not None else []
        rounds = ["poll", "sample"] if self._sampler is not None else ["poll"]
        names = [c.name for c in [*self._collectors, *sampling]]
        for collector, kind in known_failures(names, rounds):
            selfmetrics.poll_errors.labels(target.name, collector, kind)
        self._password: str | None = None  # the last one read from the target's password source

    @property
    def sampler(self) -> Sampler | None:
        return self._sampler

    def _log_fields(self, **extra: object) -> dict[str, object]:
        return {"target": self.target.name, "address": self.target.address, **extra}

    async def run(self, until: float | None = None) -> None:
        """Poll and sample until cancelled or, given `until` (event loop time), until then:
        the last poll at `until` closes the window (the report's)."""
        loop = asyncio.get_running_loop()
        # The first poll at once (pg_up without waiting), the next ones on the target's grid.
        next_poll = loop.time()
        next_sample = next_poll if self._sampler is not None else math.inf
        rolled = next_poll  # when the sampler's window opened
        grid = next_poll + poll_phase(self.target.name, self._poll_interval) - self._poll_interval
        backoff = 0.0
        end = math.inf if until is None else until
        stall = (0.0, 0.0)
        try:
            while True:
                if loop.time() >= end:
                    await self._guarded(self.poll)
                    return
                if loop.time() >= next_poll:
                    connected = self._conn is not None
                    reached = await self._guarded(self.poll)
                    if not connected and self._conn is not None:
                        # Samples start once connected: the time a (re)connect took is no
                        # sample missed.
                        next_sample = max(next_sample, loop.time())
                    self._roll_window(loop.time() - rolled)
                    rolled = loop.time()
                    self._publish_samples(current=reached)
                    if reached:
                        backoff = 0.0
                        grid, _ = next_tick(grid, self._poll_interval, loop.time())
                        next_poll = grid
                    else:
                        backoff = min(max(2 * backoff, FIRST_RETRY), self._poll_interval)
                        next_poll = loop.time() + backoff
                if loop.time() >= next_sample:
                    sampled = self._conn is not None
                    if sampled:
                        await self._guarded(self.sample)
                        if self._conn is None:
                            next_poll = loop.time()  # lost it: let the poll say pg_up 0 now
                    due = next_sample
                    next_sample, missed = next_tick(due, self._sample_interval, loop.time())
                    if sampled and missed:
                        self._count_skipped(due, missed, stall)
                wake = max(loop.time(), min(next_poll, next_sample, end))
                await asyncio.sleep(wake - loop.time())
                stall = (wake, loop.time())
        finally:
            await self._disconnect()

    def _count_skipped(self, due: float, missed: int, stall: tuple[float, float]) -> None:
        """Ticks skipped after the sample due at `due`: those that fell due while the loop
        overslept (`stall`) are stalls, the others passed while a query ran: overruns."""
        stalled = stalled_ticks(due, self._sample_interval, missed, stall)
        if stalled:
            self._self.sample_stalls.labels(self.target.name).inc(stalled)
        if missed > stalled:
            self._self.sample_overruns.labels(self.target.name).inc(missed - stalled)

    async def _guarded(self, step: Callable[[], Awaitable[bool]]) -> bool:
        """Run a poll or sample; a bug in either must cost one round, not the target's loop."""
        try:
            return await step()
        except Exception as exc:
            self.internal_error(step.__name__, exc, step.__name__)
            await self._disconnect()
            # Never raises: each sample collector's series are collected under a guard.
            self._publish_samples(current=False)
            return False

    def internal_error(self, collector: str, exc: Exception, step: str) -> None:
        """A bug, in a collector, in a poll or sample step (then `collector` is the step) or
        one that ended the worker's task (collector `worker`, app.py). Counted every time;
        logged with its traceback when the (collector, step) starts failing or fails in
        another way, not again each second a sample collector's bug repeats."""
        # The traceback is what a bug report needs; the log formats render fields only.
        trace = "".join(traceback.format_exception(exc))
        cause = f"{type(exc).__name__}: {exc}"
        if self._bugs.get((collector, step)) != cause:
            self._bugs[(collector, step)] = cause
            self._log.error(
                "internal error",
                extra=self._log_fields(step=step, collector=collector, err=self._scrub(trace)),
            )
        self._self.poll_errors.labels(self.target.name, collector, INTERNAL).inc()
        if self._tap is not None:
            message = self._scrub(str(exc).strip().split("\n")[0] or type(exc).__name__)
            self._tap.failed(collector, INTERNAL, message)

    async def _connect(self) -> Connection:
        if self._conn is not None:
            return self._conn
        conninfo = self.target.conninfo
        if self.target.password is not None:
            # Before the connect timeout starts: a token helper has its own timeout.
            self._password = await read_password(self.target.password)
            conninfo = make_conninfo(conninfo, password=self._password)
        async with client_timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
            # No automatic prepared statements: psycopg (3.3) prepares a statement on its 6th
            # run, and when that run sits behind a failed statement in a pipeline, the server
            # skips the Parse but psycopg records the name: the statement then fails on every run
            # ("prepared statement _pg3_0 does not exist") until a reconnect
            # (docs/reliability.md). prepare() does it instead, outside any pipeline.
            conn = await psycopg.AsyncConnection.connect(
                conninfo, autocommit=True, prepare_threshold=None
            )
            try:
                version = conn.info.server_version
                if version < PG10:
                    raise UnsupportedServerError(
                        f"server version {version or 'unknown'} is not supported:"
                        " PostgreSQL 10 or newer required"
                    )
                # Our statements must never hold a lock wait or a slow plan past the timeout.
                # UTF8 on a SQL_ASCII database too (initdb without a locale picks it): psycopg
                # hands SQL_ASCII text over as bytes, which no label can hold.
                await conn.execute(
                    f"SET statement_timeout = {int(self._timeout * 1000)}; SET lock_timeout = 1000;"
                    " SET client_encoding = 'UTF8'"
                )
                self._statements = await prepare(conn, self._queries(version))
            except BaseException:
                await conn.close()
                raise
        self._conn = conn
        self._read_once.clear()
        self._log.info("connected", extra=self._log_fields(server_version=conn.info.server_version))
        return conn

    def _queries(self, version: int) -> list[str]:
        """Every statement this server version gets, polls and samples."""
        collectors: list[Collector[Any]] = [*self._collectors]
        if self._sampler is not None:
            collectors += self._sampler.collectors
        flush = self._own_flush(version)
        return [sql for _, sql in _runnable(collectors, version)] + ([flush] if flush else [])

    def _own_flush(self, version: int) -> str | None:
        """The statement that ends each round trip, if this worker sends one."""
        return self._closing_statement(version) if self._closing_statement else None

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _record_failure(self, collector: str, exc: BaseException, what: str = "poll") -> None:
        message = self._scrub(str(exc).strip().split("\n")[0] or type(exc).__name__)
        self._report(collector, error_kind(exc), message, what)

    def _scrub(self, text: str) -> str:
        return scrub(
            text, dsn=self.target.conninfo, password=self._password or self.target.dsn_password
        )

    def _report(self, collector: str, kind: str, message: str, what: str) -> None:
        self._self.poll_errors.labels(self.target.name, collector, kind).inc()
        if self._tap is not None:
            self._tap.failed(collector, kind, message)
        if self._failing.get(collector) != kind:
            self._failing[collector] = kind
            self._log.error(
                f"{what} failed",
                extra=self._log_fields(collector=collector, kind=kind, err=message),
            )

    def _succeeded(self, collector: str) -> None:
        if self._failing.pop(collector, None) is not None:
            self._log.info(f"{collector} recovered", extra=self._log_fields(collector=collector))

    def _log_unsupported(self, version: int) -> None:
        missing = [c for c in self._collectors if c.query(version) is None]
        if missing and not self._unsupported_logged:
            self._unsupported_logged = True
            self._log.warning(
                "; ".join(
                    f"{c.name} not exported: needs PostgreSQL {c.since // 10000} or newer"
                    for c in missing
                ),
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
            self._log_unsupported(version)
            now = time.monotonic()
            runnable = _runnable(
                [
                    c
                    for c in self._collectors
                    if self._absent.get(c.name, now) <= now and c.name not in self._read_once
                ],
                version,
            )
            # The data is as fresh as the moment it was asked for, not as the reply's arrival:
            # a reader who saw this stamp knows the counters were read after it.
            read_at = time.time()
            async with client_timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
                results = await self._round_trip(conn, runnable)
        except (
            psycopg.Error,
            TimeoutError,
            OSError,
            UnsupportedServerError,
            PasswordSourceError,
        ) as exc:
            # Unreachable, refused, timed out or dropped: start over on the next poll.
            await self._disconnect()
            self._record_failure("connection", exc)
            out.gauge("pg_up", PG_UP_HELP, 0.0)
            self._publish("poll", out)
            return False
        round_trip = time.perf_counter()
        self._succeeded("connection")
        all_ok = True
        for (collector, _), result in zip(runnable, results, strict=True):
            if isinstance(result, psycopg.Error):
                if not self._note_absent(collector, result):
                    all_ok = False
                    self._record_failure(collector.name, result)
                continue
            if self._absent.pop(collector.name, None) is not None:
                self._log.info(f"{collector.name} found", extra=self._log_fields())
            collected = time.perf_counter()
            own_set = MetricSet(self._base_labels)
            try:
                if isinstance(result, Exception):
                    raise result  # its rows did not fit its row type
                collector.collect(result, own_set)
                snapshot = (
                    collector.snapshot(result)
                    if self._tap is not None and isinstance(collector, Snapshots)
                    else None
                )
            except Exception as exc:
                # A bug in one collector costs its own series for this poll, nothing else.
                all_ok = False
                self.internal_error(collector.name, exc, "poll")
                continue
            out.add(own_set)
            self._succeeded(collector.name)
            if isinstance(collector, OncePerConnection):
                self._read_once.add(collector.name)
            own = time.perf_counter() - collected
            self._self.poll_duration.labels(self.target.name, collector.name).observe(
                round_trip - started + own
            )
            if self._tap is not None:
                self._tap.polled(collector.name, snapshot, read_at)
        out.gauge("pg_up", PG_UP_HELP, 1.0)
        if all_ok:
            self._self.last_poll_success.labels(self.target.name).set(read_at)
        self._publish("poll", out)
        return True

    def _note_absent(self, collector: PollCollector[Any], exc: Exception) -> bool:
        """Whether `exc` says the collector's view is not there: then one log line when that
        starts, a note to the tap, no error counted, and the view is left alone until
        ABSENT_RETRY."""
        reason = collector.absent(exc) if isinstance(collector, MayBeAbsent) else None
        if reason is None:
            return False
        if collector.name not in self._absent:
            # Info, not a warning: an optional extension left out is a choice, not a fault.
            self._log.info(
                f"{collector.name} not read: {reason}",
                extra=self._log_fields(collector=collector.name),
            )
        self._absent[collector.name] = time.monotonic() + ABSENT_RETRY
        self._failing.pop(collector.name, None)
        if self._tap is not None:
            self._tap.failed(collector.name, "absent", reason)
        return True

    async def sample(self) -> bool:
        """Every sample collector's view in one round trip; False if the sample failed.

        A failure of any view voids the whole sample (it is not counted, so every sampled
        counter keeps the same denominator), except a view this role may not read at all:
        that one is left out of every sample, and the others go on. A bug in a collector's
        observe costs that collector's series only (Sampler.observe)."""
        conn, sampler = self._conn, self._sampler
        assert conn is not None and sampler is not None
        version = conn.info.server_version
        runnable = _runnable(sampler.collectors, version)
        started = time.perf_counter()
        try:
            async with client_timeout(self._timeout + CLIENT_TIMEOUT_SLACK):
                results = await self._round_trip(conn, runnable)
        except (psycopg.Error, TimeoutError, OSError) as exc:
            await self._disconnect()
            self._record_failure("connection", exc, what="sample")
            self._publish_samples(current=False)
            return False
        self._self.sample_duration.labels(self.target.name).observe(time.perf_counter() - started)
        self._succeeded("connection")
        answered: list[tuple[SampleCollector[Any], list[Any] | Exception]] = []
        void = False
        for (collector, _), result in zip(runnable, results, strict=True):
            if isinstance(result, psycopg.Error):
                self._record_failure(collector.name, result, what="sample")
                void = void or error_kind(result) != "privilege"
            else:
                answered.append((collector, result))
        if void:
            self._publish_samples(current=False)
            return False
        observed, failures = sampler.observe(answered, version)
        for name, bug in failures:
            self.internal_error(name, bug, "observe")
        for collector, hidden in observed:
            if hidden:
                self._report(collector.name, "privilege", hidden, "sample")
            else:
                self._succeeded(collector.name)
        if self._tap is not None:
            totals = {k: v for c in sampler.collectors for k, v in c.totals().items()}
            self._tap.sampled(sampler.samples, totals, [c.name for c, _ in observed])
        self._publish_samples(current=True)
        return True

    async def _round_trip(
        self, conn: Connection, runnable: list[tuple[C, str]]
    ) -> list[list[Any] | Exception]:
        """The collectors' statements in one round trip, their results in order: each
        collector's rows of its row_type. The tap hears how many transactions it made."""
        statements = [(self._statements[sql], class_row(c.row_type)) for c, sql in runnable]
        flush = self._own_flush(conn.info.server_version)
        closing = [] if flush is None else [(self._statements[flush], tuple_row)]
        sent = time.perf_counter()
        done = await run_pipelined(conn, [*statements, *closing])
        if self._tap is not None:
            self._tap.round_trip(done.transactions, time.time(), time.perf_counter() - sent)
        return done.results[: len(statements)]

    def _roll_window(self, seconds: float) -> None:
        if self._sampler is not None:
            for name, exc in self._sampler.roll_window(seconds):
                self.internal_error(name, exc, "roll_window")

    def _publish_samples(self, *, current: bool) -> None:
        if self._sampler is None:
            return
        out = MetricSet(self._base_labels)
        for name, exc in self._sampler.collect(out, current=current):
            self.internal_error(name, exc, "sample")
        self._publish("sample", out)

    def _publish(self, part: str, out: MetricSet) -> None:
        if self._exposition is not None:
            self._exposition.publish(self.target.name, part, out.families())


C = TypeVar("C", bound=Collector[Any])


def _runnable(collectors: list[C], version: int) -> list[tuple[C, str]]:
    """The collectors whose view this server version has, with their SQL."""
    planned = [(c, c.query(version)) for c in collectors]
    return [(c, sql) for c, sql in planned if sql is not None]

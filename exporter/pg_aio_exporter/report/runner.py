"""The report's window: the exporter's own worker and collectors on one connection, polled every
POLL_EVERY seconds and at the end, sampled every sample interval, then summarised.

Nothing here queries PostgreSQL by itself: the worker runs the registry's collectors, as the
exporter does, and a tap hands this module their snapshots (one domain type per view) and
failures.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pg_aio_exporter.collectors import pg_stat_io, pg_stat_statements, pg_wait_events, registry
from pg_aio_exporter.collectors.checkpointer import CheckpointerCounts
from pg_aio_exporter.collectors.intervals import (
    NO_WRITES,
    ReadWindow,
    Snapshot,
    WalSnapshot,
    WalWindow,
)
from pg_aio_exporter.collectors.pg_stat_database import DatabaseWork, own_flush
from pg_aio_exporter.collectors.pg_stat_statements import Statements
from pg_aio_exporter.collectors.server import ServerVersion
from pg_aio_exporter.collectors.settings import SettingsFacts
from pg_aio_exporter.config.targets import Target
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.worker import TargetWorker
from pg_aio_exporter.report import series
from pg_aio_exporter.report.margin import batch_means, join_short
from pg_aio_exporter.report.side import Batches
from pg_aio_exporter.report.summary import Activity, ServerFacts, Summary
from pg_aio_exporter.report.workload import KEPT, StatementWindow, Workload
from pg_aio_exporter.report.written import Checkpoints, Writes

# pg_stat_io is read this often within the window (and at its end): a stats reset or restart
# then costs one interval, not the window. One poll costs the server about what 2 samples do.
POLL_EVERY = 10.0
PROGRESS_EVERY = 1.0
# PostgreSQL adds a backend's I/O to pg_stat_io when it goes idle, at most once a second.
STATS_FLUSH = 1.1

Progress = Callable[[float, int], None]  # seconds left, samples taken
Point = TypeVar("Point")  # what in_spans picks out: transactions, sessions


# What a failed connection was, by the worker's error kind; anything else: unreachable.
CAUSES = {
    "auth": "login refused",
    "timeout": "no answer in time",
    "unsupported": "server not supported",
}


# The worker's log lines go nowhere: the report states each failure itself. A logger of its
# own, outside the logging tree, so that no other logger of the process is touched.
QUIET = logging.Logger("pg_aio_exporter.report.quiet", logging.CRITICAL + 1)


class Unreachable(Exception):
    """The server could not be reached or the role could not log in; str() is one line."""


class Recorder:
    """The tap: what the window's polls read, what the samples counted, and what failed."""

    def __init__(self, duration: float = 0.0, clock: Callable[[], float] = time.time) -> None:
        """`clock`: epoch seconds now (a replay of a day's samples runs on its own clock)."""
        self.every = series.spacing(duration)
        self.series = series.SeriesRecorder(self.every)
        self.clock = clock
        self.origin = clock()
        self.reads = ReadWindow()
        self.wal = WalWindow()
        self.wal_seen = False  # the pg_stat_wal collector answered (PostgreSQL 14+)
        self.checkpoints: list[CheckpointerCounts] = []  # the window's first and last
        self.server: ServerVersion | None = None
        self.settings: SettingsFacts | None = None
        self.wait_events: pg_wait_events.WaitEvents | None = None  # the view as read (17+)
        self.samples = 0
        self.totals: dict[str, Any] = {}  # the sample collectors', by summary.Activity field
        self.failures: dict[str, tuple[str, str]] = {}  # collector -> kind, the last message
        self.answered: set[str] = set()  # the collectors read at least once in the window
        self.statements = WorkloadWindow()
        self._working = 0  # client sessions doing work, summed over every sample so far
        self._connected = 0  # client sessions connected, summed over every sample so far
        self._in_transaction = 0  # ... idle inside a transaction, summed over every sample so far

    def start(self) -> None:
        """Forget the reads seen so far: the window starts now. The workload's too: the
        connection's own first transactions (SET, PREPARE) reach pg_stat_database late."""
        self.reads = ReadWindow()
        self.statements = WorkloadWindow()
        self.wal = WalWindow()
        self.checkpoints = []
        self.answered = set()
        self.series = series.SeriesRecorder(self.every)
        self.origin = self.clock()

    def polled(self, collector: str, snapshot: object | None, read_at: float) -> None:
        """One collector's poll, by the type of its snapshot (base.Snapshots)."""
        self.answered.add(collector)
        match snapshot:
            case Snapshot():
                self.reads.observe(snapshot, read_at)
                self.series.poll(
                    series.PollTotal(
                        read_at - self.origin,
                        self.reads.seconds,
                        self.reads.timed,
                        self.reads.total(),
                        sum(self.reads.writes.values(), NO_WRITES),
                    )
                )
            case WalSnapshot():
                self.wal_seen = True
                self.wal.observe(snapshot, read_at)
                self.series.wal(self.wal.counters, self.wal.seconds, self.wal.timed)
            case CheckpointerCounts():
                self.checkpoints = [*self.checkpoints[:1], snapshot]
            case ServerVersion():
                self.server = snapshot
            case SettingsFacts():
                self.settings = snapshot
            case Statements():
                self.statements.observe_statements(snapshot)
            case DatabaseWork():
                self.statements.observe_databases(snapshot, read_at)
            case pg_wait_events.WaitEvents():
                self.wait_events = snapshot

    def round_trip(self, transactions: int, ended: float, seconds: float) -> None:
        self.statements.observe_round_trip(transactions, ended, seconds)

    def sampled(self, samples: int, totals: dict[str, Any], answered: list[str]) -> None:
        self.samples, self.totals = samples, totals
        self.answered.update(answered)
        now = self.clock()
        self.series.sample(now - self.origin, samples, totals)
        activity = self.activity(0.0)
        working, connected = activity.client_samples(), activity.client_slots
        in_transaction = activity.client_in_transaction_slots
        self.statements.observe_sample(
            now,
            working - self._working,
            connected - self._connected,
            in_transaction - self._in_transaction,
        )
        self._working, self._connected = working, connected
        self._in_transaction = in_transaction

    def not_read(self) -> tuple[str, ...]:
        """The collectors that failed and were never read in the window: their figures are not
        read, which is not zero and not off (an absent view is no failure)."""
        return tuple(
            sorted(
                c
                for c, (kind, _) in self.failures.items()
                if kind != "absent" and c != "connection" and c not in self.answered
            )
        )

    def activity(self, sample_interval: float) -> Activity:
        return Activity(
            samples=self.samples,
            sample_interval=sample_interval,
            wait_events=pg_wait_events.server_events(
                self.server.version_num if self.server is not None else None, self.wait_events
            ),
            **self.totals,
        )

    def writes(self, batches: Batches) -> Writes:
        """The window's write side, read and WAL counts alike; `batches`: its write time and
        bytes per sub-window (io_batches)."""
        return Writes(
            batches=batches,
            rows=self.reads.writes,
            seconds=self.reads.seconds,
            timed=self.reads.timed,
            wal=self.wal.counters if self.wal_seen else None,
            wal_seconds=self.wal.seconds,
            wal_timed=self.wal.timed,
            checkpoints=(
                Checkpoints.between(self.checkpoints[0], self.checkpoints[-1])
                if len(self.checkpoints) == 2
                else None
            ),
        )

    def io_batches(self) -> tuple[Batches, Batches]:
        """Read wait and buffer write time against their bytes, per sub-window between the
        kept polls joined to at least MIN_BATCH_SECONDS each: the spread behind the intervals
        of time per byte (side.per_byte). Spans across a reset or restart count nothing, as
        in the totals."""
        reads, writes = [], []
        for before, after in itertools.pairwise(self.series.polls):
            seconds = after.seconds - before.seconds
            read, wrote = after.reads, after.writes
            read_ms = read.read_time_ms - before.reads.read_time_ms
            write_ms = wrote.write_time_ms - before.writes.write_time_ms
            reads.append([read_ms / 1000.0, read.read_bytes - before.reads.read_bytes, seconds])
            writes.append(
                [write_ms / 1000.0, wrote.write_bytes - before.writes.write_bytes, seconds]
            )
        return _batches(reads), _batches(writes)

    def failed(self, collector: str, kind: str, message: str) -> None:
        self.failures[collector] = (kind, message)

    def unreachable(self, target: Target) -> Unreachable:
        kind, message = self.failures.get("connection", ("connection", "no poll succeeded"))
        cause = CAUSES.get(kind, "server unreachable")
        return Unreachable(f"cannot connect to {target.address}: {cause}: {message}")


MIN_TRANSACTIONS = 10  # below this many in the window, DB time per transaction is not judged
# Active time's sub-windows are at least this long (seconds): a span of a second or two between
# polls would be mostly flush lag (a backend adds its counts at most once a second).
MIN_BATCH_SECONDS = POLL_EVERY / 2


def _batches(parts: list[list[float]]) -> Batches:
    return tuple((n, d, t) for n, d, t in join_short(parts, MIN_BATCH_SECONDS))


class WorkloadWindow:
    """The window's statements (first and last poll), its pg_stat_database reads (every poll)
    and the client sessions each sample saw, for workload time."""

    def __init__(self) -> None:
        self.first: dict[pg_stat_statements.StatementKey, pg_stat_statements.Statement] | None = (
            None
        )
        self.last: dict[pg_stat_statements.StatementKey, pg_stat_statements.Statement] = {}
        self.hidden = 0
        self.work: list[tuple[DatabaseWork, float]] = []  # every read
        self.own: list[tuple[float, int]] = []  # per round trip: when it ended, its transactions
        self.own_time: list[tuple[float, float]] = []  # per round trip: when it ended, how long
        # Per sample: when, and client sessions working, connected, idle inside a transaction.
        self.sessions: list[tuple[float, tuple[int, int, int]]] = []

    def observe_statements(self, seen: Statements) -> None:
        self.last, self.hidden = seen.by_key, seen.hidden
        if self.first is None:
            self.first = self.last

    def observe_databases(self, work: DatabaseWork, read_at: float) -> None:
        self.work.append((work, read_at))

    def observe_round_trip(self, transactions: int, ended: float, seconds: float) -> None:
        self.own.append((ended, transactions))
        self.own_time.append((ended, seconds))

    def observe_sample(self, at: float, working: int, connected: int, in_transaction: int) -> None:
        self.sessions.append((at, (working, connected, in_transaction)))

    def statement_deltas(self) -> dict[pg_stat_statements.StatementKey, StatementWindow] | None:
        """Each statement's counts over the window, the KEPT that took most time; a statement
        first seen in the window counts from 0, one whose counts went back (reset, evicted)
        is left out."""
        if self.first is None:
            return None
        out = []
        for key, now in self.last.items():
            before = self.first.get(key)
            delta = now.counters - before.counters if before is not None else now.counters
            if delta.calls > 0 and not delta.went_back:
                out.append(StatementWindow(key[0], now.database, now.user, delta, now.text))
        out.sort(key=lambda s: (-s.counters.exec_seconds, s.key))
        return {s.key: s for s in out[:KEPT]}

    def segments(self) -> list[tuple[float, float, DatabaseWork]]:
        """The spans between two consecutive reads whose counts continue (no restart, no
        stats_reset between): (from, until, what was counted in it)."""
        out = []
        for (first, at), (last, until) in itertools.pairwise(self.work):
            if last.continues(first):
                grown = DatabaseWork(
                    last.transactions - first.transactions,
                    last.blocks - first.blocks,
                    None
                    if last.active is None or first.active is None
                    else last.active - first.active,
                    last.start_time,
                )
                out.append((at, until, grown))
        return out

    def workload(self, note: str | None) -> Workload:
        """Transactions, blocks and sampled client sessions over the spans whose counts
        continue (all of the window unless pg_stat_database was reset or the server restarted).

        Each poll and sample of the report flushed its counts (PostgreSQL 15+,
        pg_stat_database.own_flush): the report's transactions of a span (those of the poll
        that opens it, which returned after its read, and of the samples within) are in the
        read that closes it. A round trip is one transaction (one pipeline), or more when it
        was rerun statement by statement (session.RoundTrip counts them). Older servers: an
        estimate (counts reach the view up to a second late). Fewer than
        MIN_TRANSACTIONS of the workload's: no DB time per transaction. (The report's own used
        to be a floor too: under light load sampled every 100 ms they outnumber the workload's,
        which were then dropped though counted exactly.)"""
        segments = self.segments()
        seconds = sum(until - at for at, until, _ in segments)
        spans = [(a, u) for a, u, _ in segments]
        sampled = in_spans(self.sessions, spans)
        within = [working for working, _, _ in sampled]
        # Averages over the samples of client sessions working, connected, in a transaction.
        means: list[float | None] = (
            [sum(column) / len(sampled) for column in zip(*sampled, strict=True)]
            if sampled
            else [None, None, None]
        )
        transactions = blocks = None
        if segments:
            own = sum(in_spans(self.own, spans))
            counted = sum(g.transactions for _, _, g in segments) - own
            transactions = counted if counted >= MIN_TRANSACTIONS else None
            blocks = sum(g.blocks for _, _, g in segments)
        active = self.active(segments)
        return Workload(
            seconds=seconds,
            statements=self.statement_deltas(),
            transactions=transactions,
            blocks=blocks,
            client_sessions=means[0],
            connected_sessions=means[1],
            in_transaction_sessions=means[2],
            statements_note=note,
            sampled_sessions=float(sum(within)),
            session_batches=batch_means(within),
            uncounted_seconds=max(0.0, self.span() - seconds) if spans else 0.0,
            active_seconds=None if active is None or transactions is None else active[0],
            own_active_seconds=0.0 if active is None else active[1],
            active_batches=None if active is None or transactions is None else active[2],
        )

    def active(
        self, segments: list[tuple[float, float, DatabaseWork]]
    ) -> tuple[float, float, tuple[float, ...]] | None:
        """The workload's active time over the segments (pg_stat_database, 14+), the time the
        report's own round trips within them took on its clock, and the active time per
        transaction of sub-windows of at least MIN_BATCH_SECONDS (consecutive segments joined:
        the worker's first poll interval is cut short by its phase, and the last by the
        window's end); None where a segment has no active time (before 14). The report's own
        active time lies between 0 and its round trips' time: half of it is taken out."""
        if not segments or any(g.active is None for _, _, g in segments):
            return None
        spans = [(at, until) for at, until, _ in segments]
        own_times, owns = span_sums(self.own_time, spans), span_sums(self.own, spans)
        parts = [  # [active, own time, transactions, seconds] per segment
            [grown.active or 0.0, own_time, grown.transactions - own, until - at]
            for (at, until, grown), own_time, own in zip(segments, own_times, owns, strict=True)
        ]
        batches = join_short(parts, MIN_BATCH_SECONDS)
        total = sum(b[0] for b in batches)
        own_time = sum(b[1] for b in batches)
        per_transaction = tuple((a - own / 2) / xacts for a, own, xacts, _ in batches if xacts > 0)
        return total - own_time / 2, own_time, per_transaction

    def span(self) -> float:
        return self.work[-1][1] - self.work[0][1] if len(self.work) > 1 else 0.0


def _span_of(starts: list[float], spans: Sequence[tuple[float, float]], t: float) -> int | None:
    """The index of the span (from, until] that `t` falls in, by bisection of their starts."""
    i = bisect.bisect_left(starts, t) - 1  # the last span starting before t
    return i if i >= 0 and t <= spans[i][1] else None


def in_spans(
    points: Sequence[tuple[float, Point]], spans: Sequence[tuple[float, float]]
) -> list[Point]:
    """The counts of the points (when, count) that fall in a span (from, until], for spans in
    time order that do not overlap (the reads' pairs): each point is looked up by bisection,
    so a 24 h window sampled every second is not compared with each of its polls."""
    starts = [a for a, _ in spans]
    return [n for t, n in points if _span_of(starts, spans, t) is not None]


def span_sums(
    points: Sequence[tuple[float, float]], spans: Sequence[tuple[float, float]]
) -> list[float]:
    """Per span (as in_spans), the sum of the counts of the points in it: one pass over the
    points, not one per span (a day's round trips times its polls was minutes of CPU)."""
    starts = [a for a, _ in spans]
    out = [0.0] * len(spans)
    for t, n in points:
        i = _span_of(starts, spans, t)
        if i is not None:
            out[i] += n
    return out


def server_facts(version: ServerVersion, read: SettingsFacts | None) -> ServerFacts:
    """The server's facts from its snapshots; no settings when pg_settings was never read."""
    if read is None:
        return ServerFacts(version.version, version.version_num, {}, None)
    return ServerFacts(
        version=version.version,
        version_num=version.version_num,
        settings=read.values,
        io_method=read.io_method,
        io_methods=read.io_methods,
        pending_restart=read.pending_restart,
    )


async def _report_progress(recorder: Recorder, end: float, progress: Progress) -> None:
    loop = asyncio.get_running_loop()
    while True:
        progress(max(0.0, end - loop.time()), recorder.samples)
        await asyncio.sleep(PROGRESS_EVERY)


async def measure(
    target: Target,
    *,
    duration: float,
    sample_interval: float,
    timeout: float,
    progress: Progress | None = None,
) -> Summary:
    """Watch `target` for `duration` seconds. Raises Unreachable when the first connection
    fails; later failures are in the summary's not_visible."""
    recorder = Recorder(duration)
    worker = TargetWorker(
        target,
        None,  # nothing is served: the report reads the tap
        SelfMetrics(),
        poll_interval=POLL_EVERY,
        sample_interval=sample_interval,
        timeout=timeout,
        tap=recorder,
        logger=QUIET,
        poll_collectors=registry.report_collectors(),
        closing_statement=own_flush,
    )
    # The first poll connects (its failure, scrubbed and classified by the worker, is the
    # report's). A new connection reads some 70 catalog blocks, and its first statements a few
    # more: poll, wait, poll, and they are in pg_stat_io before the window's first poll.
    if not await worker.poll():
        raise recorder.unreachable(target)
    await asyncio.sleep(STATS_FLUSH)
    await worker.poll()
    recorder.start()
    loop = asyncio.get_running_loop()
    started = time.time()
    end = loop.time() + duration
    shown = None
    if progress is not None:
        shown = asyncio.create_task(_report_progress(recorder, end, progress))
    try:
        await worker.run(until=end)
    finally:
        if shown is not None:
            shown.cancel()
    if recorder.server is None:
        raise recorder.unreachable(target)
    return summarise(recorder, recorder.server, target.name, started, sample_interval)


def summarise(
    recorder: Recorder, server: ServerVersion, target: str, started: float, sample_interval: float
) -> Summary:
    """The window `recorder` was handed, from `started` to now, as the report's Summary; `server`
    is the version one of its polls read (a window without any has no summary)."""
    facts = server_facts(server, recorder.settings)
    # An absent pg_stat_statements is no view the report failed to read: the workload's basis
    # names it (DB time per transaction instead) with its reason.
    unseen = [
        f"{c}: {message} ({kind})"
        for c, (kind, message) in sorted(recorder.failures.items())
        if kind != "absent"
    ]
    if not facts.has_pg_stat_io:
        unseen.append("pg_stat_io: needs PostgreSQL 16 or newer: no read figures")
    watched = recorder.activity(sample_interval)
    not_read = recorder.not_read()
    read_batches, write_batches = recorder.io_batches()
    absent = recorder.failures.get(pg_stat_statements.PgStatStatementsCollector.name)
    if recorder.statements.hidden:
        unseen.append(
            f"pg_stat_statements: {recorder.statements.hidden} statements of other users"
            " hidden (grant pg_read_all_stats, in pg_monitor): left out of workload time"
        )
    return Summary(
        target=target,
        started_at=started,
        ended_at=recorder.clock(),
        server=facts,
        rows=recorder.reads.rows,
        read_seconds=recorder.reads.seconds,
        timed=recorder.reads.timed,
        activity=watched,
        resets=tuple(recorder.reads.resets),
        restarts=recorder.reads.restarts,
        not_visible=tuple(unseen),
        not_read=not_read,
        workload=recorder.statements.workload(absent[1] if absent is not None else None),
        writes=(
            None
            if pg_stat_io.PgStatIoCollector.name in not_read
            else recorder.writes(write_batches)
        ),
        series=series.to_json(recorder.series, facts.settings.get("io_combine_limit_bytes")),
        read_batches=read_batches,
    )

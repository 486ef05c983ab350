"""The report's window: the exporter's own worker and collectors on one connection, polled every
POLL_EVERY seconds and at the end, sampled every sample interval, then summarised.

Nothing here queries PostgreSQL by itself: the worker runs the registry's collectors, as the
exporter does, and a tap hands this module their rows and failures.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from pg_aio_exporter.collectors import checkpointer, pg_stat_io, pg_stat_wal, server, settings
from pg_aio_exporter.collectors.activity import ActivityCollector
from pg_aio_exporter.collectors.base import Row
from pg_aio_exporter.collectors.intervals import ReadWindow, WalWindow
from pg_aio_exporter.collectors.pg_aios import PgAiosCollector
from pg_aio_exporter.config.targets import Target
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.sampler import Sampler
from pg_aio_exporter.poll.worker import TargetWorker
from pg_aio_exporter.report.summary import Activity, ServerFacts, Summary
from pg_aio_exporter.report.written import Checkpoints, Writes

# pg_stat_io is read this often within the window (and at its end): a stats reset or restart
# then costs one interval, not the window. One poll costs the server about what 2 samples do.
POLL_EVERY = 10.0
PROGRESS_EVERY = 1.0
# PostgreSQL adds a backend's I/O to pg_stat_io when it goes idle, at most once a second.
STATS_FLUSH = 1.1

Progress = Callable[[float, int], None]  # seconds left, samples taken


# What a failed connection was, by the worker's error kind; anything else: unreachable.
CAUSES = {
    "auth": "login refused",
    "timeout": "no answer in time",
    "unsupported": "server not supported",
}


class Unreachable(Exception):
    """The server could not be reached or the role could not log in; str() is one line."""


class Recorder:
    """The tap: what the window's polls read, and what failed."""

    def __init__(self) -> None:
        self.reads = ReadWindow()
        self.wal = WalWindow()
        self.wal_seen = False  # the pg_stat_wal collector answered (PostgreSQL 14+)
        self.checkpoints: list[Row] = []  # the window's first and last checkpointer row
        self.server_rows: list[Row] = []
        self.settings_rows: list[Row] = []
        self.failures: dict[str, tuple[str, str]] = {}  # collector -> kind, the last message

    def start(self) -> None:
        """Forget the reads seen so far: the window starts now."""
        self.reads = ReadWindow()
        self.wal = WalWindow()
        self.checkpoints = []

    def polled(self, collector: str, rows: list[Row], read_at: float) -> None:
        if collector == pg_stat_io.PgStatIoCollector.name:
            snapshot = pg_stat_io.read_snapshot(rows)
            if snapshot is not None:
                self.reads.observe(snapshot, read_at)
        elif collector == pg_stat_wal.PgStatWalCollector.name:
            wal = pg_stat_wal.wal_snapshot(rows)
            if wal is not None:
                self.wal_seen = True
                self.wal.observe(wal, read_at)
        elif collector == checkpointer.CheckpointerCollector.name and rows:
            self.checkpoints = [*self.checkpoints[:1], rows[0]]
        elif collector == server.ServerCollector.name:
            self.server_rows = rows
        elif collector == settings.SettingsCollector.name:
            self.settings_rows = rows

    def writes(self) -> Writes:
        """The window's write side, read and WAL counts alike."""
        return Writes(
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

    def failed(self, collector: str, kind: str, message: str) -> None:
        self.failures[collector] = (kind, message)

    def unreachable(self, target: Target) -> Unreachable:
        kind, message = self.failures.get("connection", ("connection", "no poll succeeded"))
        cause = CAUSES.get(kind, "server unreachable")
        return Unreachable(f"cannot connect to {target.address}: {cause}: {message}")


def server_facts(server_rows: list[Row], settings_rows: list[Row]) -> ServerFacts:
    version = server_rows[0]
    values: dict[str, float] = {}
    io_method, io_methods, pending = None, (), []
    for row in settings_rows:
        name = row["name"]
        if row["pending_restart"]:
            pending.append(name)
        if name in settings.SETTINGS:
            key = settings.SETTINGS[name].removeprefix("pg_settings_")
            values[key] = settings.setting_value(row["setting"], row["unit"], row["vartype"])
        elif name == "io_method":
            io_method, io_methods = row["setting"], tuple(row["enumvals"] or [row["setting"]])
    return ServerFacts(
        version=version["version"],
        version_num=version["version_num"],
        settings=values,
        io_method=io_method,
        io_methods=io_methods,
        pending_restart=tuple(sorted(pending)),
    )


def activity(sampler: Sampler, sample_interval: float) -> Activity:
    waits = next(c for c in sampler.collectors if isinstance(c, ActivityCollector))
    aios = next(c for c in sampler.collectors if isinstance(c, PgAiosCollector))
    return Activity(
        samples=sampler.samples,
        sample_interval=sample_interval,
        wait_samples=dict(waits.wait_events),
        io_workers=waits.io_workers,
        io_worker_slots=waits.slots,
        io_worker_busy=waits.busy,
        in_flight=dict(aios.in_flight),
        in_flight_max=dict(aios.peak),
    )


async def _report_progress(sampler: Sampler, end: float, progress: Progress) -> None:
    loop = asyncio.get_running_loop()
    while True:
        progress(max(0.0, end - loop.time()), sampler.samples)
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
    # The worker logs each failure; the report states them itself.
    logging.getLogger("pg_aio_exporter").setLevel(logging.CRITICAL)
    recorder = Recorder()
    selfmetrics = SelfMetrics()
    worker = TargetWorker(
        target,
        Exposition(selfmetrics),
        selfmetrics,
        poll_interval=POLL_EVERY,
        sample_interval=sample_interval,
        timeout=timeout,
        tap=recorder,
    )
    sampler = worker.sampler
    assert sampler is not None, "the report always samples"
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
        shown = asyncio.create_task(_report_progress(sampler, end, progress))
    try:
        await worker.run(until=end)
    finally:
        if shown is not None:
            shown.cancel()
    if not recorder.server_rows:
        raise recorder.unreachable(target)
    facts = server_facts(recorder.server_rows, recorder.settings_rows)
    unseen = [
        f"{c}: {message} ({kind})" for c, (kind, message) in sorted(recorder.failures.items())
    ]
    if not facts.has_pg_stat_io:
        unseen.append("pg_stat_io: needs PostgreSQL 16 or newer: no read figures")
    return Summary(
        target=target.name,
        started_at=started,
        ended_at=time.time(),
        server=facts,
        rows=recorder.reads.rows,
        read_seconds=recorder.reads.seconds,
        timed=recorder.reads.timed,
        activity=activity(sampler, sample_interval),
        resets=tuple(recorder.reads.resets),
        restarts=recorder.reads.restarts,
        not_visible=tuple(unseen),
        writes=recorder.writes(),
    )

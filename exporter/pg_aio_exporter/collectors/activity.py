"""pg_stat_activity, sampled: what every process is doing, and how busy the io workers are.

Classification ("doing work") follows Active Session History: an active client backend, and a
parallel worker running part of its statement, counts whatever it waits on (no wait = on CPU);
any other process counts unless it rests: in its idle main-loop wait, asleep, waiting on its
peer or in an extension's wait (vocabulary.RESTING_WAIT_CLASSES), so that a spread checkpoint,
a throttled autovacuum, a logical walsender waiting for WAL or pg_cron's idle launcher is no
active session. io workers are busy unless in IoWorkerMain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10
from pg_aio_exporter.vocabulary import (
    CLIENT_BACKEND,
    IO_WORKER,
    IO_WORKER_IDLE,
    RESTING_WAIT_CLASSES,
    WAIT_LABELS,
    WAL_SYNC,
    WORKLOAD_BACKENDS,
)

# Grouping on the server keeps the reply small and constant: its size depends on the variety
# of states, not on the number of sessions. A process this role may not see (no pg_monitor) is
# marked by PostgreSQL itself: every column NULL but the user and the database, and the query
# '<insufficient privilege>'. A NULL state alone is no sign of it: a superuser sees a client
# starting up that way (or as 'starting' on 18), and a background worker's type is NULL if it
# exits while being read.
SQL = (
    "SELECT backend_type, state, wait_event_type, wait_event,"
    " (backend_type IS NULL AND query = '<insufficient privilege>') AS hidden,"
    " count(*)::int AS n"
    " FROM pg_stat_activity WHERE pid <> pg_backend_pid() GROUP BY 1, 2, 3, 4, 5"
)


@dataclass(frozen=True, slots=True)
class ActivityRow:
    backend_type: str | None
    state: str | None
    wait_event_type: str | None
    wait_event: str | None
    hidden: bool
    n: int


CPU = "CPU"
WORKING_CLIENT_STATES = frozenset({"active", "fastpath function call"})

WaitKey = tuple[str, str, str]  # backend_type, wait_event_type, wait_event


@dataclass
class ActivitySample:
    working: Counter[WaitKey] = field(default_factory=Counter)
    io_workers: int = 0
    io_workers_busy: int = 0
    clients: int = 0  # client backends connected, working or idle
    # client backends idle inside a transaction: between its statements, waiting on the client
    in_transaction: int = 0
    wal_syncing: int = 0  # processes in a WAL sync, io workers aside
    hidden: int = 0  # processes whose details this role may not see (no pg_monitor)


def is_working(backend_type: str, state: str | None, wait_event_type: str | None) -> bool:
    if backend_type == CLIENT_BACKEND:
        return state in WORKING_CLIENT_STATES
    if state is not None and state.startswith("idle"):
        return False  # background workers and walsenders that run sessions
    return backend_type in WORKLOAD_BACKENDS or wait_event_type not in RESTING_WAIT_CLASSES


def is_io_worker_busy(wait_event_type: str | None, wait_event: str | None) -> bool:
    return (wait_event_type, wait_event) != IO_WORKER_IDLE


def classify(rows: list[ActivityRow]) -> ActivitySample:
    sample = ActivitySample()
    for row in rows:
        backend_type, state = row.backend_type, row.state
        wait_type, wait, count = row.wait_event_type, row.wait_event, row.n
        if row.hidden:
            sample.hidden += count
            continue
        if backend_type is None:
            continue  # a background worker that exited as it was read: nothing to classify
        if backend_type == CLIENT_BACKEND:
            sample.clients += count
            if state is not None and state.startswith("idle in transaction"):
                sample.in_transaction += count
        if backend_type == IO_WORKER:
            sample.io_workers += count
            if is_io_worker_busy(wait_type, wait):
                sample.io_workers_busy += count
        if is_working(backend_type, state, wait_type):
            sample.working[(backend_type, wait_type or CPU, wait or CPU)] += count
            if wait_type == "IO" and wait in WAL_SYNC and backend_type != IO_WORKER:
                sample.wal_syncing += count
    return sample


@dataclass
class _Window:
    busy: int = 0
    slots: int = 0  # io workers seen, summed over samples
    wal_syncing: int = 0  # processes in a WAL sync, summed over samples


class ActivityCollector:
    name = "activity"
    since = PG10
    labels = WAIT_LABELS
    families = (
        "pg_aio_wait_event_samples_total",
        "pg_aio_wal_sync_sampled_seconds_total",
        "pg_aio_io_worker_busy_samples_total",
        "pg_aio_io_worker_samples_total",
        "pg_aio_io_workers",
        "pg_aio_io_worker_utilization_ratio",
    )
    row_type = ActivityRow

    def __init__(self) -> None:
        self.wait_events: Counter[WaitKey] = Counter()
        self.io_workers: int | None = None  # in the last sample; None: no io worker seen
        self.busy = 0
        self.slots = 0  # io workers seen, summed over samples: the utilisation denominator
        self.clients = 0  # client backends connected, summed over samples
        self.in_transaction = 0  # client backends idle inside a transaction, summed over samples
        self.utilization: float | None = None
        # Seconds processes spent in a WAL sync by the samples, up to the last poll: it moves
        # with pg_aio_wal_syncs_total, so that their increases over one scrape interval are
        # the same poll intervals' (the sampled counters move every sample, the polled ones
        # every poll: a ratio of the two over a 15 s interval would halve or double).
        self.wal_sync_seconds = 0.0
        self._window = _Window()

    def query(self, version_num: int) -> str | None:
        return SQL

    def observe(self, rows: list[ActivityRow], version_num: int) -> str | None:
        seen = classify(rows)
        self.wait_events.update(seen.working)
        # One rule for every case without io workers: before 18, with io_method sync or
        # io_uring, and for a role that cannot see background processes (no pg_monitor), the
        # io worker metrics are absent, never 0.
        self.io_workers = seen.io_workers or None
        self.busy += seen.io_workers_busy
        self.slots += seen.io_workers
        self.clients += seen.clients
        self.in_transaction += seen.in_transaction
        self._window.busy += seen.io_workers_busy
        self._window.slots += seen.io_workers
        self._window.wal_syncing += seen.wal_syncing
        if seen.hidden:
            return f"{seen.hidden} processes hidden from this role: grant it pg_monitor"
        return None

    def totals(self) -> dict[str, Any]:
        return {
            "wait_samples": dict(self.wait_events),
            "io_workers": self.io_workers,
            "io_worker_slots": self.slots,
            "io_worker_busy": self.busy,
            "client_slots": self.clients,
            "client_in_transaction_slots": self.in_transaction,
        }

    def roll_window(self, samples: int, seconds: float) -> None:
        window, self._window = self._window, _Window()
        self.utilization = window.busy / window.slots if window.slots else None
        if samples:  # the average processes in a WAL sync over the window, times its length
            self.wal_sync_seconds += window.wal_syncing / samples * seconds

    def collect_counters(self, out: MetricSet) -> None:
        for (backend_type, wait_type, wait), count in sorted(self.wait_events.items()):
            out.counter(
                "pg_aio_wait_event_samples",
                "Sampled processes doing work, by wait event (CPU = no wait);"
                " rate / rate(samples) = average active sessions.",
                count,
                backend_type=backend_type,
                wait_event_type=wait_type,
                wait_event=wait,
            )
        out.counter(
            "pg_aio_wal_sync_sampled_seconds",
            "Seconds processes (io workers aside) spent in a WAL sync (IO/WalSync), by the"
            " samples; advanced at each poll, with pg_aio_wal_syncs_total.",
            self.wal_sync_seconds,
        )
        if self.io_workers is not None:
            out.counter(
                "pg_aio_io_worker_busy_samples",
                "Sum over io workers of samples where the worker was not idle.",
                self.busy,
            )
            # Utilisation over any window is rate(busy) / rate(this), exact while the pool
            # is resized (io_workers is reloadable; PostgreSQL 19 sizes it by itself).
            out.counter(
                "pg_aio_io_worker_samples",
                "io workers seen, summed over samples: the denominator of utilisation.",
                self.slots,
            )

    def collect_gauges(self, out: MetricSet) -> None:
        if self.io_workers is None:
            return
        out.gauge(
            "pg_aio_io_workers", "io worker processes seen in the last sample.", self.io_workers
        )
        if self.utilization is not None:
            out.gauge(
                "pg_aio_io_worker_utilization_ratio",
                "Busy io worker samples / (samples x workers) over the last poll interval.",
                self.utilization,
            )

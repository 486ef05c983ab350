"""Stage 0, the words: what PostgreSQL calls the things the exporter, the report, the alert rules
(alerts/) and the dashboards (dashboards/) all talk about, and the sizes they convert by. Each is
defined here once and imported everywhere else; of the package it imports only versions.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from pg_aio_exporter.versions import PG17, PG18

# --- sizes -------------------------------------------------------------------------------------

BLOCK_BYTES = 8192  # one block (PostgreSQL's default BLCKSZ): what one uncombined read covers
MIB = 1024 * 1024
# Seconds per unit of a duration as Prometheus writes it (30s, 5m, 1d): the rules' windows; the
# exporter's own flags and config take the first four.
DURATION_UNITS: Mapping[str, float] = {
    "ms": 0.001,
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
    "w": 604800,
    "y": 31536000,
}

# --- backend types (pg_stat_activity.backend_type, pg_stat_io.backend_type) -------------------

CLIENT_BACKEND = "client backend"
IO_WORKER = "io worker"  # PostgreSQL 18's io_method=worker processes
# A background worker running part of a client's statement (its bgw_type, which
# pg_stat_activity shows as the backend type; parallel VACUUM's workers among them).
PARALLEL_WORKER = "parallel worker"
# The processes that run the clients' statements: their time is the workload's, whatever they
# wait on (Active Session History: a client's waits on a lock, its peer or pg_sleep are its
# response time).
WORKLOAD_BACKENDS = frozenset({CLIENT_BACKEND, PARALLEL_WORKER})

# --- pg_stat_io rows ---------------------------------------------------------------------------

IO_LABELS = ("backend_type", "object", "context")  # the labels of a pg_stat_io row's series
WAL_OBJECT = "wal"  # PostgreSQL 18's pg_stat_io rows of WAL I/O (object 'wal')


class BufferRows(NamedTuple):
    """pg_stat_io's rows of shared buffers written back to their relation (not bulk rings, not
    WAL): who writes these says whether the background writer keeps up."""

    object: str
    context: str


BUFFER_WRITES = BufferRows(object="relation", context="normal")


@dataclass(frozen=True)
class WriteOperation:
    """A write operation of pg_stat_io, named as its columns are: `<name>s` (operations),
    `<name>_bytes` (PostgreSQL 18; only where it moves bytes) and `<name>_time`."""

    name: str
    moves_bytes: bool

    @property
    def count(self) -> str:
        return f"{self.name}s"

    @property
    def bytes(self) -> str | None:
        return f"{self.name}_bytes" if self.moves_bytes else None

    @property
    def time(self) -> str:
        return f"{self.name}_time"


# By name, in pg_stat_io's column order. fsync moves no bytes of its own, and writebacks are
# requests to flush blocks written before.
WRITE_OPERATIONS: Mapping[str, WriteOperation] = {
    op.name: op
    for op in (
        WriteOperation("write", moves_bytes=True),
        WriteOperation("extend", moves_bytes=True),
        WriteOperation("writeback", moves_bytes=False),
        WriteOperation("fsync", moves_bytes=False),
    )
}

# --- wait events (pg_stat_activity.wait_event_type / wait_event) -------------------------------

WAIT_LABELS = ("backend_type", "wait_event_type", "wait_event")  # the sampler's wait series
SYNC_READ = "DataFileRead"  # an IO wait: a backend reading by itself
SUBMISSION_QUEUE = "AioWorkerSubmissionQueue"  # an LWLock: waiting to hand reads to io workers
IDLE_WAIT_CLASS = "Activity"  # the class of every main loop's idle wait
# Deliberate sleeps (CheckpointWriteDelay, VacuumDelay, PgSleep, ...): no process in one is
# working, and none is paced by anything but its own schedule.
SLEEP_WAIT_CLASS = "Timeout"
# The classes in which a process outside WORKLOAD_BACKENDS does no work: its main loop's idle
# wait; a sleep (a spread checkpoint's CheckpointWriteDelay, a throttled autovacuum's
# VacuumDelay); a wait on its peer (Client: a walsender waiting for WAL to send,
# WalSenderWaitForWal, or for its receiver, WalSenderWriteData; a walreceiver waiting on its
# primary); and an extension's wait, the only class an extension's background worker can name
# its idle loop in (pg_cron's launcher: Extension/Extension).
RESTING_WAIT_CLASSES = frozenset({IDLE_WAIT_CLASS, SLEEP_WAIT_CLASS, "Client", "Extension"})
IO_WORKER_IDLE = (IDLE_WAIT_CLASS, "IoWorkerMain")  # an io worker's idle wait (class, event)

WaitEvent = tuple[str, str]  # (wait_event_type, wait_event): a wait event and its class
WAL_FLUSH_QUEUE = "WALWrite"  # an LWLock: a session queueing behind another's WAL flush

# The WAL file I/O waits (class IO), by PostgreSQL 17's names: 17 renamed 14-16's IO/WALWrite,
# WALSync, WALInitWrite, WALInitSync (wait_event.c) to WalWrite, WalSync, WalInitWrite,
# WalInitSync (wait_event_names.txt). The LWLock WALWrite (WAL_FLUSH_QUEUE) kept its name, so on
# 14-16 "WALWrite" is two events, one in each class.
WAL_IO_RENAMED_IN_17: Mapping[str, str] = {
    "WalWrite": "WALWrite",
    "WalSync": "WALSync",
    "WalInitWrite": "WALInitWrite",
    "WalInitSync": "WALInitSync",
}
# A WAL sync (issue_xlog_fsync), class IO, by both names: the wait of every commit's flush.
WAL_SYNC = frozenset({"WalSync", WAL_IO_RENAMED_IN_17["WalSync"]})
DATA_FILE_IO = (  # the data file I/O waits (class IO), the same name on every version
    SYNC_READ,
    "DataFilePrefetch",
    "DataFileWrite",
    "DataFileExtend",
    "DataFileFlush",
    "DataFileSync",
    "DataFileImmediateSync",
)
AIO_IO = ("AioIoCompletion", "AioIoUringSubmit", "AioIoUringExecution")  # 18+, class IO


def wait_events(version_num: int) -> frozenset[WaitEvent]:
    """The wait events the package names, as a server of this version reports them: for a
    server without pg_wait_events (16 and earlier) and a saved report. A 17+ server says it
    itself (collectors/pg_wait_events.py decides which applies); 19 moves some events the
    package does not name to other classes (versions.PG19)."""
    wal = WAL_IO_RENAMED_IN_17 if version_num >= PG17 else WAL_IO_RENAMED_IN_17.values()
    events = {("IO", event) for event in (*DATA_FILE_IO, *wal)} | {("LWLock", WAL_FLUSH_QUEUE)}
    if version_num >= PG18:
        events |= {("IO", event) for event in AIO_IO}
        events |= {("LWLock", SUBMISSION_QUEUE), IO_WORKER_IDLE}
    return frozenset(events)

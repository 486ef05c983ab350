"""pg_stat_activity, sampled: what every process is doing right now, grouped on the server.

Classification ("doing work") follows Active Session History: an active client backend counts
whatever it waits on (no wait = on CPU); a background process counts unless it sits in its idle
main-loop wait (wait_event_type Activity). io workers are busy unless in IoWorkerMain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pg_aio_exporter.collectors import Row

# Grouping on the server keeps the reply small and constant: its size depends on the variety
# of states, not on the number of sessions.
SQL = (
    "SELECT backend_type, state, wait_event_type, wait_event, count(*)::int AS n"
    " FROM pg_stat_activity WHERE pid <> pg_backend_pid() GROUP BY 1, 2, 3, 4"
)

CLIENT = "client backend"
IO_WORKER = "io worker"
CPU = "CPU"
WORKING_CLIENT_STATES = frozenset({"active", "fastpath function call"})

WaitKey = tuple[str, str, str]  # backend_type, wait_event_type, wait_event


@dataclass
class ActivitySample:
    working: Counter[WaitKey] = field(default_factory=Counter)
    io_workers: int = 0
    io_workers_busy: int = 0
    hidden: int = 0  # processes whose details this role may not see (no pg_monitor)


def is_working(backend_type: str, state: str | None, wait_event_type: str | None) -> bool:
    if backend_type == CLIENT:
        return state in WORKING_CLIENT_STATES
    if state is not None and state.startswith("idle"):
        return False  # background workers and walsenders that run sessions
    return wait_event_type != "Activity"


def is_io_worker_busy(wait_event_type: str | None, wait_event: str | None) -> bool:
    return not (wait_event_type == "Activity" and wait_event == "IoWorkerMain")


def classify(rows: list[Row]) -> ActivitySample:
    sample = ActivitySample()
    for row in rows:
        backend_type, state = row["backend_type"], row["state"]
        wait_type, wait, count = row["wait_event_type"], row["wait_event"], row["n"]
        # Without pg_read_all_stats, other users' sessions and all background processes show
        # NULL in every column but pid: nothing to classify.
        if backend_type is None or (backend_type == CLIENT and state is None):
            sample.hidden += count
            continue
        if backend_type == IO_WORKER:
            sample.io_workers += count
            if is_io_worker_busy(wait_type, wait):
                sample.io_workers_busy += count
        if is_working(backend_type, state, wait_type):
            sample.working[(backend_type, wait_type or CPU, wait or CPU)] += count
    return sample

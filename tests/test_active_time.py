"""Active time on a real PostgreSQL 18 (issue 49): one client scanning on slow storage, beside a
spread checkpoint (the checkpointer asleep in Timeout/CheckpointWriteDelay) and a throttled
autovacuum (Timeout/VacuumDelay). Neither sleeper works, so the client's read wait is all of the
active time: storage-bound, in the report and in the exported samples the rule divides."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from harness import Exporter, Samples, scanning, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from slowread import ONE_IO_WORKER, SlowReads
from test_report import run_report

SLOW_US = 4000  # 4 ms per read: slow for the default storage class
SLEEPERS = {
    ("checkpointer", "CheckpointWriteDelay"),
    ("autovacuum worker", "VacuumDelay"),
}
SETTINGS = {
    **ONE_IO_WORKER,  # 16 MB of shared buffers: the scanned table comes from storage
    # A timed checkpoint 30 s after the last, its writes spread over 27 s: the checkpointer
    # writes a buffer, then sleeps 100 ms while it is ahead of that schedule.
    "checkpoint_timeout": "30s",
    "checkpoint_completion_target": "0.9",
    "max_wal_size": "1GB",
    "bgwriter_lru_maxpages": "0",  # the dirty buffers stay for the checkpoint
    # An autovacuum that sleeps after every page.
    "autovacuum_naptime": "1s",
    "autovacuum_vacuum_cost_delay": "100ms",
    "autovacuum_vacuum_cost_limit": "1",
}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[LocalServer, SlowReads]]:
    server = LocalServer.create(settings=SETTINGS)
    shim = SlowReads(server)
    server.start()
    create_table(server.dsn(), 32, "scanned")
    create_table(server.dsn(), 4, "updated")
    yield server, shim
    server.destroy()


def sleepers(dsn: str) -> set[tuple[str, str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT backend_type, wait_event FROM pg_stat_activity"
            " WHERE wait_event_type = 'Timeout'"
        ).fetchall()
    return {(str(t), str(e)) for t, e in rows} & SLEEPERS


class Watch:
    """pg_stat_activity read by the test itself twice a second: how often each sleeper slept."""

    def __init__(self, dsn: str) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()
        self.looks = 0
        self._dsn = dsn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.seen.update(sleepers(self._dsn))
            self.looks += 1

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def storage_share(before: Samples, after: Samples) -> float:
    """PgAioStorageSaturated's share, by hand from the sampled counters: the samples of
    processes doing work, io workers aside (they read for the others). No client sleeps here,
    so the rule leaves nothing else out: a sleeper the sampler counted would count."""
    reads = {"DataFileRead", "DataFilePrefetch", "AioIoCompletion"}
    grown = {"active": 0.0, "reads": 0.0}
    for key, value in after["pg_aio_wait_event_samples_total"].items():
        labels = dict(key)
        if labels["backend_type"] == "io worker":
            continue
        n = value - before["pg_aio_wait_event_samples_total"].get(key, 0.0)
        grown["active"] += n
        if labels["wait_event_type"] == "IO" and labels["wait_event"] in reads:
            grown["reads"] += n
    return grown["reads"] / grown["active"]


def test_sleeping_processes_are_no_active_time(server: tuple[LocalServer, SlowReads]) -> None:
    pg, shim = server
    dsn = pg.dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # the next, timed one starts 30 s from now
        conn.execute("UPDATE updated SET payload = payload || 'x'")  # dirty; dead for vacuum
    exp = Exporter("--dsn", dsn, "--poll-interval", "1s", "--sample-interval", "100ms")
    shim.set_delay(SLOW_US)
    try:
        with scanning(dsn, ["scanned"], settle=1, release=lambda: shim.set_delay(0)):
            wait_for(lambda: sleepers(dsn) == SLEEPERS, 45, "a spread checkpoint and autovacuum")
            with Watch(dsn) as watch:
                before = exp.wait_poll()
                result = run_report(
                    "--dsn",
                    dsn,
                    "--duration",
                    "10s",
                    "--sample-interval",
                    "100ms",
                    "--format",
                    "json",
                )
                after = exp.wait_poll()
    finally:
        shim.set_delay(0)
        exp.stop()
    assert result.returncode == 0, result.stderr
    # The scenario held: each sleeper asleep in most of the test's own looks.
    assert all(watch.seen[s] >= 0.7 * watch.looks for s in SLEEPERS), (watch.seen, watch.looks)
    doc = json.loads(result.stdout)
    activity = doc["activity"]
    print(f"[active time] report share {activity['read_wait_share']:.3f}", activity["wait_events"])
    print(f"[active time] exported share {storage_share(before, after):.3f}")
    # One client, its time all but spent waiting on 4 ms reads: storage-bound, not 1/3.
    assert activity["read_wait_share"] > 0.8, activity
    assert storage_share(before, after) > 0.8, after["pg_aio_wait_event_samples_total"]
    assert "storage_saturated" in {f["id"] for f in doc["findings"]}, doc["findings"]

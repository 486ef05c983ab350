"""The sampler on real PostgreSQL 18 servers: slow storage made real with the read-delay shim."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import psycopg
import pytest

from cpu import CpuWatch, assert_overruns_explained, backend_pids
from harness import Exporter, Samples, client_wait, in_flight, labels, scanning, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from proxy import Proxy
from slowread import ONE_IO_WORKER, SlowReads

SLOW_US = 4000
T = labels(target="default")


@pytest.fixture(scope="module")
def slow_server() -> Iterator[tuple[LocalServer, SlowReads]]:
    server = LocalServer.create(settings=ONE_IO_WORKER)
    shim = SlowReads(server)
    server.start()
    for table in TABLES:
        create_table(server.dsn(), 32, table)
    yield server, shim
    server.destroy()


# One table per scanning client. Two scans of one table synchronize (synchronize_seqscans)
# and then wait on each other's reads of the same buffer, which PostgreSQL reports as
# IO/AioIoCompletion even with io_method=sync: real, but not what these tests look at.
TABLES = ("scan_a", "scan_b")


def run_slow_phase(server: LocalServer, shim: SlowReads) -> tuple[Samples, Samples]:
    """Two concurrent sequential scans on slow storage; scrapes before and after 6 s of it."""
    exp = Exporter("--dsn", server.dsn(), "--poll-interval", "2s", "--sample-interval", "100ms")
    shim.set_delay(SLOW_US)
    try:
        with scanning(server.dsn(), TABLES, settle=1, release=lambda: shim.set_delay(0)):
            before = exp.wait_poll()
            time.sleep(6)
            after = exp.wait_poll()
    finally:
        shim.set_delay(0)
        exp.stop()
    return before, after


def test_worker_io_method_on_slow_storage(slow_server: tuple[LocalServer, SlowReads]) -> None:
    server, shim = slow_server
    before, after = run_slow_phase(server, shim)
    assert client_wait(after, "IO", "AioIoCompletion") > client_wait(
        before, "IO", "AioIoCompletion"
    )
    assert after["pg_aio_io_workers"][T] == 1
    utilization = after["pg_aio_io_worker_utilization_ratio"][T]
    assert 0.5 < utilization <= 1.0, utilization
    assert in_flight(after, "readv") > in_flight(before, "readv")
    assert after["pg_aio_in_flight_max"][labels(target="default", operation="readv")] >= 1
    # io workers do the reading: they, not the clients, are seen in DataFileRead.
    worker_reads = labels(
        target="default", backend_type="io worker", wait_event_type="IO", wait_event="DataFileRead"
    )
    assert after["pg_aio_wait_event_samples_total"][worker_reads] > 0
    assert_consistent(after, processes=count_processes(server))


def test_sync_io_method_on_slow_storage(slow_server: tuple[LocalServer, SlowReads]) -> None:
    server, shim = slow_server
    server.configure({"io_method": "sync"})
    server.restart()
    try:
        before, after = run_slow_phase(server, shim)
    finally:
        server.configure({"io_method": "worker"})
        server.restart()
    own_reads = client_wait(after, "IO", "DataFileRead") - client_wait(before, "IO", "DataFileRead")
    others_io = client_wait(after, "IO", "AioIoCompletion")
    assert own_reads > 10
    # With sync the backends read themselves. A stray AioIoCompletion sample can still appear:
    # a backend waiting for another process' I/O on the same buffer (e.g. the background
    # writer flushing a page the scan wants) — a few percent at most, against the
    # worker-mode test where it is what clients wait on.
    assert others_io <= 0.05 * own_reads, (others_io, own_reads)
    no_workers = [name for name in after if name.startswith("pg_aio_io_worker")]
    assert no_workers == [], "no io workers: their metrics are absent, not 0"


def count_processes(server: LocalServer) -> int:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity").fetchone()
    assert row is not None
    return int(row[0])


def assert_consistent(samples: Samples, processes: int) -> None:
    total = samples["pg_aio_sampler_samples_total"][T]
    waits = samples.get("pg_aio_wait_event_samples_total", {})
    for key, value in waits.items():
        assert 0 <= value <= total * processes, (key, value, total)
    assert sum(waits.values()) <= total * processes
    busy = samples["pg_aio_io_worker_busy_samples_total"][T]
    assert busy <= samples["pg_aio_io_worker_samples_total"][T]
    # The pool kept its size: every sample saw all of it.
    assert samples["pg_aio_io_worker_samples_total"][T] == total * samples["pg_aio_io_workers"][T]
    utilization = samples.get("pg_aio_io_worker_utilization_ratio", {}).get(T, 0.0)
    assert 0.0 <= utilization <= 1.0


SAMPLES = "pg_aio_sampler_samples_total"
OVERRUNS = "pg_aio_exporter_sample_overruns_total"
STALLS = "pg_aio_exporter_sample_stalls_total"


def counted(samples: Samples, counter: str) -> float:
    """The target's counter, 0 before its first increment (when it has no series yet)."""
    return samples.get(counter, {}).get(T, 0.0)


@pytest.mark.timing
def test_idle_server() -> None:
    server = LocalServer.create()
    server.start()
    exp = Exporter("--dsn", server.dsn(), "--poll-interval", "1s", "--sample-interval", "100ms")
    try:
        # Asked before the window: the asking connection is itself an active client backend,
        # which a sample in the window caught under load (2026-11-28 CI rehearsal).
        pids = [exp.proc.pid, *backend_pids(server.dsn())]
        first = exp.wait_poll()
        watch = CpuWatch(lambda: pids)
        time.sleep(4)
        last = exp.wait_poll()
        starved = watch.starved()
        # The sample counters are published with each poll: the window is the polls' own.
        elapsed = (
            last["pg_aio_exporter_last_poll_success_timestamp_seconds"][T]
            - first["pg_aio_exporter_last_poll_success_timestamp_seconds"][T]
        )
        taken, overran, stalled = (
            counted(last, name) - counted(first, name) for name in (SAMPLES, OVERRUNS, STALLS)
        )
        # Every tick is a sample, a stall (the exporter woke late) or an overrun.
        ticks = taken + stalled + overran
        assert ticks == pytest.approx(elapsed / 0.1, rel=0.10), (taken, stalled, overran, elapsed)
        assert taken >= 0.5 * ticks, (taken, ticks, str(starved))
        assert_overruns_explained(overran, starved, slot=0.1)
        assert last["pg_aio_io_worker_utilization_ratio"][T] == 0
        assert last["pg_aio_io_workers"][T] == 3
        assert last.get("pg_aio_wait_event_samples_total", {}) == {}, "an idle server is idle"
        assert_consistent(last, processes=count_processes(server))
    finally:
        exp.stop()
        server.destroy()


@pytest.mark.timing
def test_stalled_exporter_is_no_overrun() -> None:
    """Ticks that pass while the exporter gets no CPU are stalls: no query ran long."""
    server = LocalServer.create()
    server.start()
    # 1 s samples of an idle server take milliseconds: the stop almost surely falls between two.
    exp = Exporter("--dsn", server.dsn(), "--poll-interval", "30s", "--sample-interval", "1s")
    try:
        before = exp.wait_poll()
        stopped = time.monotonic()
        exp.proc.send_signal(signal.SIGSTOP)
        time.sleep(3.5)
        exp.proc.send_signal(signal.SIGCONT)
        stopped = time.monotonic() - stopped
        time.sleep(1.5)
        after = exp.scrape()
        assert counted(after, OVERRUNS) == counted(before, OVERRUNS)
        # The sample due first after the stop is taken late; the ones due after it, until the
        # exporter woke, are stalls: 2 or 3 in a 3.5 s stop, fewer than its seconds in any.
        stalled = counted(after, STALLS) - counted(before, STALLS)
        assert 2 <= stalled < stopped, (stalled, stopped)
    finally:
        exp.stop()
        server.destroy()


@contextmanager
def behind_proxy(
    delay: float, poll: str, sample: str
) -> Iterator[tuple[LocalServer, Proxy, Exporter]]:
    """A new server, a proxy that delays its replies `delay` s, an exporter through the proxy."""
    with ExitStack() as cleanup:
        server = LocalServer.create()
        cleanup.callback(server.destroy)
        server.start()
        proxy = Proxy(server.port)
        cleanup.callback(proxy.stop)
        proxy.delay = delay
        dsn = server.dsn().replace(f"port={server.port}", f"port={proxy.port}")
        exp = Exporter("--dsn", dsn, "--poll-interval", poll, "--sample-interval", sample)
        cleanup.callback(exp.stop)
        yield server, proxy, exp


@pytest.mark.timing
def test_connecting_is_no_overrun() -> None:
    """Samples start once connected: a connection slower than the sample interval misses none."""
    started = time.time()
    # The exporter's overruns are counted from its start: so is the CPU its processes waited
    # for (they are read at the end only, from 0).
    processes: list[int] = []
    watch = CpuWatch(lambda: processes)
    # Each of the connection's round trips (startup, SET, prepare) waits 250 ms.
    with behind_proxy(0.25, poll="30s", sample="1s") as (server, _, exp):
        first = exp.wait_poll(after=started)
        polled = first["pg_aio_exporter_last_poll_success_timestamp_seconds"][T]
        assert polled - started > 1.5, "the connection took longer than a sample interval"
        time.sleep(2.5)
        later = exp.scrape()
        assert later["pg_aio_sampler_samples_total"][T] >= 2
        processes += [exp.proc.pid, *backend_pids(server.dsn())]
        # A sample through the proxy takes one delayed round trip, 250 ms of its 1 s slot.
        assert_overruns_explained(counted(later, OVERRUNS), watch.starved(), slot=0.75)


@pytest.mark.timing
def test_slow_samples_overrun_without_overlapping() -> None:
    with behind_proxy(0.0, poll="5s", sample="100ms") as (server, proxy, exp):
        exp.wait_poll()
        proxy.delay = 0.35  # every reply from the server now takes 350 ms: samples overrun

        def overran() -> Samples | None:
            now = exp.scrape()
            return now if now.get("pg_aio_exporter_sample_overruns_total") else None

        # From the first overrun on, every sample runs whole under the delay.
        slowed = wait_for(overran, 10, "a first overrun")
        exporter_backends = []
        scrape_times = []
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            for _ in range(30):
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE application_name = 'pg_aio_exporter' AND state = 'active'"
                ).fetchone()
                assert row is not None
                exporter_backends.append(row[0])
                started = time.perf_counter()
                exp.get("/metrics")
                scrape_times.append(time.perf_counter() - started)
                time.sleep(0.1)
        samples = exp.scrape()
        overruns = samples["pg_aio_exporter_sample_overruns_total"][T]
        assert overruns >= 10, overruns
        assert max(exporter_backends) <= 1, "samples must never overlap"
        assert proxy.connections == 1, "one persistent connection, no pile-up"
        assert sorted(scrape_times)[len(scrape_times) // 2] < 0.05, scrape_times
        seconds, count = (
            samples[f"pg_aio_exporter_sample_duration_seconds_{part}"][T]
            - slowed[f"pg_aio_exporter_sample_duration_seconds_{part}"][T]
            for part in ("sum", "count")
        )
        assert seconds / count > 0.3, "slow samples are visible in the duration histogram"

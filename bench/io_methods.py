"""sync vs worker vs io_uring on the same data and the same storage, measured with the exporter.

One PostgreSQL 18 built with liburing (scripts/build-postgres-io-uring.py), shared_buffers
64MB, restarted with each io_method; its tables live on one throttled disk (tests/slowdisk.py:
an ext4 loop device with direct I/O on this machine's disk, as a tablespace), whose page cache
is kept empty so that every read reaches the device. Storage "normal" is that disk as it is;
"slow" caps its reads at --slow-mib MiB/s (cgroup v1 blkio), like a throttled cloud volume.

Workloads, each for --seconds (queries still running then are cancelled, their I/O counted),
shared buffers emptied before each (pg_buffercache_evict_all):
- seq: two clients, each scanning its own table (--table-mb), parallelism off;
- index: two clients, plain index scans (bitmap and sequential scans off) over random key
  ranges of a table whose key order is unrelated to its heap order: one heap page per row;
- parallel: one client, the same scan with two parallel workers.

Read from the exporter (poll 1 s, sample 100 ms): pg_stat_io bytes and read wait of every
backend type, and the sampled wait events; from /proc: CPU of the whole server (postmaster,
backends, io workers, exited parallel workers; io_uring's kernel workers are threads of the
backends). Prints one markdown table.

Usage: python bench/io_methods.py [--seconds 15] [--slow-mib 8] [--table-mb 128]
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from common import load, machine, server_children, server_cpu_seconds
from psycopg import errors

from harness import Exporter, Samples, wait_for
from iocheck import quiesce
from pg_aio_exporter.demo import iouring
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import ROWS_PER_MB, create_table
from slowdisk import ThrottledDisk, server_on_slow_disk

METHODS = ("sync", "worker", "io_uring")
SETTINGS = {"shared_buffers": "64MB", "track_io_timing": "on"}
SEQ_TABLES = ("bench_seq_a", "bench_seq_b")
INDEX_TABLE = "bench_index"
ROWS_PER_LOOKUP = 500
MIB = 1 << 20

Query = Callable[[psycopg.Connection[tuple[object, ...]]], None]


def create_index_table(dsn: str, size_mb: int) -> None:
    """Rows in id order on the heap, looked up by `k`, a hash of id: neighbouring keys sit on
    unrelated heap pages, so an index scan reads one page per row."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {INDEX_TABLE}")
        conn.execute(
            f"CREATE TABLE {INDEX_TABLE} AS SELECT g AS id, hashint4(g) AS k,"
            " repeat(md5(g::text), 7) AS payload FROM generate_series(1, %s) g",
            (size_mb * ROWS_PER_MB,),
        )
        conn.execute(f"CREATE INDEX ON {INDEX_TABLE} (k)")
        conn.execute(f"VACUUM ANALYZE {INDEX_TABLE}")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")


def seq_scan(table: str) -> Query:
    def run(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        conn.execute(f"SELECT sum(length(payload)) FROM {table}").fetchone()

    return run


def index_lookup(table_mb: int) -> Query:
    # hashint4 spreads keys over the int4 range: this width holds ROWS_PER_LOOKUP rows.
    width = (1 << 32) * ROWS_PER_LOOKUP // (table_mb * ROWS_PER_MB)

    def run(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        low = random.randint(-(1 << 31), (1 << 31) - width)
        conn.execute(
            f"SELECT sum(length(payload)) FROM {INDEX_TABLE} WHERE k BETWEEN %s AND %s",
            (low, low + width),
        ).fetchone()

    return run


@dataclass(frozen=True)
class Workload:
    name: str
    clients: list[Query]
    setup: str  # SET statements of every client session


def workloads(table_mb: int) -> list[Workload]:
    serial = "SET max_parallel_workers_per_gather = 0"
    return [
        Workload("seq", [seq_scan(t) for t in SEQ_TABLES], serial),
        Workload(
            "index",
            [index_lookup(table_mb)] * 2,
            f"{serial}; SET enable_bitmapscan = off; SET enable_seqscan = off",
        ),
        Workload(
            "parallel",
            [seq_scan(SEQ_TABLES[0])],
            "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0;"
            " SET parallel_tuple_cost = 0",
        ),
    ]


def drive(dsn: str, workload: Workload, seconds: float) -> int:
    """Run the workload's clients until the deadline; returns the queries completed."""
    deadline = time.monotonic() + seconds
    done: list[int] = []

    def client(query: Query) -> None:
        count = 0
        with psycopg.connect(dsn, autocommit=True, application_name="bench") as conn:
            conn.execute(workload.setup)
            while (left := deadline - time.monotonic()) > 0:
                conn.execute(f"SET statement_timeout = {max(1, int(left * 1000))}")
                try:
                    query(conn)
                    count += 1
                except errors.QueryCanceled:
                    break
        done.append(count)

    threads = [threading.Thread(target=client, args=(q,)) for q in workload.clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done)


def total(samples: Samples, name: str) -> float:
    return sum(samples.get(name, {}).values())


@dataclass
class Result:
    method: str
    storage: str
    workload: str
    mib_per_s: float
    queries_per_s: float
    wait_ms_per_mib: float
    cpu_ms_per_mib: float
    top_waits: str


def top_waits(before: Samples, after: Samples) -> str:
    """The two commonest waits (CPU = none) of the processes doing the reading, as average
    sessions, when at least 0.05."""
    waits: Counter[str] = Counter()
    for key, value in after.get("pg_aio_wait_event_samples_total", {}).items():
        labels = dict(key)
        if labels["backend_type"] in ("client backend", "parallel worker", "io worker"):
            grown = value - before.get("pg_aio_wait_event_samples_total", {}).get(key, 0.0)
            waits[f"{labels['backend_type']} {labels['wait_event']}"] += grown
    samples = total(after, "pg_aio_sampler_samples_total") - total(
        before, "pg_aio_sampler_samples_total"
    )
    common = [(name, n / samples) for name, n in waits.most_common(2)]
    return ", ".join(f"{name} {share:.1f}" for name, share in common if share >= 0.05)


def measure(
    server: LocalServer, exporter: Exporter, workload: Workload, seconds: float
) -> tuple[float, float, float, float, str]:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_buffercache_evict_all()")
    quiesce(server.dsn())
    before = exporter.wait_poll()
    processes = server_children(server)
    cpu0, t0 = server_cpu_seconds(server), time.monotonic()
    queries = drive(server.dsn(), workload, seconds)
    elapsed = time.monotonic() - t0
    quiesce(server.dsn())  # the clients exited: their I/O statistics are flushed
    # Their CPU moves to the postmaster's children's total only once it has reaped them.
    wait_for(lambda: server_children(server) <= processes, 30, "backends to be reaped")
    cpu = server_cpu_seconds(server) - cpu0
    after = exporter.wait_poll()
    mib = (
        total(after, "pg_stat_io_read_bytes_total") - total(before, "pg_stat_io_read_bytes_total")
    ) / MIB
    wait = total(after, "pg_stat_io_read_time_seconds_total") - total(
        before, "pg_stat_io_read_time_seconds_total"
    )
    return (
        mib / elapsed,
        queries / elapsed,
        wait * 1000 / mib,
        cpu * 1000 / mib,
        top_waits(before, after),
    )


def bench(args: argparse.Namespace) -> list[Result]:
    results = []
    with server_on_slow_disk(iouring.bin_dir(), SETTINGS, size_mb=4 * args.table_mb + 512) as (
        server,
        disk,
    ):
        print(f"loading {3 * args.table_mb} MB ...", file=sys.stderr)
        for table in SEQ_TABLES:
            create_table(server.dsn(), args.table_mb, table)
        create_index_table(server.dsn(), args.table_mb)
        for method in METHODS:
            restart(server, disk, method)
            exporter = Exporter(
                "--dsn", server.dsn(), "--poll-interval", "1s", "--sample-interval", "100ms"
            )
            try:
                for storage, bps in (("normal", 0), ("slow", args.slow_mib * MIB)):
                    disk.set_limit(bps, cold=True)
                    for workload in workloads(args.table_mb):
                        print(f"{method} {storage} {workload.name} ...", file=sys.stderr)
                        figures = measure(server, exporter, workload, args.seconds)
                        results.append(Result(method, storage, workload.name, *figures))
            finally:
                disk.set_limit()
                exporter.stop()
    return results


def restart(server: LocalServer, disk: ThrottledDisk, method: str) -> None:
    server.configure({"io_method": method})
    server.restart()
    disk.enter()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        row = conn.execute("SHOW io_method").fetchone()
    assert row is not None and row[0] == method, (row, method)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--slow-mib", type=int, default=8)
    parser.add_argument("--table-mb", type=int, default=128)
    args = parser.parse_args()
    started = load()
    results = bench(args)
    print(f"\n{machine()} (started at {started}); PostgreSQL 18.6 with liburing, {SETTINGS}")
    print(
        f"{args.seconds:.0f} s per cell, tables {args.table_mb} MB, slow = {args.slow_mib} MiB/s\n"
    )
    print(
        "| workload | storage | io_method | read MiB/s | queries/s | read wait ms/MiB"
        " | server CPU ms/MiB | commonest waits (avg sessions) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(results, key=lambda r: (r.workload, r.storage, METHODS.index(r.method))):
        print(
            f"| {r.workload} | {r.storage} | {r.method} | {r.mib_per_s:.1f} |"
            f" {r.queries_per_s:.2f} | {r.wait_ms_per_mib:.1f} | {r.cpu_ms_per_mib:.1f} |"
            f" {r.top_waits} |"
        )


if __name__ == "__main__":
    main()

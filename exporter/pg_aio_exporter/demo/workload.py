"""A real read workload: a table several times larger than shared_buffers, scanned
sequentially (bulkread context) and through its index (normal context)."""

from __future__ import annotations

import random
import threading

import psycopg

TABLE = "aio_demo"
ROWS_PER_MB = 3500  # ~ 290 bytes per row with its tuple header


def create_table(dsn: str, size_mb: int, table: str = TABLE) -> None:
    rows = size_mb * ROWS_PER_MB
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, payload text)")
        conn.execute(
            f"INSERT INTO {table} SELECT g, repeat(md5(g::text), 7) FROM generate_series(1, %s) g",
            (rows,),
        )
        conn.execute(f"VACUUM ANALYZE {table}")
        # The load's last buffers are still dirty: the first scans would write them out
        # themselves (about 200 in 12 s, measured: a client-writes warning in a short report).
        conn.execute("CHECKPOINT")


def seq_scan(conn: psycopg.Connection[tuple[object, ...]], table: str = TABLE) -> None:
    # sum(length(payload)) cannot be answered from the primary key (count(*) would be an
    # index-only scan), and with parallelism off the reads stay on the client backend.
    conn.execute("SET max_parallel_workers_per_gather = 0")
    conn.execute(f"SELECT sum(length(payload)) FROM {table}").fetchone()


def index_scan(conn: psycopg.Connection[tuple[object, ...]], span: int = 5000) -> None:
    (top,) = conn.execute(f"SELECT max(id) FROM {TABLE}").fetchone() or (0,)
    low = random.randint(1, max(1, int(str(top)) - span))  # noqa: S311 (not crypto)
    conn.execute(
        f"SELECT sum(length(payload)) FROM {TABLE} WHERE id BETWEEN %s AND %s", (low, low + span)
    ).fetchone()


class Workload:
    """Background threads, each looping seq scan + index scans until stopped."""

    def __init__(self, dsn: str, clients: int = 2, pause: float = 0.2) -> None:
        self._dsn = dsn
        self._pause = pause
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, name=f"workload-{i}", daemon=True)
            for i in range(clients)
        ]

    def start(self) -> Workload:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self._dsn, autocommit=True, application_name="aio_demo_workload"
                ) as conn:
                    while not self._stop.is_set():
                        seq_scan(conn)
                        for _ in range(5):
                            index_scan(conn)
                        self._stop.wait(self._pause)
            except psycopg.OperationalError:
                self._stop.wait(1.0)  # server restarting: try again

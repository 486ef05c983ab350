"""pg_stat_database: the work each database did (transactions, blocks accessed), the
denominator of DB time per transaction when pg_stat_statements is not there, and (14+) the time
client sessions spent connected, executing statements and idle in a transaction.

DB time is counted here from 14 (active_time: every client backend's time in state active, added
at each change of its state) and sampled by the activity collector on every version. The row of
shared objects (datname NULL, PG 12+) is left out: it runs no transactions.
"""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.collectors.base import Counter, select
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10, PG14, PG15

COUNTERS = (
    Counter("xact_commit", "pg_stat_database_xact_commit", "Transactions committed."),
    Counter("xact_rollback", "pg_stat_database_xact_rollback", "Transactions rolled back."),
    Counter("blks_read", "pg_stat_database_blks_read", "Blocks read from outside shared buffers."),
    Counter("blks_hit", "pg_stat_database_blks_hit", "Blocks found in shared buffers."),
    *(
        # Client backends only; PostgreSQL counts milliseconds from 14 (NULL before).
        Counter(column, metric, doc, scale, ((PG10, "NULL"), (PG14, column)))
        for column, metric, doc, scale in (
            (
                "active_time",
                "pg_stat_database_active_time_seconds",
                "Time client sessions spent executing statements.",
                0.001,
            ),
            (
                "session_time",
                "pg_stat_database_session_time_seconds",
                "Time client sessions were connected.",
                0.001,
            ),
            (
                "idle_in_transaction_time",
                "pg_stat_database_idle_in_transaction_time_seconds",
                "Time client sessions spent idle in a transaction.",
                0.001,
            ),
            ("sessions", "pg_stat_database_sessions", "Client sessions established.", 1.0),
        )
    ),
)


def sql(version_num: int) -> str:
    return (
        f"SELECT datname, {select(COUNTERS, version_num)},"
        " extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time,"
        " coalesce(extract(epoch FROM stats_reset), 0)::float8 AS stats_reset"
        " FROM pg_stat_database WHERE datname IS NOT NULL"
    )


@dataclass(frozen=True, slots=True)
class DatabaseRow:
    datname: str
    xact_commit: float
    xact_rollback: float
    blks_read: float
    blks_hit: float
    start_time: float
    stats_reset: float  # epoch; 0: never reset
    # 14+; None before. A default only because the rows recorded before they were read
    # (tests/fixtures/rows) lack them.
    active_time: float | None = None  # ms
    session_time: float | None = None  # ms
    idle_in_transaction_time: float | None = None  # ms
    sessions: float | None = None


# The reader's own transactions, counted exactly (the report leaves them out of the workload's):
# a backend adds its transaction counts to pg_stat_database when it goes idle, at most once a
# second, and only when something else is pending too (on 18 a transaction that reads no
# relation stays unflushed until one that does). Ending each of the reader's round trips with
# this forces that flush and gives it something to flush (a scan of a tiny catalog): every
# transaction it made before its next read is then in the view (measured on 17 and 18: 20
# round trips, 20 transactions at once; without it 1 on 18, 19 on 17).
OWN_FLUSH = "SELECT pg_stat_force_next_flush() FROM pg_catalog.pg_am LIMIT 1"


def own_flush(version_num: int) -> str | None:
    """The statement that ends a round trip with this backend's counts flushed, where there is
    one (PostgreSQL 15+; before, counts went to the stats collector by UDP)."""
    return OWN_FLUSH if version_num >= PG15 else None


@dataclass(frozen=True, slots=True)
class DatabaseWork:
    """Summed over every database of the server."""

    transactions: float  # committed + rolled back
    blocks: float  # read + hit: blocks accessed
    active: float | None  # seconds client sessions spent executing statements (14+), else None
    start_time: float  # postmaster start: counts of two restarts do not subtract
    # Each database's stats_reset (epoch, 0 never reset): counts across a reset (of one
    # database, pg_stat_reset(), or of every one) do not subtract either.
    resets: tuple[tuple[str, float], ...] = ()

    def continues(self, earlier: DatabaseWork) -> bool:
        """Whether these counts are `earlier`'s grown: no restart and no reset between."""
        return self.start_time == earlier.start_time and self.resets == earlier.resets


def database_work(rows: list[DatabaseRow]) -> DatabaseWork | None:
    if not rows:
        return None
    return DatabaseWork(
        transactions=sum(r.xact_commit + r.xact_rollback for r in rows),
        blocks=sum(r.blks_read + r.blks_hit for r in rows),
        active=(
            None
            if any(r.active_time is None for r in rows)
            else sum(r.active_time or 0.0 for r in rows) / 1000
        ),
        start_time=rows[0].start_time,
        resets=tuple(sorted((r.datname, r.stats_reset) for r in rows)),
    )


class PgStatDatabaseCollector:
    name = "pg_stat_database"
    since = PG10
    labels = ("datname",)
    families = tuple(c.series for c in COUNTERS)
    row_type = DatabaseRow

    def query(self, version_num: int) -> str | None:
        return sql(version_num)

    def snapshot(self, rows: list[DatabaseRow]) -> DatabaseWork | None:
        return database_work(rows)

    def collect(self, rows: list[DatabaseRow], out: MetricSet) -> None:
        for row in rows:
            for counter in COUNTERS:
                counter.publish_from(row, out, datname=row.datname)

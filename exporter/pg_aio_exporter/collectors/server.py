"""Server facts: version, postmaster start, and whether the AIO views exist."""

from __future__ import annotations

from dataclasses import dataclass

from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10, PG18

SQL = (
    "SELECT current_setting('server_version') AS version,"
    " current_setting('server_version_num')::int AS version_num,"
    " extract(epoch FROM pg_postmaster_start_time())::float8 AS start_time"
)


@dataclass(frozen=True, slots=True)
class ServerRow:
    version: str
    version_num: int
    start_time: float


@dataclass(frozen=True)
class ServerVersion:
    """The view's snapshot: the server's version, in words and as server_version_num."""

    version: str
    version_num: int


class ServerCollector:
    name = "server"
    since = PG10
    labels = ("version", "version_num")
    families = ("pg_server_info", "pg_postmaster_start_time_seconds", "pg_aio_supported")
    row_type = ServerRow

    def query(self, version_num: int) -> str | None:
        return SQL

    def snapshot(self, rows: list[ServerRow]) -> ServerVersion:
        return ServerVersion(rows[0].version, rows[0].version_num)

    def collect(self, rows: list[ServerRow], out: MetricSet) -> None:
        row = rows[0]
        out.gauge(
            "pg_server_info",
            "PostgreSQL server version.",
            1.0,
            version=row.version,
            version_num=str(row.version_num),
        )
        out.gauge(
            "pg_postmaster_start_time_seconds",
            "Postmaster start time, epoch seconds.",
            row.start_time,
        )
        out.gauge(
            "pg_aio_supported",
            "1 when the server has asynchronous I/O (PG 18+).",
            1.0 if row.version_num >= PG18 else 0.0,
        )

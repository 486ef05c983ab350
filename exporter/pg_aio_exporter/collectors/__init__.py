"""Poll collectors: one module per PostgreSQL source view, each owning its SQL.

A collector is created per target (it may keep state between polls, like pg_stat_io's previous
snapshot). The poller sends every collector's query in one pipelined round trip, then hands each
collector its own rows.
"""

from __future__ import annotations

from typing import Any, Protocol

from pg_aio_exporter.metricset import MetricSet

Row = dict[str, Any]


class PollCollector(Protocol):
    name: str

    def query(self, version_num: int) -> str | None:
        """The SQL for this server version, or None when the view does not exist there."""

    def collect(self, rows: list[Row], out: MetricSet) -> None:
        """Turn this poll's rows into metrics."""

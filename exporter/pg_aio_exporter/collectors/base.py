"""What a collector is: the two kinds the worker runs, by when they run.

A collector is created per target and may keep state between rounds (pg_stat_io keeps the
previous snapshot, sampled views their counters). The worker sends the queries of every
collector of a kind in one pipelined round trip and hands each collector its own rows, each
read into the collector's row type (`row_type`, a frozen dataclass declared beside its SQL,
whose fields are the SQL's column aliases): a collector reads `row.reads`, and mypy checks
the name. The SQL of every server version selects every field (NULL where a version has no
such column), so one row type serves all versions; a field with a default is one that only
some of the collector's own queries select (pg_stat_statements' two forms).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from pg_aio_exporter.expose.metricset import MetricSet

R = TypeVar("R")  # a collector's row type


@dataclass(frozen=True)
class Counter:
    """One cumulative counter of a view, declared once: the collector's SQL selects it
    (`select`) and its collection serves it (`publish`)."""

    column: str  # the SQL's alias: a field of the collector's row type
    metric: str  # counter name without _total
    doc: str
    scale: float = 1.0  # to base units: PostgreSQL's times are milliseconds
    # The SQL expression by the first server version that reads it so (a view renamed or moved
    # the column); none: the column itself on every version.
    sources: tuple[tuple[int, str], ...] = ()

    @property
    def series(self) -> str:
        """Its name as exposed and as the rules read it."""
        return f"{self.metric}_total"

    def source(self, version_num: int) -> str:
        found = [expr for since, expr in self.sources if since <= version_num]
        return found[-1] if found else self.column

    def publish(self, value: float | None, out: MetricSet, **labels: str) -> None:
        """The counter in base units; nothing for NULL (the column does not apply)."""
        if value is not None:
            out.counter(self.metric, self.doc, value * self.scale, **labels)

    def value(self, row: object) -> float | None:
        """The counter's field of `row`, as read (tests/test_collectors.py checks that every
        counter's column is a field of its collector's row type)."""
        value: float | None = getattr(row, self.column)
        return value

    def publish_from(self, row: object, out: MetricSet, **labels: str) -> None:
        """The counter from its field of `row`."""
        self.publish(self.value(row), out, **labels)


def select(counters: Iterable[Counter], version_num: int) -> str:
    """The SQL select list of `counters` on this server version, each as float8."""
    return ", ".join(f"{c.source(version_num)}::float8 AS {c.column}" for c in counters)


class Collector(Protocol[R]):
    name: str
    # What each row of its SQL is read into (psycopg class_row): a frozen dataclass whose
    # fields are the SQL's column aliases.
    row_type: type[R]

    @property
    def since(self) -> int:
        """The oldest server version (server_version_num) that has the view."""

    @property
    def labels(self) -> tuple[str, ...]:
        """The label names its series carry besides the target's own."""

    @property
    def families(self) -> tuple[str, ...]:
        """Every metric name it may publish, as exposed (counters with _total), on any server
        version: what turning it off takes away (alerts/needs.py reads it; tests/
        test_collectors.py and tests/test_collector_needs.py keep it true)."""

    def query(self, version_num: int) -> str | None:
        """The SQL for this server version, or None when the view does not exist there."""


class PollCollector(Collector[R], Protocol[R]):
    """Read every poll interval (default 30 s): cumulative views and settings."""

    def collect(self, rows: list[R], out: MetricSet) -> None:
        """Turn this poll's rows into metrics."""


@runtime_checkable
class MayBeAbsent(Protocol):
    """A collector of a view that may not be there at all (an extension): its absence is no
    poll error, only a note."""

    def absent(self, exc: Exception) -> str | None:
        """Why the view is not there, when `exc` says so; None for a real failure."""


@runtime_checkable
class OncePerConnection(Protocol):
    """A poll collector of a catalogue only a new server binary changes (pg_wait_events): read
    on a connection's first poll, not on every poll (a new server version is a new connection)."""

    once_per_connection: bool


@runtime_checkable
class Snapshots(Protocol[R]):
    """A poll collector whose view the report reads: its rows as one domain object (the
    view's snapshot type), which the worker hands its tap."""

    def snapshot(self, rows: list[R]) -> object | None:
        """This poll's rows as the view's snapshot; None when they make none."""


class SampleCollector(Collector[R], Protocol[R]):
    """Read every sample interval (default 1 s): point-in-time views, counted over samples.

    Counters are published after every sample; gauges describe the last complete poll
    interval (roll_window) and are published only while sampling succeeds."""

    def observe(self, rows: list[R], version_num: int) -> str | None:
        """Fold one sample in; returns why part of the view was hidden from this role, if so."""

    def roll_window(self, samples: int, seconds: float) -> None:
        """Close the poll interval that just ended: `samples` taken in it, over `seconds`."""

    def collect_counters(self, out: MetricSet) -> None: ...

    def collect_gauges(self, out: MetricSet) -> None: ...

    def totals(self) -> dict[str, Any]:
        """What it has counted since it was created, by name (the fields of the report's
        summary.Activity): what the worker hands its tap after each sample."""

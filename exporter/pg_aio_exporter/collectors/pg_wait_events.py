"""pg_wait_events (PostgreSQL 17+): every wait event the server can report, by class, as the
server names them. Names and classes move between versions: 17 renamed the WAL file I/O waits
(IO/WALSync -> WalSync, ...), 19 adds the class Buffer (buffer pins and content locks,
BufferPin and LWLock/BufferContent before) and moves WaitForWal* from Client to IPC. The report
counts the wait events its judgements name (thresholds.yaml, whose lists hold every version's
names) only as this server names and places them: the view where the server has it, else
vocabulary.wait_events() by server version (16 and earlier, a saved report). server_events()
is that one decision.

Read once per connection (OncePerConnection): only a new server binary changes the view, and a
new version is a new connection. The exporter does not run it: its sampled series carry
pg_stat_activity's own names, which the alert rules and dashboards match by every version's
spelling (PromQL cannot read the view).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG17
from pg_aio_exporter.vocabulary import WaitEvent, wait_events

SQL = "SELECT type, name FROM pg_wait_events"


@dataclass(frozen=True, slots=True)
class WaitEventRow:
    type: str
    name: str


@dataclass(frozen=True)
class WaitEvents:
    """The wait events a server reports, (class, event): the view's snapshot, or the package's
    own by version (server_events())."""

    events: frozenset[WaitEvent]

    def named(self, names: Collection[str], wait_class: str | None = None) -> frozenset[WaitEvent]:
        """Those of `names` this server has, in the class it gives them (only in `wait_class`,
        when given)."""
        return frozenset((c, e) for c, e in self.events if e in names and wait_class in (None, c))


def server_events(version_num: int | None, read: WaitEvents | None) -> WaitEvents:
    """The wait events of a server of this version: its pg_wait_events as read (17+), else the
    package's by version (16 and earlier, the view not read, a saved report); none while the
    version is not known either."""
    if read is not None:
        return read
    return WaitEvents(frozenset() if version_num is None else wait_events(version_num))


class PgWaitEventsCollector:
    name = "pg_wait_events"
    since = PG17
    labels: tuple[str, ...] = ()
    families: tuple[str, ...] = ()  # the report's only
    row_type = WaitEventRow
    once_per_connection = True

    def query(self, version_num: int) -> str | None:
        return SQL if version_num >= PG17 else None

    def snapshot(self, rows: list[WaitEventRow]) -> WaitEvents:
        return WaitEvents(frozenset((row.type, row.name) for row in rows))

    def collect(self, rows: list[WaitEventRow], out: MetricSet) -> None:
        """No series: the report reads the snapshot from its tap."""

"""pg_wait_events (PostgreSQL 17+): every wait event the server can report, by class, as the
server names them. Classes move between versions: 19 adds the class Buffer (buffer pins and
content locks, BufferPin and LWLock/BufferContent before) and moves WaitForWal* from Client to
IPC. The report places the wait events its judgements name (thresholds.yaml) in the class this
server gives them; servers without the view (16 and earlier) and saved reports use
vocabulary.WAIT_EVENT_CLASSES.

The exporter does not run it: its sampled series carry pg_stat_activity's own
wait_event_type, already the server's name; only the report, which judges by event name,
reads the catalogue (once per poll, some 270 short rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG17
from pg_aio_exporter.vocabulary import WAIT_EVENT_CLASSES

SQL = "SELECT type, name FROM pg_wait_events"


@dataclass(frozen=True, slots=True)
class WaitEventRow:
    type: str
    name: str


def classes(rows: list[WaitEventRow]) -> dict[str, str]:
    """Event name -> class from the view's rows. A name in two classes (LWLock and IPC both
    have SyncRep) keeps the first; the report names none of those."""
    found: dict[str, str] = {}
    for row in rows:
        found.setdefault(row.name, row.type)
    return found


@dataclass(frozen=True)
class WaitClasses:
    """The view's snapshot: event name -> class, as this server names them (classes())."""

    classes: Mapping[str, str]


def class_of(event: str, catalogue: Mapping[str, str]) -> str | None:
    """The class this server gives `event`: its catalogue, else WAIT_EVENT_CLASSES; None if
    neither knows."""
    return catalogue.get(event) or WAIT_EVENT_CLASSES.get(event)


class PgWaitEventsCollector:
    name = "pg_wait_events"
    since = PG17
    labels: tuple[str, ...] = ()
    row_type = WaitEventRow

    def query(self, version_num: int) -> str | None:
        return SQL if version_num >= PG17 else None

    def snapshot(self, rows: list[WaitEventRow]) -> WaitClasses:
        return WaitClasses(classes(rows))

    def collect(self, rows: list[WaitEventRow], out: MetricSet) -> None:
        """No series: the report reads the snapshot from its tap."""

"""The collectors the exporter and the report run: a new view is one module and one line here.

Order matters only for the exposition: families appear in the order their collectors are
listed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import Any

from pg_aio_exporter.collectors import (
    activity,
    checkpointer,
    pg_aios,
    pg_stat_database,
    pg_stat_io,
    pg_stat_statements,
    pg_stat_wal,
    pg_wait_events,
    server,
    settings,
)
from pg_aio_exporter.collectors.base import PollCollector, SampleCollector

POLL: dict[str, Callable[[], PollCollector[Any]]] = {
    pg_stat_io.PgStatIoCollector.name: pg_stat_io.PgStatIoCollector,
    pg_stat_wal.PgStatWalCollector.name: pg_stat_wal.PgStatWalCollector,
    checkpointer.CheckpointerCollector.name: checkpointer.CheckpointerCollector,
    settings.SettingsCollector.name: settings.SettingsCollector,
    server.ServerCollector.name: server.ServerCollector,
    pg_stat_statements.PgStatStatementsCollector.name: pg_stat_statements.PgStatStatementsCollector,
    pg_stat_database.PgStatDatabaseCollector.name: pg_stat_database.PgStatDatabaseCollector,
}
# The report reads these per row where the exporter reads totals (no per-statement series).
PER_ROW: dict[str, Callable[[], PollCollector[Any]]] = {
    pg_stat_statements.PgStatStatementsCollector.name: functools.partial(
        pg_stat_statements.PgStatStatementsCollector, per_statement=True
    ),
}
# Only the report reads these (the exporter publishes nothing from them).
REPORT: dict[str, Callable[[], PollCollector[Any]]] = {
    pg_wait_events.PgWaitEventsCollector.name: pg_wait_events.PgWaitEventsCollector,
}
SAMPLE: dict[str, Callable[[], SampleCollector[Any]]] = {
    activity.ActivityCollector.name: activity.ActivityCollector,
    pg_aios.PgAiosCollector.name: pg_aios.PgAiosCollector,
}


def names() -> list[str]:
    return [*POLL, *SAMPLE]


def poll_collectors(enabled: Collection[str] | None = None) -> list[PollCollector[Any]]:
    """New poll collectors, all of them or those named in `enabled`."""
    return [create() for name, create in POLL.items() if enabled is None or name in enabled]


def report_collectors() -> list[PollCollector[Any]]:
    """New poll collectors as the report runs them: the PER_ROW variants where there is one,
    and the REPORT collectors."""
    return [create() for create in {**POLL, **PER_ROW, **REPORT}.values()]


def sample_collectors(enabled: Collection[str] | None = None) -> list[SampleCollector[Any]]:
    """New sample collectors, all of them or those named in `enabled`."""
    return [create() for name, create in SAMPLE.items() if enabled is None or name in enabled]


def labels() -> set[str]:
    """Every label name the collectors put on series."""
    return {name for c in [*poll_collectors(), *sample_collectors()] for name in c.labels}

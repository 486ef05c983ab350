"""The collectors the exporter and the report run: a new view is one module and one line here.

Order matters only for the exposition: families appear in the order their collectors are
listed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection
from pathlib import Path
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


def poll_collectors(
    enabled: Collection[str] | None = None, *, idle_io_rows: bool = False
) -> list[PollCollector[Any]]:
    """New poll collectors, all of them or those named in `enabled`; `idle_io_rows`: pg_stat_io
    with the rows that never counted (--collector.pg_stat_io.idle_rows)."""
    chosen = POLL | {
        pg_stat_io.PgStatIoCollector.name: functools.partial(
            pg_stat_io.PgStatIoCollector, idle_rows=idle_io_rows
        )
    }
    return [create() for name, create in chosen.items() if enabled is None or name in enabled]


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


def families() -> dict[str, tuple[str, ...]]:
    """The metric names each of the exporter's collectors publishes, by collector name."""
    return {c.name: c.families for c in [*poll_collectors(), *sample_collectors()]}


# For each collector, the shipped alerts that turning it off silences or weakens: derived from
# the rules and families() by alerts/needs.py, written by `make rules`.
NEEDS = Path(__file__).resolve().parent / "alert_needs.json"


def alerts_lost(off: Collection[str]) -> dict[str, dict[str, list[str]]]:
    """The collectors in `off` that the shipped alerts need: by collector, the alerts it
    silences and those it weakens (effect -> alert names)."""
    needs: dict[str, dict[str, str]] = json.loads(NEEDS.read_text())["collectors"]
    lost: dict[str, dict[str, list[str]]] = {}
    for name in off:
        for alert, effect in needs.get(name, {}).items():
            lost.setdefault(name, {}).setdefault(effect, []).append(alert)
    return lost

"""Rows recorded from real servers (tests/fixtures/record_rows.py), replayed through the
registry's collectors in the order a target's worker runs them, each row read into its
collector's row type as the worker's round trip reads it (psycopg class_row)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.base import PollCollector, SampleCollector
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.sampler import Sampler
from pg_aio_exporter.poll.worker import PG_UP_HELP

FIXTURES = Path(__file__).parent / "fixtures"
MAJORS = ("16", "17", "18", "19")
BASE_LABELS = {"target": "recorded", "cluster": "c1"}
R = TypeVar("R")


@cache
def load(major: str) -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads((FIXTURES / "rows" / f"pg{major}.json").read_text())
    return recorded


@cache
def workload(major: str) -> dict[str, Any]:
    """The workload's views recorded apart (pg_stat_database, pg_stat_statements)."""
    recorded: dict[str, Any] = json.loads(
        (FIXTURES / "rows" / f"workload_pg{major}.json").read_text()
    )
    return recorded


def typed(row_type: Callable[..., R], rows: list[dict[str, Any]]) -> list[R]:
    """Recorded rows as the worker hands them to a collector: each read into its row type as
    psycopg's class_row does, one keyword per column, so that a column the row type lacks (or
    a field no column fills) fails here as it does on a server."""
    return [row_type(**row) for row in rows]


def replay(major: str) -> bytes:
    """The /metrics body (without the exporter's own metrics) after the recorded poll, samples
    and second poll, as a worker publishes them."""
    recorded = load(major)
    version = recorded["server_version_num"]

    async def new_exposition() -> Exposition:
        return Exposition(SelfMetrics())  # its asyncio.Event wants a running loop

    exposition = asyncio.run(new_exposition())
    polled: list[PollCollector[Any]] = registry.poll_collectors()
    sampler = Sampler()

    def publish_samples() -> None:
        out = MetricSet(BASE_LABELS)
        sampler.collect(out, current=True)
        exposition.publish("recorded", "sample", out.families())

    def poll(rows: dict[str, list[dict[str, Any]]]) -> None:
        out = MetricSet(BASE_LABELS)
        for collector in polled:
            # Collectors recorded elsewhere (workload_pg*.json) add nothing here.
            if collector.query(version) is not None and collector.name in rows:
                collector.collect(typed(collector.row_type, rows[collector.name]), out)
        out.gauge("pg_up", PG_UP_HELP, 1.0)
        exposition.publish("recorded", "poll", out.families())
        # The window's samples were taken a second apart (the first poll's window has none).
        sampler.roll_window(float(len(recorded["samples"])))
        publish_samples()

    poll(recorded["polls"][0])
    for sample in recorded["samples"]:
        read: list[tuple[SampleCollector[Any], list[Any] | Exception]] = [
            (c, typed(c.row_type, sample[c.name]))
            for c in sampler.collectors
            if c.query(version) is not None
        ]
        _, failures = sampler.observe(read, version)
        assert not failures, failures
        publish_samples()
    poll(recorded["polls"][1])
    exposition.render()
    chunks: list[bytes] = []
    exposition.body.write(chunks.append)
    body = b"".join(chunks)
    return body[: body.index(b"# HELP process_")]

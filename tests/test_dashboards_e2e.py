"""Every query of the shipped dashboards, run as Grafana would run it against a real Prometheus
that scrapes the real exporter watching a real PostgreSQL 18 under a read workload, returns
data: no panel of a freshly installed dashboard is blank because of a wrong name or label."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dashboard_stack import aio_stack, dq, resolve
from harness import Exporter
from pg_aio_exporter.demo.server import LocalServer
from prometheus import Prometheus

BOARDS = sorted((Path(__file__).resolve().parent.parent / "dashboards").glob("*.json"))
# The workload's own pg_stat_io row: a selection of one real value per variable that must
# still show data (a variable whose label a query forgot to filter on, or filters wrongly on,
# shows up here rather than under "All").
PREFER = {"target": "default", "backend_type": "client backend", "object": "relation"}
PREFER["context"] = "normal"
# Queries that may rightly return nothing on a healthy test server, by (where, reason). An
# entry that stops matching any query fails the test, so this list cannot rot.
MAY_BE_EMPTY = {
    "panel 'Firing AIO alerts' A": "no PgAio alert fires on a healthy server",
    "panel 'Poll errors and sample overruns' A": "no poll fails against a healthy server",
    "panel 'Poll errors and sample overruns' B": "no sample overruns on an idle 2-core machine",
    "panel 'Sessions waiting on I/O by backend type' B": (
        "io worker queue or io_uring ring contention needs more concurrent readers than 2"
    ),
}
# Annotations fire on events the shared test server must not undergo (restart, setting or
# version change, stats reset). For them the test checks that the series they watch exist.
ANNOTATION_REASON = "no such event during the test: the series it watches are checked instead"
RANGE_SECONDS = 30
TIMEOUT = 120


def key(query: dq.Query) -> str:
    # Panel ids shift when panels are added; titles and refIds are what a reader recognises.
    return f"{query.kind} {query.title!r}" + (f" {query.ref_id}" if query.ref_id else "")


def cases(board: dict[str, Any], values: dict[str, str]) -> Iterator[tuple[dq.Query, str]]:
    """Each panel and annotation query, substituted, once per rate window."""
    windows = next(v for v in dq.variables(board) if v["name"] == "window")["options"]
    for window in (o["value"] for o in windows):
        for query in dq.queries(board):
            if query.kind != "variable":
                yield query, dq.substitute(query.expr, {**values, "window": window})


@pytest.fixture(scope="module")
def stack(pg18: LocalServer) -> Iterator[tuple[Exporter, Prometheus]]:
    with aio_stack(pg18.dsn()) as running:
        yield running


def test_every_panel_query_returns_data(
    stack: tuple[Exporter, Prometheus], record_property: Any
) -> None:
    exporter, prom = stack
    started = time.monotonic()
    exporter.wait_poll()
    boards = [json.loads(p.read_text()) for p in BOARDS]
    empty: dict[str, str] = {}
    checked = 0
    deadline = time.monotonic() + TIMEOUT
    while True:
        # Re-resolve each round: variables list only what Prometheus has seen so far.
        empty, checked = {}, 0
        for board in boards:
            for prefer in (None, PREFER):
                values = resolve(board, prom, prefer)
                for query, expr in cases(board, values):
                    checked += 1
                    if not prom.query_range(expr, RANGE_SECONDS):
                        selection = "All" if prefer is None else "one value"
                        empty[f"{board['title']}: {query.where} ({selection}): {expr}"] = key(query)
        expected_empty = {
            k: v for k, v in empty.items() if v in MAY_BE_EMPTY or v.startswith("annotation")
        }
        if len(empty) == len(expected_empty) or time.monotonic() > deadline:
            break
        time.sleep(2)
    unexpected = sorted(k for k, v in empty.items() if k not in expected_empty)
    assert unexpected == [], "\n".join(unexpected)

    all_keys = {key(q) for b in boards for q in dq.queries(b)}
    assert set(MAY_BE_EMPTY) <= all_keys, f"stale entries: {set(MAY_BE_EMPTY) - all_keys}"
    elapsed = time.monotonic() - started
    record_property("queries_checked", checked)
    record_property("seconds_until_all_returned_data", round(elapsed, 1))
    print(
        f"\n{checked} queries checked in {elapsed:.0f}s; empty, as allowed:",
        *sorted(empty),
        sep="\n",
    )


def test_annotations_watch_existing_series(stack: tuple[Exporter, Prometheus]) -> None:
    """An annotation is empty until its event happens; what it watches must exist now, or it
    would stay empty forever."""
    _, prom = stack
    problems = []
    for path in BOARDS:
        board = json.loads(path.read_text())
        values = resolve(board, prom)
        for query in dq.queries(board):
            if query.kind != "annotation":
                continue
            watched = dq.without_threshold(dq.substitute(query.expr, values))
            assert watched, f"{query.where}: not of the form `series > 0`"
            if not prom.query_range(watched, RANGE_SECONDS):
                problems.append(f"{path.name} {query.where}: {watched}")
    assert problems == []

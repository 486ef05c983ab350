"""End to end where users are: the exporter polling every 15 s, Prometheus 2 (Debian's), 3.5 and
VictoriaMetrics (vmalert evaluating) each scraping it every 15 s with the shipped rules, and
prometheus-community's postgres_exporter watching the same PostgreSQL 18 into the same
engines, under a read workload.

- Every query of the shipped dashboards, run as Grafana would run it with its data source's
  scrape interval set to 15 s ($__rate_interval 1m), returns data once Prometheus has held data
  for the rate interval plus the comparison offset, and never a series of postgres_exporter.
- Every shipped recording rule records, from our series only; no alert of ours reads
  postgres_exporter's series, which carry our names (pg_up, pg_settings_*) and, for its role,
  track_io_timing off: the same alert with an empty selector would be pending on them.

One stack serves every test of this module, the three engines scraping side by side."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from alerts import alerting
from alerts.params import load_params
from alerts.recording import interval_rules, write_rules
from dashboards import dashboard_queries as dq

from dashboard_stack import RULE_FILES, aio_stack, grafana_globals, resolve
from harness import Exporter
from pg_aio_exporter.demo.server import LocalServer
from postgres_exporter import PostgresExporter
from prometheus import Prometheus
from victoriametrics import ENGINES, engine_id, engine_name

BOARDS = sorted((Path(__file__).resolve().parent.parent / "dashboards").glob("*.json"))
SCRAPE_SECONDS = 15  # a common interval; at 30 s the windows took 180 s to fill, not 90
RATE_INTERVAL_SECONDS = 4 * SCRAPE_SECONDS
# A dashboard over the last rate interval, compared with one scrape earlier (1d/7d/30d are the same
# queries with a longer offset).
GRAFANA = grafana_globals(SCRAPE_SECONDS, RATE_INTERVAL_SECONDS)
OFFSET_SECONDS = SCRAPE_SECONDS
# How long Prometheus must have scraped before the oldest window a query reads (a rate interval
# ending one offset ago) holds its 4 scrapes.
FILLED_SECONDS = RATE_INTERVAL_SECONDS + OFFSET_SECONDS + SCRAPE_SECONDS
PEER_JOB = "postgres"
# The workload's own pg_stat_io row: a selection of one real value per variable that must
# still show data (a variable whose label a query forgot to filter on, or filters wrongly on,
# shows up here rather than under "All"). The server variables take the first (only) value.
PREFER = {"backend_type": "client backend", "object": "relation", "context": "normal"}
# The queries of PostgreSQL 19's pool settings (io_min_workers, io_max_workers), and of 18's
# io_workers, which 19 has no more.
PG19_ONLY = tuple(
    f"panel {title!r} {ref}"
    for title, refs in (
        ("io worker utilisation", "B"),
        ("io workers: running vs io_workers / io_max_workers", "CD"),
        ("AIO settings over time", "BC"),
    )
    for ref in refs
)
# Queries that may rightly return nothing on a healthy test server, by (where, reason). An
# entry that stops matching any query fails the test, so this list cannot rot.
MAY_BE_EMPTY = {
    "panel 'Firing AIO alerts' A": "no PgAio alert fires on a healthy server",
    "panel 'Poll errors and sample overruns' A": "no poll fails against a healthy server",
    "panel 'Poll errors and sample overruns' B": "no sample overruns on an idle 2-core machine",
    "panel 'Poll errors and sample overruns' C": "the exporter gets the CPU it needs",
    "panel 'Sessions waiting on I/O by backend type' B": (
        "io worker queue or io_uring ring contention needs more concurrent readers than 2"
    ),
    # PostgreSQL 19's pool settings (io_max_workers, io_min_workers): this stack runs 18.
    **{key: "PostgreSQL 19 only: this stack runs 18" for key in PG19_ONLY},
    # The write row: this stack's workload only reads, on a server with fsync off;
    # tests/test_writes.py runs these queries under pgbench's write load and slowed syncs.
    **{
        f"panel {title!r} {ref}": "a read-only workload writes little or nothing"
        for title, refs in (
            ("Write time per MiB", "AB"),
            ("Write time per operation", "ABCD"),
            ("WAL write and sync time", "AB"),
            ("Who writes shared buffers", "A"),
            ("Sessions waiting on writes", "A"),
        )
        for ref in refs
    },
}
RANGE_SECONDS = 60
TIMEOUT = 90


@dataclass
class Stack:
    exporter: Exporter
    peer: PostgresExporter
    proms: dict[str, Prometheus]
    filled_at: float  # time.monotonic() when every window the queries read is full


@pytest.fixture(scope="module")
def stack(statements_server: LocalServer) -> Iterator[Stack]:
    server = statements_server  # pg_stat_statements: the workload panels and rules read it
    peer = PostgresExporter(server, statements=True)
    try:
        with aio_stack(
            server.dsn(),
            scrape_interval=f"{SCRAPE_SECONDS}s",
            poll_interval=f"{SCRAPE_SECONDS}s",
            versions=ENGINES,
            jobs={PEER_JOB: [peer.address]},
        ) as (exporter, proms):
            yield Stack(exporter, peer, proms, time.monotonic() + FILLED_SECONDS)
    finally:
        peer.stop()


@pytest.fixture(params=ENGINES, ids=engine_id)
def prom(request: pytest.FixtureRequest, stack: Stack) -> Prometheus:
    time.sleep(max(0.0, stack.filled_at - time.monotonic()))
    return stack.proms[request.param]


def foreign(series: dict[str, Any]) -> bool:
    """A result series that is not ours: postgres_exporter's, or without our `target` label
    (what an aggregation over a mix of ours and its series leaves)."""
    labels = series["metric"]
    return labels.get("job") == PEER_JOB or not labels.get("target")


def key(query: dq.Query) -> str:
    # Panel ids shift when panels are added; titles and refIds are what a reader recognises.
    return f"{query.kind} {query.title!r}" + (f" {query.ref_id}" if query.ref_id else "")


@dataclass(frozen=True)
class View:
    """How Grafana asks: its globals, the comparison offset typed in, the range shown and the
    step of its range queries."""

    grafana: dict[str, str]
    offset: str
    range_seconds: int
    step: str
    retry_seconds: float  # between rounds of queries while some are still empty


# This module's stack: 15 s scrapes, as users run them.
USERS = View(
    GRAFANA, f"{OFFSET_SECONDS}s", RANGE_SECONDS, f"{SCRAPE_SECONDS // 2}s", SCRAPE_SECONDS / 3
)


def values(
    board: dict[str, Any], prom: Prometheus, prefer: dict[str, str] | None, view: View = USERS
) -> dict[str, str]:
    return resolve(
        board, prom, prefer, view.range_seconds, grafana=view.grafana, offset=view.offset
    )


def run(prom: Prometheus, expr: str, view: View = USERS) -> list[dict[str, Any]]:
    return prom.query_range(expr, view.range_seconds, step=view.step)


# The names both exporters use on purpose, the conventional ones (docs/metrics.md): pg_up, a
# setting's pg_settings_<name>, and the client library's process_*.
SHARED_NAMES = re.compile(r"pg_up|pg_settings_\w+|process_\w+")


def names(text: str) -> set[str]:
    return {
        line.split("{")[0].split(" ")[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_no_name_of_ours_is_one_of_postgres_exporters_but_the_conventional_ones(
    stack: Stack,
) -> None:
    """With its statements collector on: its per-statement pg_stat_statements_calls_total and
    _rows_total {user, datname, queryid} were also the names of our per-target totals."""
    theirs = names(stack.peer.get("/metrics")[0].decode())
    assert {"pg_stat_statements_calls_total", "pg_stat_statements_rows_total"} <= theirs
    ours = names(stack.exporter.text())
    assert {"pg_aio_statements_calls_total", "pg_aio_statements_rows_total"} <= ours
    assert sorted(n for n in ours & theirs if not SHARED_NAMES.fullmatch(n)) == []


def test_every_panel_query_returns_our_data(prom: Prometheus, record_property: Any) -> None:
    started = time.monotonic()
    empty, checked = every_panel_query_returns_data(prom, MAY_BE_EMPTY, USERS, TIMEOUT)
    elapsed = time.monotonic() - started
    record_property("queries_checked", checked)
    record_property("seconds_until_all_returned_data", round(elapsed, 1))
    print(
        f"\n{engine_name(prom.version)}: {checked} queries checked in {elapsed:.0f}s; empty, as "
        "allowed:",
        *sorted(empty),
        sep="\n",
    )


def every_panel_query_returns_data(
    prom: Prometheus, may_be_empty: dict[str, str], view: View, timeout: float
) -> tuple[list[str], int]:
    """Every query of the shipped dashboards, with every variable "All" and with one value
    each, returns data of ours only, but those `may_be_empty` names (each of which must name a
    query); asked again until then or `timeout`. The queries left empty, and how many ran."""
    boards = [json.loads(p.read_text()) for p in BOARDS]
    empty: dict[str, str] = {}
    theirs: list[str] = []
    checked = 0
    deadline = time.monotonic() + timeout
    while True:
        # Re-resolve each round: variables list only what Prometheus has seen so far.
        empty, theirs, checked = {}, [], 0
        for board in boards:
            for prefer in (None, PREFER):
                chosen = values(board, prom, prefer, view)
                for query in dq.queries(board):
                    if query.kind == "variable":
                        continue
                    expr = dq.substitute(query.expr, chosen)
                    checked += 1
                    result = run(prom, expr, view)
                    theirs += [f"{query.where}: {s['metric']}" for s in result if foreign(s)]
                    if not result:
                        selection = "All" if prefer is None else "one value"
                        empty[f"{board['title']}: {query.where} ({selection}): {expr}"] = key(query)
        expected_empty = {
            k: v for k, v in empty.items() if v in may_be_empty or v.startswith("annotation")
        }
        if len(empty) == len(expected_empty) or time.monotonic() > deadline:
            break
        time.sleep(view.retry_seconds)
    assert theirs == [], "\n".join(theirs)
    unexpected = sorted(k for k in empty if k not in expected_empty)
    assert unexpected == [], "\n".join(unexpected)

    all_keys = {key(q) for b in boards for q in dq.queries(b)}
    assert set(may_be_empty) <= all_keys, f"stale entries: {set(may_be_empty) - all_keys}"
    return sorted(empty), checked


def test_annotations_watch_existing_series(prom: Prometheus) -> None:
    """An annotation is empty until its event happens; what it watches must exist now, or it
    would stay empty forever."""
    problems = []
    for path in BOARDS:
        board = json.loads(path.read_text())
        chosen = values(board, prom, None)
        for query in dq.queries(board):
            if query.kind != "annotation":
                continue
            watched = dq.without_threshold(dq.substitute(query.expr, chosen))
            assert watched, f"{query.where}: not of the form `series > 0`"
            result = run(prom, watched)
            if not result or any(foreign(s) for s in result):
                problems.append(f"{path.name} {query.where}: {watched}: {result[:3]}")
    assert problems == []


def test_every_recording_rule_records_our_series_only(prom: Prometheus) -> None:
    names = [
        rule["record"]
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    ]
    results = {name: prom.query(name) for name in names}
    # The write side's rules have nothing to record from this stack's read-only workload on a
    # server with fsync off; tests/test_writes.py checks them live under pgbench's writes, and
    # tests/rules/writes.yml each formula.
    params = load_params()
    writes = {r.name for w in params["rate_windows"] for r in write_rules(params, w)}
    # So have the last interval's WAL sync latency and its 0/1 judgements (timed, and by the
    # samples): no sync to judge.
    writes |= {r.name for r in interval_rules(params) if "wal_sync" in r.name}
    assert writes < set(names)
    # Rules against a PostgreSQL 19 setting (io_max_workers) record nothing from this 18 stack;
    # tests/rules/saturation.yml checks them.
    pg19 = {
        rule["record"]
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule and "pg_settings_io_max_workers" in rule["expr"]
    }
    assert pg19
    # Nor does the wait for a full io worker queue (LWLock/AioWorkerSubmissionQueue), which
    # this stack's light reads never fill; tests/rules/recording.yml checks the formula.
    queue = {"pg_aio_target:submission_queue_sessions:rate5m"}
    assert queue < set(names)
    silent = writes | pg19 | queue
    assert [name for name, result in results.items() if not result and name not in silent] == []
    theirs = [f"{n}: {s['metric']}" for n, result in results.items() for s in result if foreign(s)]
    assert theirs == []


def test_alerts_ignore_the_series_of_postgres_exporter(prom: Prometheus) -> None:
    # The neighbour's series of our names are in this Prometheus ...
    for name in ("pg_up", "pg_settings_track_io_timing", "pg_settings_shared_buffers_bytes"):
        assert prom.query(f'{name}{{job="{PEER_JOB}"}}'), name
    # ... and an alert without the selector reads them: its role has track_io_timing off ...
    params = load_params()
    unsafe = alerting.alerts({**params, "selector": ""})["PgAioTrackIoTimingOff"].expr
    assert {s["metric"].get("job") for s in prom.query(unsafe)} == {PEER_JOB}
    # ... while the shipped one, evaluated by Prometheus, reads ours only.
    assert prom.query(alerting.alerts(params)["PgAioTrackIoTimingOff"].expr) == []
    alerts = prom.alerts()
    assert [a for a in alerts if foreign({"metric": a["labels"]})] == []
    names = {a["labels"]["alertname"] for a in alerts}
    assert not names & {"PgAioTrackIoTimingOff", "PgAioTargetDown", "PgAioSettingChanged"}

"""The workload collectors (pg_stat_statements, pg_stat_database) fed with rows recorded from
real PostgreSQL 16.14, 17.10 and 18.6 (tests/fixtures/rows/workload_pg*.json, made by
tests/fixtures/record_workload_rows.py). Expected values come from the rows and from what the
recording ran (SCANS scans of one table, one IN list with 3 and 4 constants), never from the
collector's output."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import psycopg
import pytest

from harness import labels
from pg_aio_exporter.collectors import pg_stat_database, pg_stat_statements, registry
from pg_aio_exporter.collectors.base import MayBeAbsent
from pg_aio_exporter.collectors.pg_stat_database import DatabaseWork
from pg_aio_exporter.collectors.pg_stat_statements import Statement, StatementKey
from recorded import FIXTURES, typed
from test_collectors import T, poll

pytestmark = pytest.mark.unit
MAJORS = ("16", "17", "18", "19")


@cache
def load(major: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "rows" / f"workload_pg{major}.json").read_text())
    return data


def statements(rows: list[dict[str, Any]]) -> dict[StatementKey, Statement]:
    return pg_stat_statements.statements(typed(pg_stat_statements.StatementRow, rows))


def database_work(rows: list[dict[str, Any]]) -> DatabaseWork | None:
    return pg_stat_database.database_work(typed(pg_stat_database.DatabaseRow, rows))


@pytest.mark.parametrize("major", MAJORS)
def test_statement_totals_in_base_units(major: str) -> None:
    """The first poll records the statements' counts and exports 0 (they were counted before
    the exporter watched); the next exports what was counted between the two, in base units."""
    (before,), (row,) = (p["totals"] for p in load(major)["polls"])
    one = labels(**T)
    first = poll(registry.POLL["pg_stat_statements"](), [before])
    assert {name: series[one] for name, series in first.items() if name.endswith("_total")} == {
        name: 0.0 for name in first if name.endswith("_total")
    }
    got = poll(registry.POLL["pg_stat_statements"](), [before], [row])
    assert got["pg_aio_statements_calls_total"][one] == row["calls"] - before["calls"]
    assert got["pg_aio_statements_exec_seconds_total"][one] == pytest.approx(
        (row["exec_time"] - before["exec_time"]) / 1000
    )
    assert got["pg_aio_statements_shared_block_read_seconds_total"][one] == pytest.approx(
        (row["read_time"] - before["read_time"]) / 1000
    )
    for name, column in (
        ("shared_blocks_read", "blocks_read"),
        ("shared_blocks_hit", "blocks_hit"),
        ("rows", "rows"),
    ):
        assert got[f"pg_aio_statements_{name}_total"][one] == row[column] - before[column]
    assert got["pg_aio_statements_entries"][one] == row["statements"]
    # The recording's scans were timed (track_io_timing on) and read from outside the 16 MB
    # of buffers (a 32 MB table), between the two polls.
    assert row["read_time"] > before["read_time"] and row["blocks_read"] > before["blocks_read"]
    assert all(len(series) == 1 for name, series in got.items()), "no per-statement series"


def test_a_new_server_is_recorded_not_added() -> None:
    """Another server behind the target (system identifier) or a restarted one (postmaster
    start) is a first poll again: its statements' counts are recorded, not added, and the
    totals go on from there. A poll that reads no statements (pg_stat_statements_reset()) is
    no new server: what comes after it is counted whole."""

    def statement(calls: float, system_id: str, start: float) -> dict[str, Any]:
        return {
            **dict.fromkeys(("exec_time", "rows", "blocks_read", "blocks_hit"), 0.0),
            **dict.fromkeys(("read_time", "exec_squares"), 0.0),
            "calls": calls,
            "userid": 10,
            "dbid": 5,
            "queryid": 42,
            "system_id": system_id,
            "start_time": start,
        }

    polls = [
        [statement(10, "A", 100.0)],
        [statement(15, "A", 100.0)],  # +5
        [],  # reset
        [statement(17, "A", 100.0)],  # +17
        [statement(1000, "B", 100.0)],  # failover: recorded
        [statement(1003, "B", 100.0)],  # +3
        [statement(1050, "B", 200.0)],  # B restarted: recorded
        [statement(1051, "B", 200.0)],  # +1
    ]
    collector = registry.POLL["pg_stat_statements"]()
    seen = [poll(collector, rows)["pg_aio_statements_calls_total"][labels(**T)] for rows in polls]
    assert seen == [0, 5, 5, 22, 22, 25, 25, 26]


@pytest.mark.parametrize("major", MAJORS)
def test_per_statement_rows_sum_to_the_totals(major: str) -> None:
    poll_rows = load(major)["polls"][1]
    rows = typed(pg_stat_statements.StatementRow, poll_rows["per_statement"])
    summed = sum(map(pg_stat_statements.counters, rows), pg_stat_statements.NO_STATEMENTS)
    (totals,) = poll_rows["totals"]
    # Read right after the totals, whose own call is then counted too.
    assert summed.calls == totals["calls"] + 1
    assert summed.blocks_read == totals["blocks_read"]
    assert len(rows) >= totals["statements"]


@pytest.mark.parametrize("major", MAJORS)
def test_statements_match_across_versions(major: str) -> None:
    """The scan and the IN list are the same statements on every version: one key each, with
    the recording's calls; the IN list of 3 and of 4 constants is one statement."""
    recorded = load(major)
    first, second = (p["per_statement"] for p in recorded["polls"])
    now = statements(second)
    before = statements(first)
    scan = pg_stat_statements.fingerprint("SELECT count(*) FROM aio_demo")
    in_list = pg_stat_statements.fingerprint("SELECT count(*) FROM pg_class WHERE oid IN ($1)")
    by_print = {key[0]: stmt for key, stmt in now.items()}
    assert by_print[scan].counters.calls == recorded["scans"]
    assert by_print[in_list].counters.calls == 2
    assert by_print[scan].database == "postgres"
    assert scan not in {key[0] for key in before}
    keys = {major: set(statements(load(major)["polls"][1]["per_statement"]))}
    other = "17" if major != "17" else "18"
    keys[other] = set(statements(load(other)["polls"][1]["per_statement"]))
    assert {k for k in keys[major] if k[0] in (scan, in_list)} == {
        k for k in keys[other] if k[0] in (scan, in_list)
    }


# 17's text and 18's of the same statement.
ALIKE = (
    (
        "SELECT * FROM t WHERE a IN ($1, $2, $3) AND b = $4",
        "SELECT * FROM t WHERE a IN ($1 /*, ... */) AND b = $2",
    ),
    (
        "SELECT * FROM t WHERE a = ANY(ARRAY[$1, $2])",
        "SELECT * FROM t WHERE a = ANY(ARRAY[$1 /*, ... */])",
    ),
    # Casts squashed with their items, as 18 shows them (tests/test_statement_texts.py).
    (
        "SELECT * FROM t WHERE a IN ($1::int, $2::int) AND b = $3::character varying(8)",
        "SELECT * FROM t WHERE a IN ($1 /*, ... */) AND b = $2::character varying(8)",
    ),
    # = ANY(ARRAY[...]) is the same parse as IN (...), one entry either way.
    (
        "SELECT * FROM t WHERE a = ANY (ARRAY[$1::bigint, $2::bigint, $3::bigint])",
        "SELECT * FROM t WHERE a IN ($1 /*, ... */)",
    ),
)


@pytest.mark.parametrize(("seventeen", "eighteen"), ALIKE)
def test_normalize_squashes_lists_and_parameter_numbers(seventeen: str, eighteen: str) -> None:
    assert pg_stat_statements.normalize(seventeen) == pg_stat_statements.normalize(eighteen)


def test_a_call_with_two_parameters_is_not_a_list() -> None:
    assert pg_stat_statements.normalize("SELECT f($1, $2)") != pg_stat_statements.normalize(
        "SELECT f($1)"
    )


@pytest.mark.parametrize("major", MAJORS)
def test_absent_extension_is_named_not_an_error(major: str) -> None:
    """The recorded error of the server without the extension is classified as absent."""
    message = load(major)["absent_error"]
    assert message.startswith("UndefinedFunction")
    collector = registry.POLL["pg_stat_statements"]()
    assert isinstance(collector, MayBeAbsent)
    assert "not installed" in (collector.absent(psycopg.errors.UndefinedFunction(message)) or "")
    preload = psycopg.errors.ObjectNotInPrerequisiteState("must be loaded via ...")
    assert "shared_preload_libraries" in (collector.absent(preload) or "")
    assert collector.absent(psycopg.errors.QueryCanceled("timeout")) is None


@pytest.mark.parametrize("major", MAJORS)
def test_database_counters(major: str) -> None:
    first, second = (p["pg_stat_database"] for p in load(major)["polls"])
    got = poll(registry.POLL["pg_stat_database"](), second)
    for row in second:
        key = labels(**T, datname=row["datname"])
        assert got["pg_stat_database_xact_commit_total"][key] == row["xact_commit"]
        assert got["pg_stat_database_blks_read_total"][key] == row["blks_read"]
        assert got["pg_stat_database_blks_hit_total"][key] == row["blks_hit"]
        assert got["pg_stat_database_xact_rollback_total"][key] == row["xact_rollback"]
    assert {row["datname"] for row in second} >= {"postgres", "template1"}
    before = database_work(first)
    after = database_work(second)
    assert before is not None and after is not None
    # The recording ran SCANS + 2 statements, each its own transaction, between the polls.
    assert after.transactions - before.transactions >= load(major)["scans"] + 2
    assert after.blocks > before.blocks


@pytest.mark.parametrize("major", MAJORS)
def test_statement_squares_give_each_window_its_per_call_variance(major: str) -> None:
    """calls x (stddev_exec_time² + mean²) is each call's time squared, summed: over the
    recording's scans at least (their time)² / calls (equal only if every scan took as long),
    so the window's variance per call is a real one, and in seconds²."""
    recorded = load(major)
    second = statements(recorded["polls"][1]["per_statement"])
    scan = pg_stat_statements.fingerprint("SELECT count(*) FROM aio_demo")
    (stmt,) = (s for key, s in second.items() if key[0] == scan)
    c = stmt.counters
    assert c.calls == recorded["scans"] and c.exec_squares is not None
    assert c.exec_squares >= c.exec_seconds**2 / c.calls * (1 - 1e-9)
    assert c.exec_squares <= c.exec_seconds**2  # no call longer than all of them
    variance = c.call_variance
    assert variance is not None and variance >= 0


@pytest.mark.parametrize("major", MAJORS)
def test_database_resets_are_read(major: str) -> None:
    """stats_reset per database (0 when never reset): two reads without a reset between them
    continue each other."""
    first, second = (database_work(p["pg_stat_database"]) for p in load(major)["polls"])
    assert first is not None and second is not None
    assert {name for name, _ in second.resets} >= {"postgres", "template1"}
    assert second.continues(first)

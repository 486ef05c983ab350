"""Each collector fed with rows recorded from real PostgreSQL 16.14, 17.10, 18.6 and 19rc1
(tests/fixtures/rows, made by tests/fixtures/record_rows.py), like postgres_exporter's
per-collector tests. Expected values come from the rows and from what the servers were set to
(shared_buffers 16MB, track_io_timing on, PG 18's and 19's defaults), never from the
collector's output."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from collections import Counter
from typing import Any

import pytest

import recorded
from harness import Samples, labels, parse
from pg_aio_exporter import collectors
from pg_aio_exporter.collectors import activity, pg_aios, pg_stat_io, pg_stat_statements, registry
from pg_aio_exporter.collectors import base as collector_base
from pg_aio_exporter.collectors.base import PollCollector, SampleCollector
from pg_aio_exporter.expose.metricset import MetricSet

pytestmark = pytest.mark.unit
T = {"target": "recorded"}
Rows = list[dict[str, Any]]
POOL_BOUNDS = ("pg_settings_io_min_workers", "pg_settings_io_max_workers")  # 19's io worker pool


def poll(collector: PollCollector[Any], *polls: Rows) -> Samples:
    """The collector's metrics after the given polls of recorded rows (the last one
    published), each read into the collector's row type as the worker reads it."""
    out = MetricSet(T)
    for rows in polls:
        out = MetricSet(T)
        collector.collect(recorded.typed(collector.row_type, rows), out)
    return _render(out)


def _render(out: MetricSet) -> Samples:
    return parse("".join(f.header.decode() + "".join(f.lines) for f in out.families()))


def sampled(collector: SampleCollector[Any], major: str) -> Samples:
    """Every recorded sample observed, one window rolled, counters and gauges published."""
    data = recorded.load(major)
    for sample in data["samples"]:
        rows = recorded.typed(collector.row_type, sample[collector.name])
        collector.observe(rows, data["server_version_num"])
    collector.roll_window(len(data["samples"]), float(len(data["samples"])))
    out = MetricSet(T)
    collector.collect_counters(out)
    collector.collect_gauges(out)
    return _render(out)


def polls(major: str, name: str) -> tuple[Rows, Rows]:
    first, second = recorded.load(major)["polls"]
    return first[name], second[name]


# Collectors whose counters are not read from their rows: pg_stat_statements serves its own
# totals, summed from its rows' StatementCounters.
READ_FROM: dict[str, type[Any]] = {"pg_stat_statements": pg_stat_statements.StatementCounters}


def counter_specs() -> list[tuple[str, tuple[collector_base.Counter, ...], type[Any]]]:
    """Every collector module's counter specs (COUNTERS) with the type their columns are read
    from: the module's collector's row type, or (pg_stat_statements, whose totals are its own)
    StatementCounters."""
    found = []
    for info in pkgutil.iter_modules(collectors.__path__):
        module = importlib.import_module(f"{collectors.__name__}.{info.name}")
        specs = getattr(module, "COUNTERS", None)
        if specs is None:
            continue
        owners = [
            c for c in vars(module).values() if isinstance(getattr(c, "row_type", None), type)
        ]
        (owner,) = {c.row_type for c in owners}
        found.append((info.name, specs, READ_FROM.get(info.name, owner)))
    return found


def test_every_counter_reads_a_field_of_its_row_type() -> None:
    """Counter.publish_from reads a counter by its column name: a spec whose column is no field
    of the row type (every server version's SQL selects every field) fails here, not at run
    time."""
    specs = counter_specs()
    assert {name for name, _, _ in specs} == {
        "checkpointer",
        "pg_stat_database",
        "pg_stat_io",
        "pg_stat_statements",
        "pg_stat_wal",
    }
    for name, counters, row_type in specs:
        missing = unread(counters, row_type)
        assert not missing, f"{name}: no field {missing} in {row_type.__name__}"


def unread(counters: tuple[collector_base.Counter, ...], row_type: type[Any]) -> list[str]:
    """The columns of `counters` that are no field of `row_type`."""
    fields = {f.name for f in dataclasses.fields(row_type)}
    return [c.column for c in counters if c.column not in fields]


def test_a_counter_of_a_wrong_column_fails_the_check() -> None:
    """The check above can fail: a spec naming no field of the row type is found, and would
    raise at run time."""
    wrong = collector_base.Counter("reeds", "pg_stat_io_reeds", "A typo.")
    assert unread((*pg_stat_io.COUNTERS, wrong), pg_stat_io.IoRow) == ["reeds"]
    _, rows = polls("18", "pg_stat_io")
    with pytest.raises(AttributeError):
        wrong.publish_from(recorded.typed(pg_stat_io.IoRow, rows)[0], MetricSet(T))


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_recorded_columns_are_the_row_types_fields(major: str) -> None:
    """Each view's recorded columns (its SQL's aliases on that version) are exactly the
    fields of its collector's row type that have no default."""
    data = recorded.load(major)
    every = {**registry.POLL, **registry.SAMPLE}
    # Every poll's and sample's rows of a view: a sample may have none (19's last pg_aios).
    views: dict[str, Rows] = {}
    for read in [*data["polls"], *data["samples"]]:
        for name, rows in read.items():
            views.setdefault(name, []).extend(rows)
    for name, rows in views.items():
        row_type = every[name]().row_type
        required = {
            f.name
            for f in dataclasses.fields(row_type)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        assert {column for row in rows for column in row} == required, name


def key(row: dict[str, Any], **extra: str) -> frozenset[tuple[str, str]]:
    return labels(
        **T, backend_type=row["backend_type"], object=row["object"], context=row["context"], **extra
    )


# -- pg_stat_io ----------------------------------------------------------------------------


# The recorded pg_stat_io columns that are no counter of a row.
NOT_COUNTERS = {"backend_type", "object", "context"} | {
    "stats_reset",
    "track_io_timing",
    "block_size",
    "start_time",
}


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_pg_stat_io_counters_are_the_rows_in_base_units(major: str) -> None:
    _, rows = polls(major, "pg_stat_io")
    got = poll(registry.POLL["pg_stat_io"](), rows)
    checked = idle = 0
    for row in rows:
        if not any(
            v for k, v in row.items() if k not in NOT_COUNTERS
        ):  # idle since the reset: no series at all (16 zeros saved)
            assert all(key(row) not in series for series in got.values()), key(row)
            idle += 1
            continue
        for column, metric in (
            ("reads", "pg_stat_io_reads_total"),
            ("read_bytes", "pg_stat_io_read_bytes_total"),
            ("hits", "pg_stat_io_hits_total"),
            ("evictions", "pg_stat_io_evictions_total"),
        ):
            if row[column] is None:
                assert key(row) not in got.get(metric, {}), "NULL is not 0"
            else:
                assert got[metric][key(row)] == row[column]
                checked += 1
        if row["read_time"] is not None:
            seconds = got["pg_stat_io_read_time_seconds_total"][key(row)]
            assert seconds == pytest.approx(row["read_time"] / 1000, rel=1e-12)
    assert checked > 20
    assert idle > 20  # the recorded servers, like any, leave most rows idle


@pytest.mark.parametrize("major", ["16", "17"])
def test_pg_stat_io_bytes_before_18_are_blocks_of_8192(major: str) -> None:
    _, rows = polls(major, "pg_stat_io")
    read = [row for row in rows if row["reads"]]
    assert read
    assert all(row["read_bytes"] == row["reads"] * 8192 for row in read)


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_pg_stat_io_interval_gauges(major: str) -> None:
    first, second = polls(major, "pg_stat_io")
    got = poll(registry.POLL["pg_stat_io"](), first, second)
    before = {(r["backend_type"], r["object"], r["context"]): r for r in first}
    bulkread = 0
    for row in second:
        old = before[(row["backend_type"], row["object"], row["context"])]
        if row["reads"] is None or row["reads"] == old["reads"]:
            assert key(row) not in got.get("pg_aio_read_size_bytes", {}), "no reads, no gauge"
            continue
        reads = row["reads"] - old["reads"]
        nbytes = row["read_bytes"] - old["read_bytes"]
        seconds = (row["read_time"] - old["read_time"]) / 1000
        hits = row["hits"] - old["hits"]
        assert got["pg_aio_read_size_bytes"][key(row)] == pytest.approx(nbytes / reads)
        assert got["pg_aio_read_latency_seconds"][key(row)] == pytest.approx(seconds / reads)
        assert got["pg_aio_read_seconds_per_byte"][key(row)] == pytest.approx(seconds / nbytes)
        # Hits count blocks (8192 bytes on the recording servers), reads operations.
        assert got["pg_aio_hit_ratio"][key(row)] == pytest.approx(hits / (hits + nbytes / 8192))
        if row["context"] == "bulkread" and row["backend_type"] == "client backend":
            bulkread = nbytes / reads
    # Two sequential scans on slowed storage: 8 kB reads before 18, combined reads from 18.
    assert bulkread == 8192 if int(major) < 18 else bulkread > 8192


def test_pg_stat_io_read_time_without_reads_has_no_gauge() -> None:
    """PostgreSQL 19 counts in read_time the wait for a read another backend issued, while the
    waiting row's reads stay 0 (issue 45): 19's recorded rows, the client backends' normal row
    given 40 ms of such waiting between the polls. That row has no per-read gauge (never a
    division by 0), its wait is served in its counter, and every other row is as recorded."""
    first, second = polls("19", "pg_stat_io")
    normal = ("client backend", "relation", "normal")
    before = next(r for r in first if (r["backend_type"], r["object"], r["context"]) == normal)
    waited = [
        {**row, "reads": before["reads"], "read_bytes": before["read_bytes"]}
        | {"read_time": before["read_time"] + 40.0}
        if (row["backend_type"], row["object"], row["context"]) == normal
        else row
        for row in second
    ]
    as_recorded = poll(registry.POLL["pg_stat_io"](), first, second)
    got = poll(registry.POLL["pg_stat_io"](), first, waited)
    row = key(before)
    assert row in as_recorded["pg_aio_read_latency_seconds"], "the row read between the polls"
    for gauge in ("pg_aio_read_latency_seconds", "pg_aio_read_seconds_per_byte"):
        assert row not in got.get(gauge, {}), gauge
        others = {k: v for k, v in as_recorded.get(gauge, {}).items() if k != row}
        assert got.get(gauge, {}) == others, gauge
    assert got["pg_stat_io_read_time_seconds_total"][row] == pytest.approx(
        (before["read_time"] + 40.0) / 1000
    )


# -- settings and server ----------------------------------------------------------------------


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_settings_in_base_units(major: str) -> None:
    rows, _ = polls(major, "settings")
    got = poll(registry.POLL["settings"](), rows)
    assert got["pg_settings_shared_buffers_bytes"][labels(**T)] == 16 * 1024 * 1024
    assert got["pg_settings_track_io_timing"][labels(**T)] == 1
    assert got["pg_settings_track_wal_io_timing"][labels(**T)] == 1  # set for the recording
    if int(major) >= 18:  # the defaults: io_workers on 18, the pool's bounds on 19
        assert got["pg_settings_io_combine_limit_bytes"][labels(**T)] == 16 * 8192
        pool = {
            name: got[name][labels(**T)]
            for name in ("pg_settings_io_workers", *POOL_BOUNDS)
            if name in got
        }
        assert pool == (
            {"pg_settings_io_workers": 3}
            if major == "18"
            else {"pg_settings_io_min_workers": 2, "pg_settings_io_max_workers": 8}
        )
        # One series per method the build offers: sync and worker; io_uring too where the
        # build links liburing (Debian's 19, not the 18 wheel).
        (offered,) = [row["enumvals"] for row in rows if row["name"] == "io_method"]
        assert set(offered) == {"sync", "worker"} | ({"io_uring"} if major == "19" else set())
        assert got["pg_aio_io_method"] == {
            labels(**T, io_method=method): float(method == "worker") for method in offered
        }
    else:
        assert "pg_aio_io_method" not in got and "pg_settings_io_workers" not in got
    assert "pg_settings_pending_restart" not in got


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_server_facts(major: str) -> None:
    rows, _ = polls(major, "server")
    got = poll(registry.POLL["server"](), rows)
    version_num = recorded.load(major)["server_version_num"]
    (info,) = got["pg_server_info"]
    assert dict(info)["version_num"] == str(version_num)
    assert re.match(rf"{major}\D", dict(info)["version"])  # 18.6, 19rc1
    assert got["pg_aio_supported"][labels(**T)] == (1 if int(major) >= 18 else 0)
    assert got["pg_postmaster_start_time_seconds"][labels(**T)] == rows[0]["start_time"]


# -- sampled: activity and pg_aios ------------------------------------------------------------


def _activity_rows(major: str) -> Rows:
    return [row for s in recorded.load(major)["samples"] for row in s["activity"]]


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_activity_wait_events(major: str) -> None:
    got = sampled(registry.SAMPLE["activity"](), major)
    expected: Counter[tuple[str, str, str]] = Counter()
    for row in _activity_rows(major):
        client = row["backend_type"] == "client backend"
        if (client and row["state"] == "active") or (
            not client and row["wait_event_type"] != "Activity" and row["state"] is None
        ):
            key = (row["backend_type"], row["wait_event_type"] or "CPU", row["wait_event"] or "CPU")
            expected[key] += row["n"]
    assert expected[
        ("client backend", "IO", "DataFileRead" if int(major) < 18 else "AioIoCompletion")
    ]
    exported = {
        (dict(k)["backend_type"], dict(k)["wait_event_type"], dict(k)["wait_event"]): v
        for k, v in got["pg_aio_wait_event_samples_total"].items()
    }
    assert exported == expected


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_io_worker_utilisation(major: str) -> None:
    got = sampled(registry.SAMPLE["activity"](), major)
    if int(major) < 18:
        assert not [name for name in got if name.startswith("pg_aio_io_worker")]
        return
    workers = [r for r in _activity_rows(major) if r["backend_type"] == "io worker"]
    busy = sum(r["n"] for r in workers if r["wait_event"] != "IoWorkerMain")
    slots = sum(r["n"] for r in workers)
    assert busy > 0
    assert got["pg_aio_io_worker_busy_samples_total"][labels(**T)] == busy
    assert got["pg_aio_io_worker_samples_total"][labels(**T)] == slots
    assert got["pg_aio_io_worker_utilization_ratio"][labels(**T)] == busy / slots
    # The io workers of the last sample: io_workers' default on 18; on 19 the pool, which
    # starts at io_min_workers (2) and may have grown under the scans.
    last = recorded.load(major)["samples"][-1]["activity"]
    running = sum(r["n"] for r in last if r["backend_type"] == "io worker")
    assert running == 3 if major == "18" else 2 <= running <= 8
    assert got["pg_aio_io_workers"][labels(**T)] == running


def _worker_rows(idle: int, busy: int) -> list[activity.ActivityRow]:
    rows = [
        activity_row("checkpointer", None, "Activity", "CheckpointerMain", 1),
        activity_row("client backend", "active", "IO", "AioIoUringExecution", 2),
    ]
    for wait_type, wait, n in (("Activity", "IoWorkerMain", idle), ("IO", "DataFileRead", busy)):
        if n:
            rows.append(activity_row("io worker", None, wait_type, wait, n))
    return rows


def test_no_io_workers_means_no_io_worker_metrics() -> None:
    """io_method sync or io_uring: background processes are visible, none is an io worker.
    The io worker metrics are absent, as before PostgreSQL 18, not 0."""
    collector = activity.ActivityCollector()
    for _ in range(3):
        assert collector.observe(_worker_rows(idle=0, busy=0), 180006) is None
    collector.roll_window(3, 3.0)
    out = MetricSet(T)
    collector.collect_counters(out)
    collector.collect_gauges(out)
    got = _render(out)
    assert not [name for name in got if name.startswith("pg_aio_io_worker")], got.keys()
    waits = got["pg_aio_wait_event_samples_total"]
    assert waits[labels(**T, backend_type="client backend", wait_event_type="IO",
                        wait_event="AioIoUringExecution")] == 6  # fmt: skip


def test_io_worker_denominator_follows_a_pool_change() -> None:
    """io_workers 3 -> 1 within one window: the worker samples counter adds each sample's pool
    size, so rate(busy) / rate(worker samples) is exact over any window, like the gauge."""
    collector = activity.ActivityCollector()
    for _ in range(10):
        collector.observe(_worker_rows(idle=2, busy=1), 180006)
    for _ in range(30):
        collector.observe(_worker_rows(idle=0, busy=1), 180006)
    collector.roll_window(40, 40.0)
    out = MetricSet(T)
    collector.collect_counters(out)
    collector.collect_gauges(out)
    got = _render(out)
    assert got["pg_aio_io_worker_busy_samples_total"][labels(**T)] == 40
    assert got["pg_aio_io_worker_samples_total"][labels(**T)] == 10 * 3 + 30 * 1
    assert got["pg_aio_io_worker_utilization_ratio"][labels(**T)] == 40 / 60
    assert got["pg_aio_io_workers"][labels(**T)] == 1
    # Later, a server restarted with io_method=io_uring: no io workers, the metrics go.
    collector.observe(_worker_rows(idle=0, busy=0), 180006)
    collector.roll_window(1, 1.0)
    out = MetricSet(T)
    collector.collect_counters(out)
    collector.collect_gauges(out)
    assert not [name for name in _render(out) if name.startswith("pg_aio_io_worker")]


def test_pg_aios_in_flight() -> None:
    got = sampled(registry.SAMPLE["pg_aios"](), "18")
    rows = [row for s in recorded.load("18")["samples"] for row in s["pg_aios"]]
    handles: Counter[tuple[str, str]] = Counter()
    for row in rows:
        handles[(row["state"], row["operation"])] += row["n"]
    exported = {
        (dict(k)["state"], dict(k)["operation"]): v
        for k, v in got["pg_aio_in_flight_samples_total"].items()
    }
    assert exported == handles and handles
    deepest = max(sum(r["n"] for r in s["pg_aios"]) for s in recorded.load("18")["samples"])
    assert got["pg_aio_in_flight_max"][labels(**T, operation="readv")] == deepest
    assert got["pg_aio_in_flight_max"][labels(**T, operation="writev")] == 0
    in_bytes = sum(row["bytes"] for row in rows)
    assert got["pg_aio_in_flight_bytes_samples_total"][labels(**T, operation="readv")] == in_bytes


def test_pg_aios_only_from_18() -> None:
    collector = registry.SAMPLE["pg_aios"]()
    assert collector.query(170010) is None and collector.query(180006) == pg_aios.SQL


@pytest.mark.parametrize("major", ["17", "18", "19"])
def test_recorded_clients_starting_up_are_not_hidden(major: str) -> None:
    """record_rows.py held clients in their startup while a superuser sampled."""
    rows = _activity_rows(major)
    starting = {row["state"] for row in rows if row["backend_type"] == "client backend"} & {
        None,
        "starting",
    }
    assert starting == ({None, "starting"} if int(major) >= 18 else {None})
    collector = registry.SAMPLE["activity"]()
    data = recorded.load(major)
    for sample in data["samples"]:
        read = recorded.typed(activity.ActivityRow, sample["activity"])
        assert collector.observe(read, data["server_version_num"]) is None


def activity_row(
    backend_type: str | None, state: str | None, wait_type: str | None, wait: str | None, n: int
) -> activity.ActivityRow:
    """A row of activity.SQL: PostgreSQL hides a process from a role without pg_monitor by
    NULLs in backend_type (and every other column but the user) and a query column of
    '<insufficient privilege>'."""
    return activity.ActivityRow(backend_type, state, wait_type, wait, backend_type is None, n)


def observed(collector: activity.ActivityCollector) -> Samples:
    collector.roll_window(1, 1.0)
    out = MetricSet(T)
    collector.collect_counters(out)
    collector.collect_gauges(out)
    return _render(out)


def test_hidden_rows_are_reported_and_hide_the_io_workers() -> None:
    """Without pg_read_all_stats other sessions and every background process show NULLs."""
    collector = activity.ActivityCollector()
    rows = [
        activity_row(None, None, None, None, 7),
        activity_row("client backend", "active", None, None, 1),
    ]
    hidden = collector.observe(rows, 180006)
    assert hidden is not None and hidden.startswith("7 processes hidden")
    got = observed(collector)
    assert "pg_aio_io_workers" not in got, "unknown, not 0"
    assert got["pg_aio_wait_event_samples_total"] == {
        labels(**T, backend_type="client backend", wait_event_type="CPU", wait_event="CPU"): 1
    }


def test_sleeping_and_idle_processes_do_no_work() -> None:
    """Issue 49: a spread checkpoint, a throttled autovacuum, pg_cron's idle launcher and a
    logical walsender waiting for WAL are no active sessions; the checkpointer writing is, and
    so is whatever a client or a parallel worker of its statement waits on."""
    collector = activity.ActivityCollector()
    rows = [
        activity_row("checkpointer", None, "Timeout", "CheckpointWriteDelay", 1),
        activity_row("autovacuum worker", None, "Timeout", "VacuumDelay", 1),
        activity_row("pg_cron launcher", None, "Extension", "Extension", 1),
        activity_row("walsender", "active", "Client", "WalSenderWaitForWal", 1),
        activity_row("checkpointer", None, "IO", "DataFileWrite", 1),
        activity_row("client backend", "active", "Timeout", "PgSleep", 1),
        activity_row("parallel worker", "active", "Timeout", "VacuumDelay", 2),
    ]
    assert collector.observe(rows, 180006) is None
    assert observed(collector)["pg_aio_wait_event_samples_total"] == {
        labels(**T, backend_type=b, wait_event_type=c, wait_event=e): n
        for b, c, e, n in (
            ("checkpointer", "IO", "DataFileWrite", 1),
            ("client backend", "Timeout", "PgSleep", 1),
            ("parallel worker", "Timeout", "VacuumDelay", 2),
        )
    }


def test_a_client_starting_up_is_not_hidden() -> None:
    """What a superuser sees of clients that are still starting: PostgreSQL 18 says 'starting'
    while one authenticates; 17 and 18 leave the state NULL, its user known, while a login event
    trigger runs (and so did every version between backend start and the first query). Neither
    is hidden, and neither is working yet."""
    collector = activity.ActivityCollector()
    rows = [
        activity_row("client backend", None, "Timeout", "PgSleep", 1),
        activity_row("client backend", "starting", "Client", "ClientRead", 2),
        activity_row("client backend", "active", "IO", "DataFileRead", 1),
    ]
    assert collector.observe(rows, 180006) is None
    assert observed(collector)["pg_aio_wait_event_samples_total"] == {
        labels(
            **T, backend_type="client backend", wait_event_type="IO", wait_event="DataFileRead"
        ): 1
    }


# -- write side (pg_stat_io writes, pg_stat_wal) ------------------------------------------------

# Operation -> the pg_stat_io columns of its count, bytes (None: none of its own) and time.
WRITE_OPERATIONS = {
    "write": ("writes", "write_bytes", "write_time"),
    "extend": ("extends", "extend_bytes", "extend_time"),
    "writeback": ("writebacks", None, "writeback_time"),
    "fsync": ("fsyncs", None, "fsync_time"),
}


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_pg_stat_io_write_interval_gauges(major: str) -> None:
    """Each write operation's time per operation and per byte, from the rows' deltas; none for
    a row that did not do that operation, and none for PostgreSQL 18's wal rows."""
    first, second = polls(major, "pg_stat_io")
    got = poll(registry.POLL["pg_stat_io"](), first, second)
    before = {(r["backend_type"], r["object"], r["context"]): r for r in first}
    seen: Counter[str] = Counter()
    for row in second:
        old = before[(row["backend_type"], row["object"], row["context"])]
        for op, (count, nbytes, time_ms) in WRITE_OPERATIONS.items():
            latency = got.get(f"pg_aio_{op}_latency_seconds", {})
            done = (row[count] or 0) - (old[count] or 0)
            if done <= 0 or row["object"] == "wal":
                assert key(row) not in latency
                continue
            seconds = (row[time_ms] - old[time_ms]) / 1000
            assert latency[key(row)] == pytest.approx(seconds / done)
            if nbytes is not None:
                per_byte = got[f"pg_aio_{op}_seconds_per_byte"][key(row)]
                assert per_byte == pytest.approx(seconds / (row[nbytes] - old[nbytes]))
            seen[op] += 1
    # The recording's write load between the polls: a bulk load, commits, a checkpoint.
    assert seen["write"] and seen["fsync"] and seen["writeback"], seen
    checkpointer = key({"backend_type": "checkpointer", "object": "relation", "context": "normal"})
    assert checkpointer in got["pg_aio_write_latency_seconds"]


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_pg_stat_wal_same_names_on_every_version(major: str) -> None:
    """WAL writes and syncs from pg_stat_wal (16, 17) or pg_stat_io's wal rows (18), under one
    set of names; the interval gauges from the two polls' deltas."""
    first, second = polls(major, "pg_stat_wal")
    got = poll(registry.POLL["pg_stat_wal"](), first, second)
    (old,), (row,) = first, second
    me = labels(**T)
    assert got["pg_aio_wal_writes_total"][me] == row["writes"]
    assert got["pg_aio_wal_syncs_total"][me] == row["syncs"]
    assert got["pg_aio_wal_sync_time_seconds_total"][me] == pytest.approx(row["sync_time"] / 1000)
    assert got["pg_stat_wal_bytes_total"][me] == row["wal_bytes"]
    syncs = row["syncs"] - old["syncs"]
    assert syncs >= 20, "every single-row commit of the recording syncs WAL"
    sync_seconds = (row["sync_time"] - old["sync_time"]) / 1000
    assert got["pg_aio_wal_sync_latency_seconds"][me] == pytest.approx(sync_seconds / syncs)
    writes = row["writes"] - old["writes"]
    write_seconds = (row["write_time"] - old["write_time"]) / 1000
    assert got["pg_aio_wal_write_latency_seconds"][me] == pytest.approx(write_seconds / writes)
    if int(major) >= 18:  # the same figures as the sum of pg_stat_io's wal rows
        io = [r for r in polls(major, "pg_stat_io")[1] if r["object"] == "wal"]
        normal = [r for r in io if r["context"] == "normal"]
        assert row["syncs"] == sum(r["fsyncs"] or 0 for r in normal)
        assert row["writes"] == sum(r["writes"] or 0 for r in normal)


def test_pg_stat_wal_gauges_absent_without_wal_timing() -> None:
    first, second = polls("18", "pg_stat_wal")
    off = [{**second[0], "track_wal_io_timing": False}]
    got = poll(registry.POLL["pg_stat_wal"](), first, off)
    assert "pg_aio_wal_writes_total" in got
    assert "pg_aio_wal_sync_latency_seconds" not in got
    assert "pg_aio_wal_write_latency_seconds" not in got


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_checkpointer_same_names_before_and_after_17(major: str) -> None:
    """pg_stat_bgwriter's checkpoint columns (16) and pg_stat_checkpointer's (17, 18) under one
    set of names; the recording's CHECKPOINT between the polls is a requested one."""
    first, second = polls(major, "checkpointer")
    got = poll(registry.POLL["checkpointer"](), second)
    (old,), (row,) = first, second
    me = labels(**T)
    assert got["pg_aio_checkpoints_requested_total"][me] == row["requested"]
    assert row["requested"] - old["requested"] >= 1
    assert got["pg_aio_checkpoint_buffers_written_total"][me] == row["buffers_written"]
    assert row["buffers_written"] > old["buffers_written"]
    seconds = got["pg_aio_checkpoint_sync_time_seconds_total"][me]
    assert seconds == pytest.approx(row["sync_time"] / 1000)
    assert got["pg_aio_bgwriter_maxwritten_clean_total"][me] == row["maxwritten_clean"]


def test_wal_sync_sampled_seconds_move_at_the_polls() -> None:
    """The processes sampled in a WAL sync, by both names (16's WALSync, 17's WalSync), io
    workers aside, become seconds only when a window rolls (a poll): each window adds its
    average processes in a WAL sync times its length, whatever the sample count."""
    syncing = [
        activity_row("client backend", "active", "IO", "WalSync", 2),
        activity_row("walwriter", None, "IO", "WALSync", 1),
        activity_row("io worker", None, "IO", "WalSync", 1),
        activity_row("client backend", "active", "LWLock", "WALWrite", 3),
    ]

    def seconds() -> float:
        out = MetricSet(T)
        collector.collect_counters(out)
        return _render(out)["pg_aio_wal_sync_sampled_seconds_total"][labels(**T)]

    collector = activity.ActivityCollector()
    for _ in range(4):
        collector.observe(syncing, 180006)
    assert seconds() == 0  # sampled, not yet polled
    collector.roll_window(4, 30.0)  # 3 processes syncing for a 30 s poll interval
    assert seconds() == 90
    collector.observe(syncing, 180006)
    collector.observe(syncing[3:], 180006)
    collector.roll_window(2, 10.0)  # 1.5 on average for 10 s
    assert seconds() == 105
    collector.roll_window(0, 5.0)  # no sample (disconnected): nothing known, nothing added
    assert seconds() == 105


@pytest.mark.parametrize("major", recorded.MAJORS)
def test_collectors_serve_only_the_names_they_declare(major: str) -> None:
    """A collector's `families` is what turning it off takes away (alerts/needs.py derives the
    alerts each costs from it): every name it serves from recorded rows is declared, 19's
    pool bounds included (tests/test_switches.py checks the converse on a live server)."""
    data = recorded.load(major)
    served: dict[str, set[str]] = {}
    for collector in registry.poll_collectors():
        if collector.name in data["polls"][0]:
            served[collector.name] = set(poll(collector, *polls(major, collector.name)))
    for sampler in registry.sample_collectors():
        if sampler.name in data["samples"][0]:
            served[sampler.name] = set(sampled(sampler, major))
    declared = registry.families()
    for name, names in served.items():
        assert names, name
        assert names <= set(declared[name]), (name, names - set(declared[name]))
    if major == "19":
        assert set(POOL_BOUNDS) <= served["settings"]

"""`pg-aio-exporter report` against real servers: the acceptance cases of issue 18, each a real
run of the command on a real PostgreSQL with a real workload (slow storage from the read-delay
shim), its JSON checked against the documented schema.

Reports run 10-15 s each; the slow servers are shared by the module.
"""

from __future__ import annotations

import json
import math
import os
import pty
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any, TypedDict

import jsonschema
import psycopg
import pytest

import pgbins
from harness import MONITOR_PASSWORD, assert_one_line, scanning, set_io_workers
from pg_aio_exporter import thresholds
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import ROWS_PER_MB, Workload, create_table
from pg_aio_exporter.report.document import SCHEMA_FILE
from slowread import SlowReads

SCHEMA = json.loads(SCHEMA_FILE.read_text())
TABLES = ("t0", "t1", "t2", "t3")  # one per scanning client (two scans of one table sync up)
TABLE_MB = 16
# A scan reads this much of its table, then commits: pg_stat_io counts a backend's reads when
# its transaction ends, so scans must end within the window to be counted (reads_not_yet_counted
# is the case where they do not).
SCAN_ROWS = 2 * ROWS_PER_MB


def run_report(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def report_json(*args: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    result = run_report(*args, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, SCHEMA)
    return doc, result


def findings(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in doc["findings"]}


def serious(doc: dict[str, Any]) -> list[str]:
    return [f["id"] for f in doc["findings"] if f["severity"] in ("warning", "critical")]


def sql(server: LocalServer, *statements: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


# --- PostgreSQL 18, healthy storage ------------------------------------------------------------


def backend_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_healthy_storage_light_workload(pg18: LocalServer, tmp_path: Path) -> None:
    """No warning; reads not storage-bound; one connection, whose CPU is measured."""
    workload = Workload(pg18.dsn(), clients=1).start()
    saved = tmp_path / "healthy.json"
    connections: list[int] = []
    cpu: dict[int, float] = {}
    watching = threading.Event()

    def watch() -> None:
        with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
            while not watching.is_set():
                pids = [
                    row[0]
                    for row in conn.execute(
                        "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                        ("pg_aio_exporter",),
                    )
                ]
                connections.append(len(pids))
                for pid in pids:
                    with suppress(OSError):  # the backend ended between the two reads
                        cpu[pid] = backend_cpu_seconds(pid)
                time.sleep(0.25)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run_report("--dsn", pg18.dsn(), "--duration", "12s", "--save", str(saved))
    finally:
        watching.set()
        watcher.join()
        workload.stop()
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "no progress and no log lines when stderr is not a terminal"
    text = result.stdout
    assert max(len(line) for line in text.splitlines()) <= 100
    doc = json.loads(saved.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert serious(doc) == [], doc["findings"]
    assert doc["verdict"]["storage"].startswith("Reads are not storage-bound"), doc["verdict"]
    assert doc["verdict"]["storage"] in " ".join(text.split())
    total = doc["reads"]["total"]
    assert total["reads_per_second"] >= 10
    assert total["seconds_per_byte"] > 0
    assert doc["server"]["io_method"] == "worker"
    assert doc["activity"]["samples"] >= 10
    assert doc["activity"]["io_workers"] == 3
    assert max(connections) == 1 and 1 in connections, "the report is one connection"
    (pid,) = cpu
    print(f"[report] server CPU of the report's backend: {cpu[pid] * 1000:.0f} ms in 12 s")


def on_a_terminal(*args: str) -> tuple[int, str, bytes]:
    """Run a report with stderr on a pseudo-terminal: exit code, stdout, what stderr showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pg_aio_exporter", "report", *args],
        stdout=subprocess.PIPE,
        stderr=follower,
    )
    os.close(follower)
    shown = b""
    with suppress(OSError):  # EIO once the report has exited and closed its end
        while chunk := os.read(leader, 1024):
            shown += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(leader)
    return proc.returncode, out.decode(), shown


def test_idle_server_has_no_read_activity(pg18: LocalServer) -> None:
    """Also: progress (time left, samples taken) on stderr when it is a terminal."""
    code, out, shown = on_a_terminal("--dsn", pg18.dsn(), "--duration", "10s", "--format", "json")
    assert code == 0
    assert b"left," in shown and b"samples taken" in shown, shown
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    found = findings(doc)
    assert "no_read_activity" in found, doc["reads"]
    assert serious(doc) == []
    assert "Not judged" in doc["verdict"]["reads"]


def report_under_load(
    server: LocalServer, dsn: str
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """A 10 s report while the demo's workload (one client) reads."""
    workload = Workload(server.dsn(), clients=1).start()
    try:
        return report_json("--dsn", dsn, "--duration", "10s")
    finally:
        workload.stop()


def test_track_io_timing_off(pg18: LocalServer) -> None:
    sql(pg18, "ALTER SYSTEM SET track_io_timing = off", "SELECT pg_reload_conf()")
    try:
        doc, result = report_under_load(pg18, pg18.dsn())
    finally:
        sql(pg18, "ALTER SYSTEM RESET track_io_timing", "SELECT pg_reload_conf()")
    assert result.returncode == 0
    assert "track_io_timing_off" in findings(doc)
    total = doc["reads"]["total"]
    assert total["reads"] > 0
    # No latency invented: none measured, none shown.
    assert total["read_time_seconds"] is None
    assert total["seconds_per_read"] is None and total["seconds_per_byte"] is None
    assert all(row["seconds_per_byte"] is None for row in doc["reads"]["rows"])
    assert "not measured" in doc["verdict"]["reads"]


def test_role_without_pg_monitor_says_what_it_could_not_see(pg18: LocalServer) -> None:
    sql(pg18, "DROP ROLE IF EXISTS report_plain", "CREATE ROLE report_plain LOGIN")
    doc, result = report_under_load(pg18, pg18.dsn(user="report_plain"))
    assert result.returncode == 0
    unseen = " ".join(doc["not_visible"])
    assert "pg_monitor" in unseen, doc["not_visible"]
    assert "pg_aios" in unseen
    assert doc["activity"]["io_workers"] is None
    assert "not visible" in doc["verdict"]["io_workers"]
    assert doc["reads"]["total"]["reads"] > 0, "pg_stat_io needs no privilege"


# Each section's views, made unreadable to a role (the grant PostgreSQL gives PUBLIC revoked),
# with the collector that reads them: Server, Reads, Sampled activity, Workload, Writes.
UNREADABLE = {
    "settings": ("TABLE pg_catalog.pg_settings",),
    "pg_stat_io": ("TABLE pg_catalog.pg_stat_io",),
    "activity": ("TABLE pg_catalog.pg_stat_activity",),
    "pg_stat_statements": (
        "FUNCTION pg_stat_statements(boolean)",
        "FUNCTION pg_stat_statements_info()",
    ),
    "pg_stat_database": ("TABLE pg_catalog.pg_stat_database",),
    "pg_stat_wal": ("TABLE pg_catalog.pg_stat_wal",),
    "checkpointer": ("TABLE pg_catalog.pg_stat_checkpointer",),
}


def test_what_was_not_read_is_neither_off_nor_zero(tmp_path: Path) -> None:
    """A collector of each section fails at every read (permission denied; pg_monitor does
    not grant these back): the report says not read, judges nothing from it, and finds no
    track_io_timing_off nor too little traffic, so --fail-on warning exits 0."""
    server = LocalServer.create(
        settings={
            "shared_buffers": "16MB",
            "track_io_timing": "on",  # on: the report must not call it off
            "shared_preload_libraries": "pg_stat_statements",
        }
    )
    try:
        server.start()
        create_table(server.dsn(), 24)
        revokes = [
            f"REVOKE ALL ON {thing} FROM PUBLIC"
            for things in UNREADABLE.values()
            for thing in things
        ]
        sql(
            server,
            "CREATE EXTENSION pg_stat_statements",
            "CREATE ROLE blind LOGIN IN ROLE pg_monitor",
            *revokes,
        )
        saved = tmp_path / "blind.json"
        workload = Workload(server.dsn(), clients=1).start()
        try:
            result = run_report(
                *("--dsn", server.dsn(user="blind"), "--duration", "10s"),
                *("--fail-on", "warning", "--save", str(saved)),
            )
        finally:
            workload.stop()
    finally:
        server.destroy()
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(saved.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["not_read"] == sorted(UNREADABLE), doc["not_visible"]
    assert findings(doc) == {}, doc["findings"]
    # Server: no setting taken for off.
    assert doc["server"]["settings"] == {} and doc["server"]["io_method"] is None
    text = result.stdout
    assert "io_method not read" in text and "settings not read" in text
    assert "track_io_timing off" not in text
    assert "not read" in doc["verdict"]["io_workers"]
    # Reads and Writes (pg_stat_io, pg_stat_wal, checkpointer): not read, not 0 reads/s.
    assert "pg_stat_io was not read" in doc["verdict"]["reads"]
    assert doc["writes"] is None
    sections = text.split("\n\n")
    for title in ("Reads (pg_stat_io)", "Writes (pg_stat_io and WAL)", "Sampled activity"):
        (section,) = [s for s in sections if s.startswith(title)]
        assert "not read" in section, section
    assert "0 reads/s" not in text and "0 MiB/s" not in text
    # Sampled activity: no wait figure from samples that read no wait.
    assert "waits were not read" in doc["verdict"]["storage"]
    assert "sessions wait on reads" not in text
    # Workload: neither statements nor transactions.
    assert doc["workload"]["statements"] is None
    assert "permission denied" in doc["workload"]["statements_note"]
    assert doc["workload"]["transactions"] is None
    assert "pg_stat_database was not read" in doc["verdict"]["workload"]


# --- slow storage ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow18() -> Iterator[tuple[LocalServer, SlowReads]]:
    server = LocalServer.create(
        settings={
            "shared_buffers": "16MB",
            "track_io_timing": "on",
            "io_method": "worker",
            "io_workers": "16",
        }
    )
    shim = SlowReads(server)
    server.start()
    for table in TABLES:
        create_table(server.dsn(), TABLE_MB, table)
    yield server, shim
    server.destroy()


def report_while_scanning(
    slow: tuple[LocalServer, SlowReads],
    delay_us: int,
    *args: str,
    tables: tuple[str, ...] = TABLES,
    rows: int | None = SCAN_ROWS,
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """A report while one client per table scans, each read slowed by `delay_us`."""
    server, shim = slow
    shim.set_delay(delay_us)
    try:
        with scanning(server.dsn(), tables, rows=rows, settle=1):
            return report_json("--dsn", server.dsn(), *args)
    finally:
        shim.set_delay(0)


def test_slow_storage_is_saturated(slow18: tuple[LocalServer, SlowReads]) -> None:
    set_io_workers(slow18[0], 16)  # enough workers: the wait is the storage's
    doc, result = report_while_scanning(slow18, 25_000, "--duration", "15s", "--fail-on", "warning")
    assert result.returncode == 1, "a warning with --fail-on warning"
    found = findings(doc)
    assert "storage_saturated" in found, doc["findings"]
    evidence = found["storage_saturated"]["evidence"]
    assert evidence["read_wait_sessions"] > 2
    assert evidence["seconds_per_read"] > 0.020
    assert evidence["reads_per_second"] >= 10
    assert "io_worker_pool_saturated" not in found
    assert doc["verdict"]["storage"].startswith("Storage is saturated")


def test_reads_slow_from_the_first_second_judged_by_storage_class(
    slow18: tuple[LocalServer, SlowReads],
) -> None:
    """Issue 30: two sessions scanning, every read 4 ms from the start, no baseline. The default
    class (network-ssd) calls it storage-bound and slow; as hdd the same reads are usual."""
    set_io_workers(slow18[0], 16)
    two = TABLES[:2]
    doc, _ = report_while_scanning(slow18, 4_000, "--duration", "15s", tables=two)
    found = findings(doc)
    assert {"storage_saturated", "read_latency_high"} <= set(found), doc["findings"]
    evidence = found["storage_saturated"]["evidence"]
    assert evidence["read_wait_share"] > 0.5
    assert evidence["seconds_per_read"] >= 0.004
    storage = doc["verdict"]["storage"]
    assert "storage-bound" in storage and "slow for network-ssd" in storage, storage
    doc, _ = report_while_scanning(
        slow18, 4_000, "--duration", "15s", "--storage-class", "hdd", tables=two
    )
    found = findings(doc)
    assert not {"storage_saturated", "read_latency_high"} & set(found), doc["findings"]
    assert "usual for hdd" in doc["verdict"]["reads"], doc["verdict"]


def test_one_io_worker_is_too_few(slow18: tuple[LocalServer, SlowReads]) -> None:
    set_io_workers(slow18[0], 1)
    doc, result = report_while_scanning(
        slow18, 8_000, "--duration", "12s", "--sample-interval", "500ms"
    )
    assert result.returncode == 0
    pool = findings(doc)["io_worker_pool_saturated"]
    evidence = pool["evidence"]
    assert "utilization" in evidence["signals"]
    assert evidence["io_workers"] == 1
    assert evidence["io_worker_utilization"] > 0.8
    # The advice names the value measured: the I/Os the pool was handed, at 80% busy.
    suggested = evidence["suggested_io_workers"]
    assert suggested == max(2, math.ceil(evidence["pool_demand_workers"] / 0.8))
    assert evidence["pool_demand_workers"] >= evidence["io_worker_utilization"]
    assert f"io_workers = {suggested}" in pool["advice"]
    assert "Raise io_workers" in doc["verdict"]["io_workers"]


# --- upgrade: PostgreSQL 17 then 18 on the same storage -----------------------------------------


@pytest.fixture(scope="module")
def slow17() -> Iterator[tuple[LocalServer, SlowReads]]:
    server = LocalServer.create(
        bin_dir=pgbins.bin_dir("17"), settings={"shared_buffers": "16MB", "track_io_timing": "on"}
    )
    shim = SlowReads(server)
    server.start()
    for table in TABLES[:2]:
        create_table(server.dsn(), TABLE_MB, table)
    yield server, shim
    server.destroy()


UPGRADE_STORAGE_US = 500  # an SSD-like wait per read, on both servers


class Scan(TypedDict):
    """report_while_scanning's keywords: which tables are scanned, and how many rows."""

    tables: tuple[str, ...]
    rows: int | None


def test_upgrade_comparison(
    slow17: tuple[LocalServer, SlowReads], slow18: tuple[LocalServer, SlowReads], tmp_path: Path
) -> None:
    before, after = tmp_path / "pg17.json", tmp_path / "pg18.json"
    both: Scan = {"tables": TABLES[:2], "rows": None}  # whole scans, the same data on both
    doc17, result = report_while_scanning(
        slow17, UPGRADE_STORAGE_US, "--duration", "12s", "--save", str(before), **both
    )
    assert result.returncode == 0
    assert doc17["server"]["version_num"] // 10000 == 17
    assert doc17["reads"]["total"]["read_size_bytes"] == 8192

    set_io_workers(slow18[0], 3)  # the default
    against17 = ("--duration", "12s", "--baseline", str(before))
    upgraded, result = report_while_scanning(
        slow18, UPGRADE_STORAGE_US, *against17, "--save", str(after), **both
    )
    assert upgraded["comparison"]["baseline"]["version"].startswith("17.")
    whole = upgraded["comparison"]["rows"][0]
    assert whole["backend_type"] is None
    size = whole["figures"]["read_size_bytes"]
    assert size["before"] == 8192 and size["after"] > 8192, size
    # Whether 18's io workers cost more than 3x per byte here is this machine's answer (the
    # hand-off on two loaded cores), not the test's: the finding must agree with the figure.
    per_byte = whole["figures"]["seconds_per_byte"]
    flagged = "read_latency_regression" in findings(upgraded)
    assert flagged == (per_byte["ratio"] > thresholds.load().regression_factor), upgraded

    # The same storage and version again: no regression.
    again, _ = report_while_scanning(
        slow18, UPGRADE_STORAGE_US, "--duration", "12s", "--baseline", str(after), **both
    )
    steady = again["comparison"]["rows"][0]["figures"]["seconds_per_byte"]
    assert "read_latency_regression" not in findings(again), again["findings"]
    assert 1 / 3 < steady["ratio"] < 3, steady
    # PostgreSQL 18's storage several times slower than 17's.
    slower, _ = report_while_scanning(slow18, UPGRADE_STORAGE_US * 8, *against17, **both)
    print(
        "[report] upgrade: per MiB 17 -> 18 {:.2f}x, read size {:.0f} -> {:.0f} bytes;"
        " 18 again {:.2f}x; 18 slowed 8x: {:.2f}x".format(
            per_byte["ratio"],
            size["before"],
            size["after"],
            steady["ratio"],
            slower["comparison"]["rows"][0]["figures"]["seconds_per_byte"]["ratio"],
        )
    )
    regression = findings(slower)["read_latency_regression"]
    assert regression["evidence"]["ratio"] > regression["evidence"]["factor"], regression
    # An I/O finding: a warning unless the work itself was shown not slower (these scans may
    # hit 18's shared buffers more than 17's), which workload time decides (issue 22): faster
    # claimed beyond the margin, or the whole interval at most 1 (issue 49: a point ratio below
    # 1 inside the noise keeps the warning, and says the comparison is undecided).
    workload = slower["comparison"]["workload"]
    if workload is not None and (workload["claim"] == "faster" or workload["interval"][1] <= 1):
        assert regression["severity"] == "info", regression
        said = "ran faster" if workload["claim"] == "faster" else "was not slower"
        assert f"the workload {said}" in slower["verdict"]["reads"]
    else:
        assert regression["severity"] == "warning", regression
        assert "regression" in slower["verdict"]["reads"]
        if workload is not None and workload["claim"] is None:
            assert "undecided" in regression["summary"], regression


# --- bad input, unreachable servers ------------------------------------------------------------


DSN = "host=127.0.0.1 port=1 user=x"  # valid, never reached: input is checked before connecting


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--dsn", DSN, "--no-such-flag"), ("--no-such-flag",)),
        (("--dsn", DSN, "--duration", "5s"), ("--duration", "10s..24h")),
        (("--dsn", DSN, "--duration", "two minutes"), ("--duration",)),
        (("--dsn", DSN, "--duration", "-1m"), ("--duration",)),
        (("--dsn", DSN, "--duration", "25h"), ("--duration",)),
        (("--dsn", DSN, "--sample-interval", "50ms"), ("--sample-interval",)),
        (("--dsn", DSN, "--format", "yaml"), ("--format",)),
        (("--dsn", DSN, "--fail-on", "info"), ("--fail-on",)),
        (("--dsn", DSN, "--target", "x"), ("--target needs --config",)),
        (("--dsn", "host=x port=notaport"), ("port",)),
        ((), ("DATA_SOURCE_NAME",)),
        (("--dsn", DSN, "--save", "/nonexistent-dir/r.json"), ("--save",)),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    env = {"DATA_SOURCE_NAME": ""}
    assert_one_line(run_report(*args, env=env), 2, *needles)


def baseline_file(tmp_path: Path, kind: str) -> str:
    path = tmp_path / "baseline.json"
    if kind == "missing":
        return str(tmp_path / "nowhere.json")
    if kind == "unreadable":
        return str(tmp_path)  # a directory: readable by nobody as a file, root included
    if kind == "corrupt":
        path.write_text('{"schema": 1, "kind": "pg-aio-exporter report", "window": {')
    if kind == "foreign":
        path.write_text(json.dumps({"dashboard": {"title": "not a report"}}))
    return str(path)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("missing", "No such file"),
        ("unreadable", "Is a directory"),
        ("corrupt", "not valid JSON"),
        ("foreign", "not a pg-aio-exporter report"),
    ],
)
def test_bad_baseline_is_one_line_and_exit_2(tmp_path: Path, kind: str, needle: str) -> None:
    result = run_report("--dsn", DSN, "--baseline", baseline_file(tmp_path, kind))
    assert_one_line(result, 2, "baseline", needle)


@pytest.mark.unit
def test_config_target_selection(tmp_path: Path) -> None:
    config = tmp_path / "targets.yaml"
    config.write_text(
        "targets:\n  - {name: a, dsn: 'host=127.0.0.1 port=1'}\n"
        "  - {name: b, dsn: 'host=127.0.0.1 port=1'}\n"
    )
    assert_one_line(run_report("--config", str(config)), 2, "give --target", "a, b")
    assert_one_line(run_report("--config", str(config), "--target", "c"), 2, "no target 'c'")
    # The right target is chosen, then found unreachable.
    result = run_report("--config", str(config), "--target", "b", "--duration", "10s")
    assert_one_line(result, 1, "127.0.0.1:1", "server unreachable")


@pytest.mark.unit
def test_unreachable_server_is_exit_1() -> None:
    result = run_report("--duration", "10s", env={"DATA_SOURCE_NAME": DSN})
    assert_one_line(result, 1, "cannot connect to 127.0.0.1:1", "server unreachable")


def test_login_refused_is_exit_1_without_the_password(pw_server: LocalServer) -> None:
    wrong = "Wr0ng-" + MONITOR_PASSWORD
    result = run_report("--dsn", pw_server.dsn(user="monitor", password=wrong), "--duration", "10s")
    assert_one_line(result, 1, "login refused", "password authentication failed")
    assert wrong not in result.stderr


# --- older servers -----------------------------------------------------------------------------


@pytest.mark.parametrize("major", ["15", "16"])
def test_older_servers(major: str) -> None:
    """16: pg_stat_io in blocks (8192 bytes a read), no AIO; 15: no pg_stat_io at all."""
    settings = {"shared_buffers": "16MB", "track_io_timing": "on"}
    server = LocalServer.create(bin_dir=pgbins.bin_dir(major), settings=settings)
    server.start()
    try:
        create_table(server.dsn(), 32)  # scanned through a ring buffer: read at every scan
        doc, result = report_under_load(server, server.dsn())
    finally:
        server.destroy()
    assert result.returncode == 0
    assert doc["server"]["version_num"] // 10000 == int(major)
    assert doc["server"]["io_method"] is None
    assert "no asynchronous I/O" in doc["verdict"]["io_workers"]
    # Not preloaded here: workload time is DB time per transaction, and the note says why.
    assert "pg_stat_statements" in doc["workload"]["statements_note"]
    if major == "16":
        assert doc["reads"]["total"]["read_size_bytes"] == 8192
        assert doc["not_visible"] == []
    else:
        assert doc["reads"]["rows"] == []
        assert "has no pg_stat_io" in doc["verdict"]["reads"]
        assert any("pg_stat_io: needs PostgreSQL 16" in n for n in doc["not_visible"])
        assert "no_read_activity" not in findings(doc)

"""Pure logic: interval math, scheduling, unit conversion, redaction, log format."""

from __future__ import annotations

import json
import logging

import psycopg
import pytest

from pg_aio_exporter.collectors.intervals import ReadCounters, Snapshot, interval_reads
from pg_aio_exporter.collectors.settings import setting_value
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import parse_duration
from pg_aio_exporter.logs import JsonFormatter, LogfmtFormatter
from pg_aio_exporter.poll.errors import UnsupportedServerError, error_kind
from pg_aio_exporter.poll.worker import next_tick, stalled_ticks
from pg_aio_exporter.redact import scrub

pytestmark = pytest.mark.unit
KEY = ("client backend", "relation", "bulkread")


def snap(
    reads: float,
    nbytes: float,
    ms: float,
    hits: float,
    *,
    reset: float = 1.0,
    start: float = 10.0,
    timing: bool = True,
    block_size: float = 8192,
) -> Snapshot:
    return Snapshot({KEY: ReadCounters(reads, nbytes, ms, hits)}, reset, start, timing, block_size)


def test_interval_values() -> None:
    # PostgreSQL 18-like: 20 read operations of 128 kB (16 blocks each) and 60 hits.
    got = interval_reads(snap(10, 81920, 5.0, 100), snap(30, 81920 + 20 * 131072, 45.0, 160))
    iv = got[KEY]
    assert iv.latency_seconds == pytest.approx(0.040 / 20)
    assert iv.seconds_per_byte == pytest.approx(0.040 / (20 * 131072))
    assert iv.size_bytes == 131072
    # By blocks: 60 hits of 60 + 320 blocks asked for (not 60 / (60 + 20) operations).
    assert iv.hit_ratio == pytest.approx(60 / 380)


def test_hit_ratio_counts_blocks_of_the_servers_block_size() -> None:
    # A server built with 16 kB blocks: 20 reads of 128 kB are 160 blocks.
    before = snap(10, 81920, 5.0, 100, block_size=16384)
    after = snap(30, 81920 + 20 * 131072, 45.0, 160, block_size=16384)
    assert interval_reads(before, after)[KEY].hit_ratio == pytest.approx(60 / 220)


def test_hit_ratio_of_one_block_reads_is_hits_over_hits_and_reads() -> None:
    # PostgreSQL 16/17: every read is one block (read_bytes = reads x op_bytes).
    iv = interval_reads(snap(10, 81920, 5.0, 100), snap(30, 245760, 45.0, 160))[KEY]
    assert iv.hit_ratio == pytest.approx(60 / 80)


@pytest.mark.parametrize(
    "cur",
    [
        snap(10, 81920, 5.0, 200),  # no reads in the interval
        snap(30, 200000, 45.0, 160, reset=2.0),  # stats reset in between
        snap(30, 200000, 45.0, 160, start=11.0),  # server restarted in between
        snap(5, 40960, 1.0, 50),  # counters went backwards without a reset time
    ],
)
def test_interval_undefined(cur: Snapshot) -> None:
    assert interval_reads(snap(10, 81920, 5.0, 100), cur) == {}


def test_interval_without_previous_poll() -> None:
    assert interval_reads(None, snap(10, 81920, 5.0, 100)) == {}


def test_latency_needs_timing_on_both_ends() -> None:
    iv = interval_reads(snap(10, 81920, 5.0, 100, timing=False), snap(30, 245760, 45.0, 160))[KEY]
    assert iv.latency_seconds is None and iv.seconds_per_byte is None
    assert iv.size_bytes == 8192


@pytest.mark.parametrize(
    ("deadline", "interval", "now", "expected"),
    [(0.0, 1.0, 0.5, (1.0, 0)), (0.0, 1.0, 1.0, (2.0, 1)), (0.0, 1.0, 3.2, (4.0, 3))],
)
def test_next_tick(
    deadline: float, interval: float, now: float, expected: tuple[float, int]
) -> None:
    assert next_tick(deadline, interval, now) == expected


@pytest.mark.parametrize(
    ("deadline", "missed", "stall", "expected"),
    [
        (0.0, 0, (0.0, 0.0), 0),  # on time
        (0.0, 3, (0.0, 0.0), 0),  # woke on time, then a query ran 3 ticks long: overruns
        (0.0, 2, (0.0, 0.5), 2),  # woke 2 ticks late, the sample took no time
        (0.0, 3, (0.0, 0.3), 1),  # woke 1 tick late, then the sample ran 2 ticks long
        (1.0, 3, (0.5, 1.6), 2),  # woke late for a poll due before the sample
        (0.0, 3600 * 4, (0.0, 3600.0), 3600 * 4),  # suspended for an hour
        (0.0, 2, (9.0, 9.0), 0),  # a zero-length sleep after the steps: nothing overslept
    ],
)
def test_stalled_ticks(
    deadline: float, missed: int, stall: tuple[float, float], expected: int
) -> None:
    assert stalled_ticks(deadline, 0.25, missed, stall) == expected


@pytest.mark.parametrize(
    ("setting", "unit", "vartype", "value"),
    [
        ("16", "8kB", "integer", 131072),
        ("2048", "8kB", "integer", 16 * 1024 * 1024),
        ("on", None, "bool", 1),
        ("off", None, "bool", 0),
        ("3", None, "integer", 3),
        ("64", "kB", "integer", 65536),
        ("1", "MB", "integer", 1048576),
    ],
)
def test_setting_value(setting: str, unit: str | None, vartype: str, value: float) -> None:
    assert setting_value(setting, unit, vartype) == value


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("1m30s", 90), ("500ms", 0.5), ("2", 2), ("1h", 3600)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text, what="x") == seconds


@pytest.mark.parametrize("text", ["", "5 s", "1x", "0s", "-1", "s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration(text, what="x")


@pytest.mark.parametrize(
    ("message", "dsn"),
    [
        ('failed for "host=db password=s3cr3t"', "host=db password=s3cr3t"),
        ("postgresql://u:s3cr3t@db/x refused", "postgresql://u:s3cr3t@db/x"),
        ("missing = after s3cr3t", "host=db password='s3cr3t"),
    ],
)
def test_scrub(message: str, dsn: str) -> None:
    assert "s3cr3t" not in scrub(message, dsn=dsn)


def test_scrub_bare_password_and_shapes() -> None:
    assert "pw1" not in scrub("the pw1 leaked", password="pw1")
    assert "zz" not in scrub("conninfo password=zz host=a")


def _record(**extra: object) -> logging.LogRecord:
    record = logging.makeLogRecord({"msg": "poll failed", "levelname": "ERROR", **extra})
    return record


def test_logfmt_quotes_values() -> None:
    line = LogfmtFormatter().format(_record(target="a b", err='say "hi"'))
    assert 'level=error msg="poll failed" target="a b" err="say \\"hi\\""' in line


def test_json_log() -> None:
    doc = json.loads(JsonFormatter().format(_record(target="x")))
    assert doc["level"] == "error" and doc["target"] == "x" and doc["msg"] == "poll failed"


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (TimeoutError(), "timeout"),
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), "timeout"),
        (psycopg.errors.InsufficientPrivilege("permission denied for view pg_aios"), "privilege"),
        (psycopg.OperationalError('password authentication failed for user "x"'), "auth"),
        (
            psycopg.OperationalError(
                'connection failed: connection to server at "127.0.0.1", port 5432 failed:'
                ' FATAL:  role "nosuch" does not exist'
            ),
            "auth",
        ),
        (psycopg.OperationalError("connection timeout expired"), "timeout"),
        (psycopg.OperationalError("Connection refused"), "connection"),
        (UnsupportedServerError("server version 90600 is not supported"), "unsupported"),
        (psycopg.errors.UndefinedTable("relation does not exist"), "query"),
    ],
)
def test_error_kind(exc: BaseException, kind: str) -> None:
    assert error_kind(exc) == kind

"""The report and the shipped alert rules judge alike: the same numbers, fed to the rules through
`promtool test rules` and to the report's findings, fire each alert exactly where the report
emits its finding.

Each scenario is one target with steady rates: an hour "before" (the alerts' own baseline, the
report's --baseline window), then forty minutes "now" (long enough for every alert's `for`).
The expected firing alerts are the report's findings, mapped to their alerts; promtool checks
that the rules fire those and no others.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

import recorded
from pg_aio_exporter import thresholds
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.activity import ActivityCollector, ActivityRow
from pg_aio_exporter.collectors.base import PollCollector, Snapshots
from pg_aio_exporter.collectors.intervals import ReadCounters
from pg_aio_exporter.collectors.pg_wait_events import server_events
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.poll.sampler import Sampler
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.runner import Recorder, summarise
from pg_aio_exporter.report.summary import Activity, ServerFacts, Summary

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
BEFORE, NOW = 60, 40  # minutes
CLASS_INFO = "pg_aio_storage_class_info"
VOLUME_IOPS = "pg_aio_storage_volume_max_operations_per_second"
IO = 'backend_type="client backend", object="relation", context="bulkread"'
# finding -> the alert that judges the same thing
ALERT_OF = {
    "storage_saturated": "PgAioStorageSaturated",
    "read_latency_regression": "PgAioReadLatencyRegression",
    "read_latency_high": "PgAioReadLatencyHigh",
    "io_worker_pool_saturated": "PgAioWorkerPoolSaturated",
    "track_io_timing_off": "PgAioTrackIoTimingOff",
    "pending_restart": "PgAioPendingRestart",
    "stats_reset_during_window": "PgAioStatsReset",
}


@dataclass(frozen=True)
class Rates:
    """One phase, per second: what the server did and what the sampler saw."""

    reads: float = 1000.0
    size: float = 24 * 1024  # bytes per read
    wait: float = 0.0001  # seconds per read
    hits: float = 500.0
    timing: bool = True
    waiting: float = 0.1  # client sessions in IO/AioIoCompletion
    cpu: float = 0.5  # client sessions on CPU
    workers: int = 3
    busy: float = 0.3  # busy io workers
    queue: float = 0.0  # sessions on LWLock/AioWorkerSubmissionQueue
    sleeping: float = 0.0  # client sessions asleep: a throttled VACUUM in Timeout/VacuumDelay
    pending: bool = False  # io_method awaits a restart
    reset: bool = False  # pg_stat_io reset ten minutes before the end
    max_workers: int | None = None  # io_max_workers: PostgreSQL 19, whose pool sizes itself
    storage_class: str | None = None  # configured (pg_aio_storage_class_info); None: default
    iops: float | None = None  # the volume's configured IOPS limit


NORMAL = Rates()
# Two sessions scanning, 99% of their active time waiting on reads.
SLOW_START = replace(NORMAL, reads=150, size=20_600, wait=0.00408, waiting=1.98, cpu=0.02)
SCENARIOS = {
    "healthy": (NORMAL, NORMAL),
    # Ten times the wait per byte, three sessions waiting on it: saturated, and a regression.
    "slow_storage": (NORMAL, replace(NORMAL, wait=0.001, waiting=3.0)),
    # Three sessions wait, at the usual latency: busy, not saturated.
    "busy_but_fast": (NORMAL, replace(NORMAL, reads=30_000, waiting=3.0)),
    # 2.9x per byte: below the regression factor (3), but two thirds of the active time
    # waiting on reads slower than 2x their baseline: storage-bound.
    "almost_regression": (NORMAL, replace(NORMAL, wait=0.00029, waiting=1.0)),
    # 17 -> 18: 8 kB reads at 0.5 ms, then 32 kB at 1.2 ms (0.6x per byte).
    "upgrade": (
        replace(NORMAL, size=8192, wait=0.0005),
        replace(NORMAL, reads=250, size=32768, wait=0.0012),
    ),
    "one_worker_busy": (NORMAL, replace(NORMAL, workers=1, busy=0.9)),
    "submission_queue": (NORMAL, replace(NORMAL, queue=0.15)),
    # PostgreSQL 19: a pool pinned at io_max_workers while reads queue; then one as busy, with
    # a queue, but at half its ceiling: growing by itself, no finding and no alert.
    "pool_pinned_19": (
        replace(NORMAL, workers=8, max_workers=8, busy=2.0),
        replace(NORMAL, workers=8, max_workers=8, busy=7.5),
    ),
    "pool_growing_19": (
        replace(NORMAL, workers=4, max_workers=8, busy=1.0),
        replace(NORMAL, workers=4, max_workers=8, busy=3.8, queue=0.15),
    ),
    "timing_off": (replace(NORMAL, timing=False), replace(NORMAL, timing=False)),
    "pending_restart": (NORMAL, replace(NORMAL, pending=True)),
    "stats_reset": (NORMAL, replace(NORMAL, reset=True)),
    # 25 ms per read at 20 reads/s: high latency; then the same below the traffic guard.
    "high_latency": (replace(NORMAL, reads=20, wait=0.025), replace(NORMAL, reads=20, wait=0.025)),
    "too_few_reads": (replace(NORMAL, reads=5, wait=0.05), replace(NORMAL, reads=5, wait=0.05)),
    # Slow from the first second (issue 30): 4 ms per 20 kB read, two sessions waiting; slow for
    # the default class (network-ssd), usual for hdd.
    "slow_from_the_start": (SLOW_START, SLOW_START),
    # The same two sessions beside three clients running a throttled VACUUM, asleep in
    # VacuumDelay: busy (DB time) but no active time, so still storage-bound (issue 49).
    "slow_beside_sleeping_clients": (
        replace(SLOW_START, sleeping=3.0),
        replace(SLOW_START, sleeping=3.0),
    ),
    "slow_from_the_start_on_hdd": (
        replace(SLOW_START, storage_class="hdd"),
        replace(SLOW_START, storage_class="hdd"),
    ),
    "fast_nvme_reads_on_nvme": (
        replace(NORMAL, storage_class="nvme"),
        replace(NORMAL, storage_class="nvme"),
    ),
    # 1 ms per 24 kB read: usual for network-ssd, slow for nvme.
    "slow_storage_on_nvme": (
        replace(NORMAL, wait=0.001, storage_class="nvme"),
        replace(NORMAL, wait=0.001, storage_class="nvme"),
    ),
    # Half the active time on page-cache reads (0.01 ms): busy, not storage-bound.
    "page_cache_half_the_time": (
        replace(NORMAL, reads=50_000, wait=0.00001, waiting=0.5, cpu=0.5),
        replace(NORMAL, reads=50_000, wait=0.00001, waiting=0.5, cpu=0.5),
    ),
    # Fast per read (1 ms, usual for network-ssd), most of the time waiting, at the volume's
    # configured 3,000 IOPS (pg_aio_storage_volume_max_operations_per_second).
    "at_the_volume_limit": (
        replace(NORMAL, reads=3_000, size=8192, wait=0.001, waiting=3.0, iops=3_000),
        replace(NORMAL, reads=3_000, size=8192, wait=0.001, waiting=3.0, iops=3_000),
    ),
    "below_the_volume_limit": (
        replace(NORMAL, reads=2_000, size=8192, wait=0.001, waiting=2.0, iops=3_000),
        replace(NORMAL, reads=2_000, size=8192, wait=0.001, waiting=2.0, iops=3_000),
    ),
}


def per_minute(phases: tuple[Rates, Rates], value: str) -> list[float]:
    """One value per minute over both phases (cumulative for rates, as counters are)."""
    before, now = phases
    rates = [before] * BEFORE + [now] * NOW
    out, total = [0.0], 0.0
    for minute, r in enumerate(rates, start=1):
        reset_at = BEFORE + NOW - 10
        if value in ("reads", "read_bytes", "read_time", "hits") and r.reset and minute == reset_at:
            total = 0.0
        per_second = {
            "reads": r.reads,
            "read_bytes": r.reads * r.size,
            "read_time": r.reads * r.wait if r.timing else 0.0,
            "hits": r.hits,
            "samples": 1.0,
            "waiting": r.waiting,
            "cpu": r.cpu,
            "queue": r.queue,
            "sleeping": r.sleeping,
            "busy": r.busy,
            "slots": float(r.workers),  # io workers seen, once a second
        }.get(value)
        if per_second is not None:
            total += per_second * 60
            out.append(total)
        else:
            gauge = {
                "timing": float(r.timing),
                "workers": float(r.workers),
                "max_workers": float(r.max_workers or 0),
                "pending": float(r.pending),
                "reset": 1.0e9 + (60.0 * reset_at if r.reset and minute >= reset_at else 0.0),
            }[value]
            out.append(gauge)
    if value in ("timing", "workers", "max_workers", "pending", "reset"):
        out[0] = out[1]
    return out


def input_series(target: str, phases: tuple[Rates, Rates]) -> list[dict[str, str]]:
    t = f'target="{target}"'
    series = {
        f"pg_stat_io_reads_total{{{t}, {IO}}}": "reads",
        f"pg_stat_io_read_bytes_total{{{t}, {IO}}}": "read_bytes",
        f"pg_stat_io_read_time_seconds_total{{{t}, {IO}}}": "read_time",
        f"pg_stat_io_hits_total{{{t}, {IO}}}": "hits",
        f"pg_stat_io_stats_reset_timestamp_seconds{{{t}}}": "reset",
        f"pg_settings_track_io_timing{{{t}}}": "timing",
        f"pg_aio_sampler_samples_total{{{t}}}": "samples",
        f'pg_aio_wait_event_samples_total{{{t}, backend_type="client backend",'
        ' wait_event_type="IO", wait_event="AioIoCompletion"}': "waiting",
        f'pg_aio_wait_event_samples_total{{{t}, backend_type="client backend",'
        ' wait_event_type="LWLock", wait_event="AioWorkerSubmissionQueue"}': "queue",
        f'pg_aio_wait_event_samples_total{{{t}, backend_type="client backend",'
        ' wait_event_type="CPU", wait_event="CPU"}': "cpu",
        f'pg_aio_wait_event_samples_total{{{t}, backend_type="client backend",'
        ' wait_event_type="Timeout", wait_event="VacuumDelay"}': "sleeping",
        f"pg_aio_io_workers{{{t}}}": "workers",
        f"pg_aio_io_worker_busy_samples_total{{{t}}}": "busy",
        f"pg_aio_io_worker_samples_total{{{t}}}": "slots",
        f'pg_settings_pending_restart{{{t}, name="io_method"}}': "pending",
    }
    if phases[1].max_workers:
        series[f"pg_settings_io_max_workers{{{t}}}"] = "max_workers"
    minutes = len(per_minute(phases, "reads")) - 1
    # One server version throughout: the regime the read wait is compared within.
    version, number = ("19.0", "190000") if phases[1].max_workers else ("18.6", "180006")
    regime = f'pg_server_info{{{t}, version="{version}", version_num="{number}"}}'
    return [
        *(
            {"series": name, "values": " ".join(f"{v:.6g}" for v in per_minute(phases, value))}
            for name, value in series.items()
        ),
        {"series": regime, "values": f"1x{minutes}"},
        {"series": f"pg_up{{{t}}}", "values": f"1x{minutes}"},
        *(
            [{"series": f"{VOLUME_IOPS}{{{t}}}", "values": f"{phases[1].iops:g}x{minutes}"}]
            if phases[1].iops is not None
            else []
        ),
        *(
            [
                {
                    "series": f'{CLASS_INFO}{{{t}, storage_class="{now.storage_class}"}}',
                    "values": f"1x{minutes}",
                }
            ]
            if (now := phases[1]).storage_class is not None
            else []
        ),
    ]


def summary(rates: Rates, minutes: int, *, resets: tuple[float, ...] = ()) -> Summary:
    seconds = minutes * 60.0
    samples = int(seconds)
    settings = {"io_workers": float(rates.workers), "track_io_timing": float(rates.timing)}
    version = ("18.6", 180006)
    if rates.max_workers:  # 19: no io_workers; the defaults of io_min_workers
        settings = {
            "io_min_workers": 2.0,
            "io_max_workers": float(rates.max_workers),
            "track_io_timing": float(rates.timing),
        }
        version = ("19.0", 190000)
    return Summary(
        target="t",
        started_at=0.0,
        ended_at=seconds,
        server=ServerFacts(
            *version,
            settings,
            "worker",
            ("sync", "worker"),
            ("io_method",) if rates.pending else (),
        ),
        rows={
            ("client backend", "relation", "bulkread"): ReadCounters(
                rates.reads * seconds,
                rates.reads * rates.size * seconds,
                rates.reads * rates.wait * seconds * 1000 if rates.timing else 0.0,
                rates.hits * seconds,
            )
        },
        read_seconds=seconds,
        timed=rates.timing,
        activity=Activity(
            samples=samples,
            sample_interval=1.0,
            wait_samples={
                ("client backend", "IO", "AioIoCompletion"): round(rates.waiting * samples),
                ("client backend", "LWLock", "AioWorkerSubmissionQueue"): round(
                    rates.queue * samples
                ),
                ("client backend", "CPU", "CPU"): round(rates.cpu * samples),
                ("client backend", "Timeout", "VacuumDelay"): round(rates.sleeping * samples),
            },
            io_workers=rates.workers,
            io_worker_slots=rates.workers * samples,
            io_worker_busy=round(rates.busy * samples),
            wait_events=server_events(version[1], None),
        ),
        resets=resets,
    )


def expected_alerts(name: str) -> set[str]:
    before, now = SCENARIOS[name]
    # The report's window: the last ten minutes, which hold the reset of "stats_reset".
    window = summary(now, 10, resets=(1.0,) if now.reset else ())
    limits = replace(thresholds.load(now.storage_class), volume_max_ops=now.iops)
    report = judge(window, limits, summary(before, BEFORE))
    return {ALERT_OF[f.id] for f in report.findings if f.id in ALERT_OF}


def test_every_mirrored_alert_is_exercised_both_ways() -> None:
    fired = {alert for name in SCENARIOS for alert in expected_alerts(name)}
    assert fired == set(ALERT_OF.values())
    assert expected_alerts("healthy") == set()


def test_storage_classes_judge_the_same_reads_apart() -> None:
    """4 ms per 20 kB read is slow for the default class and usual for hdd; 1 ms per 24 kB
    read is usual for the default class and slow for nvme."""
    both = {"PgAioReadLatencyHigh", "PgAioStorageSaturated"}
    assert expected_alerts("slow_from_the_start") == both
    assert expected_alerts("slow_beside_sleeping_clients") == both
    assert expected_alerts("slow_from_the_start_on_hdd") == set()
    assert expected_alerts("slow_storage_on_nvme") == {"PgAioReadLatencyHigh"}
    assert "PgAioReadLatencyHigh" not in expected_alerts("slow_storage")


def test_storage_bound_by_share_of_time_and_slow_reads() -> None:
    assert "PgAioStorageSaturated" in expected_alerts("slow_from_the_start")
    assert expected_alerts("page_cache_half_the_time") == set()
    assert expected_alerts("busy_but_fast") == set()
    assert expected_alerts("at_the_volume_limit") == {"PgAioStorageSaturated"}
    assert expected_alerts("below_the_volume_limit") == set()
    assert expected_alerts("almost_regression") == {"PgAioStorageSaturated"}


def promtool_fires(
    path: Path, series: list[dict[str, str]], alerts: str, minute: int, expected: list[Any]
) -> None:
    """promtool, on the shipped rule files fed `series` at 1 m, finds exactly `expected` of
    the alerts matching `alerts` firing at `minute`."""
    fixture = {
        "rule_files": [str(path) for path in RULE_FILES],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": f'count by (alertname, target) (ALERTS{{alertstate="firing",'
                        f' alertname=~"{alerts}"}})',
                        "eval_time": f"{minute}m",
                        "exp_samples": expected,
                    }
                ],
            }
        ],
    }
    path.write_text(yaml.safe_dump(fixture, sort_keys=False))
    result = subprocess.run(
        [PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# promtool's verdict on series this file's dependency-free code makes: the same at any Python
# dependency version, so unit-lowest leaves it out (the judgements beside it run there).
@pytest.mark.tool_only
def test_report_and_alerts_agree(tmp_path: Path) -> None:
    alerts = "|".join(ALERT_OF.values())
    expected = [
        {"labels": f'{{alertname="{alert}", target="{name}"}}', "value": 1}
        for name in SCENARIOS
        for alert in sorted(expected_alerts(name))
    ]
    series = [s for name, phases in SCENARIOS.items() for s in input_series(name, phases)]
    promtool_fires(tmp_path / "agree.yml", series, alerts, BEFORE + NOW, expected)


# --- The write alerts, on rows recorded from PostgreSQL 16, 17 and 18 --------------------------
# Each version's recorded poll (tests/fixtures/rows/) is the template: its pg_stat_io rows (18's
# `wal` rows among them), pg_stat_wal, checkpointer, server and settings rows, with the counters
# of a scenario's rates added minute by minute. The same rows go through the registry's
# collectors into the series promtool reads, and through the report's own recorder (the tap
# `report` runs on) into its window and baseline.

WRITE_ALERT_OF = {
    "wal_sync_latency_high": "PgAioWalSyncLatencyHigh",
    "write_latency_regression": "PgAioWriteLatencyRegression",
    "backends_writing_buffers": "PgAioBackendsWritingBuffers",
    "storage_saturated_by_writes": "PgAioStorageSaturatedByWrites",
    "track_wal_io_timing_off": "PgAioTrackWalIoTimingOff",
}
# The IO wait of a session waiting for its WAL flush, by version: 17 renamed 14-16's WALSync
# (the recorded samples show that rename on other events: IPC/BufferIO on 16, BufferIo on 17).
WAL_SYNC_WAIT = {"16": "WALSync", "17": "WalSync", "18": "WalSync", "19": "WalSync"}
# The IO wait of a session reading a data file: 18 and 19 wait for their io worker instead.
READ_WAIT = {
    "16": "DataFileRead",
    "17": "DataFileRead",
    "18": "AioIoCompletion",
    "19": "AioIoCompletion",
}
BUFFER_SIZE = 8192


@dataclass(frozen=True)
class Writing:
    """One phase of a workload that writes, per second; its reads are NORMAL's."""

    syncs: float = 200.0  # WAL syncs (pg_stat_wal; 18: pg_stat_io's wal rows)
    sync_wait: float = 0.0005  # seconds per WAL sync
    client_writes: float = 20.0  # shared buffers written back by client backends
    bgwriter_writes: float = 200.0  # ... by the background writer
    write_wait: float = 0.00002  # seconds per buffer write (at page-cache speed)
    sync_waiting: float = 0.2  # client sessions on IO/WalSync (WALSync on 16)
    flush_queue: float = 0.1  # client sessions on LWLock/WALWrite, behind another's flush
    wal_reads: float = 0.0  # 18: WAL read by client backends (pg_stat_io object wal), 20 ms each
    wal_timed: bool = True  # track_wal_io_timing on: else no WAL sync time is counted


WRITING = Writing()
WRITE_SCENARIOS = {
    "w_healthy": (WRITING, WRITING),
    # Issue 30's TPC-B: every fsync 10 ms slower, 4,822 -> 169 syncs/s; most of the waiting is
    # on the WAL sync itself (IO/WalSync), which only its own version's name counts.
    "w_fsync_slower": (
        replace(WRITING, syncs=4822, sync_wait=0.0002, sync_waiting=0.3),
        replace(WRITING, syncs=169, sync_wait=0.0102, sync_waiting=1.6, flush_queue=0.2),
    ),
    # The same on a stock server (track_wal_io_timing off): no sync time, judged by the syncs
    # in progress the samples saw, 1.6 sessions at 169 syncs/s: 9.5 ms a sync.
    "w_fsync_slower_untimed": (
        replace(WRITING, syncs=4822, sync_wait=0.0002, sync_waiting=0.3, wal_timed=False),
        replace(
            WRITING,
            syncs=169,
            sync_wait=0.0102,
            sync_waiting=1.6,
            flush_queue=0.2,
            wal_timed=False,
        ),
    ),
    # Too few to judge: slow syncs below min_syncs_per_second, and client backends writing
    # 80% of the buffers at 8/s (below min_backend_writes_per_second).
    "w_too_few": (
        replace(WRITING, syncs=0.5, sync_wait=0.05, client_writes=8, bgwriter_writes=2),
        replace(WRITING, syncs=0.5, sync_wait=0.05, client_writes=8, bgwriter_writes=2),
    ),
    # Buffer writes 4x slower per byte than the baseline, past the page cache (0.2 -> 0.8 ms),
    # few sessions waiting: a write regression, not saturation.
    "w_writes_slower": (
        replace(WRITING, write_wait=0.0002),
        replace(WRITING, write_wait=0.0008),
    ),
    # Client backends write 75% of the buffers, at 300/s.
    "w_backends_writing": (WRITING, replace(WRITING, client_writes=300, bgwriter_writes=100)),
}
# 18's and 19's WAL reads (pg_stat_io object wal; 16 and 17 have no such rows) at 20 ms each:
# no reads of data, so no read alert either.
WAL_READS = (replace(WRITING, wal_reads=2000), replace(WRITING, wal_reads=2000))
TARGETS = {
    **{
        (major, name): phases
        for major in recorded.MAJORS
        for name, phases in WRITE_SCENARIOS.items()
    },
    **{(major, "w_slow_wal_reads"): WAL_READS for major in ("18", "19")},
}
# The report's recorder reads every REPORT_POLL minutes (its counts are the same sums).
REPORT_POLL = 5
# Shorter than the read scenarios' phases (no 30m `for` here): the write alerts' longest `for`
# is 15m, and the first phase stays the larger part of the regression alert's 1d median.
W_BEFORE, W_NOW = 35, 25  # minutes


# Cumulative counts a phase adds per second of it: pg_stat_io and pg_stat_wal columns.
def per_second(w: Writing) -> dict[tuple[str, str], float]:
    return {
        ("client", "writes"): w.client_writes,
        ("client", "write_time"): w.client_writes * w.write_wait * 1000,
        ("bgwriter", "writes"): w.bgwriter_writes,
        ("bgwriter", "write_time"): w.bgwriter_writes * w.write_wait * 1000,
        ("wal", "reads"): w.wal_reads,
        ("wal", "read_time"): w.wal_reads * 0.020 * 1000,
        ("pg_stat_wal", "syncs"): w.syncs,
        ("pg_stat_wal", "sync_time"): w.syncs * w.sync_wait * 1000 if w.wal_timed else 0.0,
    }


BULKREAD = ("client backend", "relation", "bulkread")  # the scans: NORMAL's reads
COUNTED = ("reads", "writes", "extends", "hits", "fsyncs")
ROWS = {
    ("client backend", "relation", "normal"): "client",
    ("background writer", "relation", "normal"): "bgwriter",
    ("client backend", "wal", "normal"): "wal",  # 18 only
}


def rows_at(
    major: str, seconds: float, counts: dict[tuple[str, str], float], wal_timed: bool = True
) -> dict[str, Any]:
    """The recorded poll of `major`, `seconds` later: NORMAL's reads and `counts` added;
    track_wal_io_timing off unless `wal_timed`."""
    template = recorded.load(major)["polls"][1]
    polled: dict[str, Any] = {**template, "pg_stat_io": [], "pg_stat_wal": []}
    polled["settings"] = [
        {**row, "setting": "on" if wal_timed else "off"}
        if row["name"] == "track_wal_io_timing"
        else row
        for row in template["settings"]
    ]
    for recorded_row in template["pg_stat_io"]:
        row = dict(recorded_row)
        key = (row["backend_type"], row["object"], row["context"])
        if key not in ROWS and key != BULKREAD and not any(row[c] for c in COUNTED):
            continue  # nothing counted, then or now: zeros throughout on both sides
        polled["pg_stat_io"].append(row)
        added: dict[str, float] = {}
        if key == BULKREAD:
            reads = NORMAL.reads * seconds
            added = {
                "reads": reads,
                "read_bytes": reads * NORMAL.size,
                "read_time": reads * NORMAL.wait * 1000,
                "hits": NORMAL.hits * seconds,
            }
        elif key in ROWS:
            added = {column: n for (row_name, column), n in counts.items() if row_name == ROWS[key]}
            for ops, size in (("writes", "write_bytes"), ("reads", "read_bytes")):
                if ops in added:
                    added[size] = added[ops] * BUFFER_SIZE
        for column, n in added.items():
            row[column] = (row[column] or 0.0) + n
    wal = dict(template["pg_stat_wal"][0], track_wal_io_timing=wal_timed)
    polled["pg_stat_wal"] = [wal]
    wal["syncs"] += counts[("pg_stat_wal", "syncs")]
    wal["sync_time"] += counts[("pg_stat_wal", "sync_time")]
    return polled


def activity_rows(major: str, w: Writing, seconds: float) -> list[ActivityRow]:
    """One sample standing for `seconds` samples a second apart: `n` sessions in each wait."""

    def row(wait_type: str | None, wait: str | None, sessions: float) -> ActivityRow:
        n = round(sessions * seconds)
        return ActivityRow("client backend", "active", wait_type, wait, False, n)

    return [
        row("IO", READ_WAIT[major], NORMAL.waiting),
        row(None, None, NORMAL.cpu),
        row("IO", WAL_SYNC_WAIT[major], w.sync_waiting),
        row("LWLock", "WALWrite", w.flush_queue),
    ]


@dataclass
class Replay:
    """One target's minutes: the series promtool reads, and the report's window (the last ten
    minutes) and baseline (the first phase)."""

    series: dict[str, list[str]]
    window: Summary
    baseline: Summary


RULE_FILES = [REPO / "alerts" / "pg_aio_recording.yml", REPO / "alerts" / "pg_aio_alerts.yml"]
# The metric families the rules read (a family's name, counters without _total).
RULE_INPUTS = {
    name.removesuffix("_total")
    for path in RULE_FILES
    for name in re.findall(r"\bpg_[a-z0-9_]+", path.read_text())
}


def exposed(
    target: str, collectors: list[PollCollector[Any]], polled: dict[str, Any], exporter: Sampler
) -> Iterator[tuple[str, str]]:
    """What the exporter serves after a poll of `polled` rows: (series, value) pairs."""
    out = MetricSet({"target": target})
    for collector in collectors:
        if collector.name in polled:
            collector.collect(recorded.typed(collector.row_type, polled[collector.name]), out)
    out.gauge("pg_up", "up", 1.0)
    exporter.roll_window(60.0)  # a poll a minute
    exporter.collect(out, current=True)
    for family in out.families():
        if family.name not in RULE_INPUTS:
            continue  # a series no rule reads: promtool needs none of it
        for line in family.lines:
            selector, value = line.rsplit(" ", 1)
            yield selector, value.strip()


def replay(major: str, name: str, phases: tuple[Writing, Writing]) -> Replay:
    version = recorded.load(major)["server_version_num"]
    collectors = [c for c in registry.poll_collectors() if c.query(version) is not None]
    # The collectors the worker hands its tap a snapshot of (every one rows_at answers for).
    by_name = {c.name: c for c in collectors if isinstance(c, Snapshots)}
    exporter = Sampler([ActivityCollector()])  # the exporter's, for the whole run
    phase_spans = {"baseline": (0, W_BEFORE), "window": (W_BEFORE + W_NOW - 10, W_BEFORE + W_NOW)}
    recorders = {phase: Recorder() for phase in phase_spans}
    sampled = {phase: ActivityCollector() for phase in phase_spans}
    counts: dict[tuple[str, str], float] = dict.fromkeys(per_second(WRITING), 0.0)
    series: dict[str, list[str]] = {}
    for minute in range(W_BEFORE + W_NOW + 1):
        w = phases[0] if minute <= W_BEFORE else phases[1]
        if minute > 0:
            for key, rate in per_second(w).items():
                counts[key] += rate * 60
            sample = activity_rows(major, w, 60)
            exporter.samples += 60
            exporter.collectors[0].observe(sample, version)
            for phase, (start, end) in phase_spans.items():
                if start < minute <= end:
                    sampled[phase].observe(sample, version)
        polled = rows_at(major, 60.0 * minute, counts, w.wal_timed)
        for selector, value in exposed(f"{name}_{major}", collectors, polled, exporter):
            series.setdefault(selector, ["_"] * minute).append(value)
        for phase, (start, end) in phase_spans.items():
            if start <= minute <= end and minute % REPORT_POLL == 0:
                for collector_name, rows in polled.items():
                    collector = by_name[collector_name]
                    snapshot = collector.snapshot(recorded.typed(collector.row_type, rows))
                    recorders[phase].polled(collector_name, snapshot, 60.0 * minute)
    summaries = {}
    for phase, (start, end) in phase_spans.items():
        recorders[phase].sampled((end - start) * 60, sampled[phase].totals(), ["activity"])
        server = recorders[phase].server
        assert server is not None, f"{major}: no server row replayed"
        summaries[phase] = summarise(recorders[phase], server, name, 0.0, 1.0)
    return Replay(series, summaries["window"], summaries["baseline"])


def expected_write_alerts(replayed: Replay, storage_class: str | None = None) -> set[str]:
    report = judge(replayed.window, thresholds.load(storage_class), replayed.baseline)
    mirrored = ALERT_OF | WRITE_ALERT_OF
    return {mirrored[f.id] for f in report.findings if f.id in mirrored}


@pytest.fixture(scope="module")
def replayed() -> dict[tuple[str, str], Replay]:
    return {(major, name): replay(major, name, phases) for (major, name), phases in TARGETS.items()}


def test_every_write_alert_is_exercised_both_ways(replayed: dict[tuple[str, str], Replay]) -> None:
    for major in recorded.MAJORS:
        fired = {
            alert
            for (m, _), r in replayed.items()
            if m == major
            for alert in expected_write_alerts(r)
        }
        assert fired == set(WRITE_ALERT_OF.values()), major
        assert expected_write_alerts(replayed[(major, "w_healthy")]) == set(), major
    # The TPC-B incident: both WAL alerts on every version, each counting its own wait names.
    for major in recorded.MAJORS:
        assert expected_write_alerts(replayed[(major, "w_fsync_slower")]) == {
            "PgAioWalSyncLatencyHigh",
            "PgAioStorageSaturatedByWrites",
        }, major
        # On a stock server: the saturation by its sampled syncs, and the timing that is off.
        assert expected_write_alerts(replayed[(major, "w_fsync_slower_untimed")]) == {
            "PgAioStorageSaturatedByWrites",
            "PgAioTrackWalIoTimingOff",
        }, major


@pytest.mark.tool_only  # as test_report_and_alerts_agree
def test_report_and_write_alerts_agree_on_16_to_19(
    replayed: dict[tuple[str, str], Replay], tmp_path: Path
) -> None:
    judged = "|".join({**ALERT_OF, **WRITE_ALERT_OF}.values())
    expected = [
        {"labels": f'{{alertname="{alert}", target="{name}_{major}"}}', "value": 1}
        for (major, name), r in replayed.items()
        for alert in sorted(expected_write_alerts(r))
    ]
    input_series = [
        {"series": selector, "values": " ".join(values)}
        for r in replayed.values()
        for selector, values in r.series.items()
    ]
    promtool_fires(tmp_path / "agree_writes.yml", input_series, judged, W_BEFORE + W_NOW, expected)

"""Switches: `--sample-interval 0` turns the sampler off, `--no-collector.NAME` one view. The
series of what is switched off disappear; everything else is still exported."""

from __future__ import annotations

import time

import pytest

import contract
from harness import Exporter
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload

# What each view exports (docs/metrics.md), listed here rather than taken from the code.
EXPORTS = {
    "pg_stat_io": {
        "pg_stat_io_reads_total",
        "pg_stat_io_hits_total",
        "pg_stat_io_read_bytes_total",
    },
    "pg_stat_wal": {"pg_aio_wal_writes_total", "pg_aio_wal_syncs_total", "pg_stat_wal_bytes_total"},
    "checkpointer": {"pg_aio_checkpoints_timed_total", "pg_aio_bgwriter_buffers_clean_total"},
    "settings": {"pg_settings_io_workers", "pg_aio_io_method", "pg_settings_track_io_timing"},
    "server": {"pg_server_info", "pg_aio_supported", "pg_postmaster_start_time_seconds"},
    "pg_stat_database": {"pg_stat_database_xact_commit_total", "pg_stat_database_blks_hit_total"},
    "activity": {
        "pg_aio_wait_event_samples_total",
        "pg_aio_io_workers",
        "pg_aio_io_worker_busy_samples_total",
        "pg_aio_io_worker_samples_total",
        "pg_aio_io_worker_utilization_ratio",
    },
    "pg_aios": {
        "pg_aio_in_flight_samples_total",
        "pg_aio_in_flight_bytes_samples_total",
        "pg_aio_in_flight_max",
    },
}
SAMPLER = {"pg_aio_sampler_samples_total"}
# pg_stat_io's per-interval gauges exist only for an interval whose reads reached pg_stat_io in
# time (a backend reports them when its transaction ends or it goes idle): checked for absence
# only, their presence depends on timing.
# Present only when the poll interval saw reads (writes) and their time: all of them, from the
# contract (pg_aio_read_seconds_per_byte was missing here and failed CI once).
INTERVAL_GAUGES = set(contract.INTERVALS | contract.WRITE_INTERVALS)
ALWAYS = {"pg_up", "pg_aio_exporter_build_info"}


VARIANTS = {
    "all on": (),
    "sampling off": ("--sample-interval", "0"),
    **{view: (f"--no-collector.{view}",) for view in EXPORTS},
}


@pytest.fixture(scope="module")
def exported(pg18: LocalServer) -> dict[str, set[str]]:
    """Series names per variant, all exporters running at once, from three polls under a
    read workload (an interval's gauges exist only if its reads reached pg_stat_io in time)."""
    exporters = {
        name: Exporter(
            "--dsn", pg18.dsn(), "--poll-interval", "1s", "--sample-interval", "200ms", *flags
        )
        for name, flags in VARIANTS.items()
    }
    workload = Workload(pg18.dsn(), clients=1, pause=0.05).start()
    try:
        names = {name: set[str]() for name in exporters}
        for _ in range(3):
            after = time.time()
            for name, exp in exporters.items():
                names[name] |= set(exp.wait_poll(after))
        for exp in exporters.values():
            assert "level=error" not in exp.logs(), exp.logs()
    finally:
        workload.stop()
        for exp in exporters.values():
            assert exp.stop() == 0
    return names


def sample_self_metrics(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith("pg_aio_exporter_sample_")}


def test_all_on(exported: dict[str, set[str]]) -> None:
    every = set().union(*EXPORTS.values(), SAMPLER, ALWAYS)
    assert every <= exported["all on"], every - exported["all on"]


def test_sampling_off(exported: dict[str, set[str]]) -> None:
    all_on, names = exported["all on"], exported["sampling off"]
    sampled = EXPORTS["activity"] | EXPORTS["pg_aios"] | SAMPLER | sample_self_metrics(all_on)
    assert not names & sampled, names & sampled
    assert all_on - sampled - INTERVAL_GAUGES <= names


@pytest.mark.parametrize("view", EXPORTS)
def test_one_collector_off(exported: dict[str, set[str]], view: str) -> None:
    names = exported[view]
    gone = EXPORTS[view] | (INTERVAL_GAUGES if view == "pg_stat_io" else set())
    assert not names & gone, names & gone
    others = set().union(*(series for name, series in EXPORTS.items() if name != view))
    assert others | ALWAYS <= names, (others | ALWAYS) - names

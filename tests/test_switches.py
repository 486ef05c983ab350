"""Switches: `--sample-interval 0` turns the sampler off, `--no-collector.NAME` one view. The
series of what is switched off disappear; everything else is still exported. What disappears
is exactly what the collector declares (its `families`, from which alerts/needs.py derives the
alerts each collector's absence costs, docs/alerts.md), and turning off one the alerts need
says so at start-up."""

from __future__ import annotations

import time

import pytest
import yaml
from alerts.needs import Rules
from alerts.render import ALERTS_FILE, RECORDING_FILE

import contract
from harness import REPO, Exporter
from pg_aio_exporter.collectors import registry
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
        "pg_aio_wal_sync_sampled_seconds_total",
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
# Counted from the first time it happens: the exporter woke late or a sample was still running
# (load on the machine), whatever collectors run.
BY_CHANCE = {"pg_aio_exporter_sample_overruns_total", "pg_aio_exporter_sample_stalls_total"}


# Served whatever collectors run, but only where the configuration declares them.
CONFIGURED = {
    "pg_aio_storage_class_info",
    "pg_aio_storage_volume_max_operations_per_second",
    "pg_aio_storage_volume_max_bytes_per_second",
}
VARIANTS = {
    "all on": (),
    "sampling off": ("--sample-interval", "0"),
    **{view: (f"--no-collector.{view}",) for view in registry.names()},
    "all off": tuple(f"--no-collector.{view}" for view in registry.names()),
}


@pytest.fixture(scope="module")
def runs(statements_server: LocalServer) -> dict[str, tuple[set[str], str]]:
    """Series names and log per variant, all exporters running at once, from three polls under
    a read workload (an interval's gauges exist only if its reads reached pg_stat_io in time),
    on a server with pg_stat_statements, so that its collector has series to lose."""
    server = statements_server
    storage = ("--storage-class", "nvme", "--volume-iops", "3000")
    exporters = {
        name: Exporter(
            *("--dsn", server.dsn(), "--poll-interval", "1s", "--sample-interval", "200ms"),
            *(*storage, "--volume-bytes-per-second", "131072000", *flags),
        )
        for name, flags in VARIANTS.items()
    }
    workload = Workload(server.dsn(), clients=1, pause=0.05).start()
    try:
        names = {name: set[str]() for name in exporters}
        for _ in range(3):
            after = time.time()
            for name, exp in exporters.items():
                names[name] |= set(exp.wait_poll(after))
        logs = {name: exp.logs() for name, exp in exporters.items()}
        for log in logs.values():
            assert "level=error" not in log, log
    finally:
        workload.stop()
        for exp in exporters.values():
            assert exp.stop() == 0
    return {name: (names[name], logs[name]) for name in exporters}


@pytest.fixture(scope="module")
def exported(runs: dict[str, tuple[set[str], str]]) -> dict[str, set[str]]:
    return {name: names for name, (names, _) in runs.items()}


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


@pytest.mark.parametrize("view", registry.names())
def test_what_vanishes_is_what_the_collector_declares(
    exported: dict[str, set[str]], view: str
) -> None:
    """The names gone from /metrics with one collector off are exactly those it declares, of
    those the exporter with every collector on served (the others exist only on another server
    version or in another state: 19's settings, a pending restart); the interval gauges, served
    only when a poll interval's reads arrived in time, are checked for absence only."""
    all_on, names = exported["all on"], exported[view]
    declared = set(registry.families()[view])
    assert not names & declared, names & declared
    timing = INTERVAL_GAUGES | BY_CHANCE
    assert (all_on - names) - timing == (declared & all_on) - timing


def test_every_name_is_a_collectors_or_served_with_all_off(exported: dict[str, set[str]]) -> None:
    """The rules' names no collector declares (pg_up, the configured storage class, the
    exporter's self-metrics) never go with a collector, as alerts/needs.py takes them: served
    with every collector off, or (the sampler's) with each one off, since the sampler runs
    while any sampled collector does."""
    declared = set().union(*registry.families().values())
    assert not CONFIGURED - exported["all off"], CONFIGURED - exported["all off"]
    sampler = exported["all on"] - exported["sampling off"] - declared
    rules = {
        name: yaml.safe_load((REPO / "alerts" / name).read_text())["groups"][0]["rules"]
        for name in (RECORDING_FILE, ALERTS_FILE)
    }
    parsed = Rules(
        {r["record"]: r["expr"] for r in rules[RECORDING_FILE]},
        {r["alert"]: r["expr"] for r in rules[ALERTS_FILE]},
    )
    read = set().union(*(parsed.reads(node) for node in parsed.alerts.values()))
    own = read - declared - set(parsed.recording) - {"up"} - BY_CHANCE  # up: Prometheus' own
    each_off = set.intersection(*(exported[view] for view in registry.names()))
    missing = {n for n in own if n not in exported["all off"] and n not in sampler & each_off}
    assert not missing, missing


def test_a_collector_the_alerts_need_is_a_warning(runs: dict[str, tuple[set[str], str]]) -> None:
    """One line names what turning `server` off costs: the regression alerts need its
    pg_server_info (the regime), the saturation alert's baseline branch too."""
    lines = [line for line in runs["server"][1].splitlines() if "collector off" in line]
    assert len(lines) == 1, lines
    assert "level=warn" in lines[0]
    assert "collector=server" in lines[0]
    silences = lines[0].split("silences=")[1].split()[0].split(",")
    weakens = lines[0].split("weakens=")[1].split()[0].split(",")
    assert {"PgAioReadLatencyRegression", "PgAioWriteLatencyRegression"} <= set(silences)
    assert "PgAioStorageSaturated" in weakens
    # No sampler: both sampled collectors are off, and said so.
    sampling = [line for line in runs["sampling off"][1].splitlines() if "collector off" in line]
    assert sorted(line.split("collector=")[1].split()[0] for line in sampling) == [
        "activity",
        "pg_aios",
    ]
    # A collector no alert reads says nothing.
    assert "collector off" not in runs["checkpointer"][1]
    assert "collector off" not in runs["all on"][1]

"""Session-wide real servers: one PostgreSQL 18 with a table 4x shared_buffers, one that wants
passwords, one running io_method=io_uring on storage that can be slowed."""

from __future__ import annotations

import os
import signal
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import settings

from certs import Certs, make_certs
from harness import MONITOR_PASSWORD
from pg_aio_exporter.demo import iouring
from pg_aio_exporter.demo import server as demo_server
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import create_table
from slowdisk import ThrottledDisk, server_on_slow_disk

# The property tests' examples per property (tests/test_config_fuzz.py): 200 in the suite; 25
# where `make unit-lowest` runs them again at the lowest dependency versions
# (--hypothesis-profile=lowest), where the question is whether the parsers still load and fail
# cleanly on those versions, not another 200 draws (25 s of CPU saved).
settings.register_profile("suite", max_examples=200, deadline=None)
settings.register_profile("lowest", settings.get_profile("suite"), max_examples=25)
settings.load_profile("suite")

SMALL_BUFFERS = {"shared_buffers": "16MB", "track_io_timing": "on"}
TABLE_MB = 64


# The files that take longest, in the order of the summary below (clean-clone CI of 4c8dcd2,
# 2026-11-28: 434 s down to 88 s for the first 15, on 2 cores; refresh from that table when it
# drifts): run first, so that with the files spread over parallel workers (`make test`:
# pytest-xdist, one file to one worker) none of them starts last and alone.
SLOWEST_FIRST = (
    "test_writes.py",
    "test_alerts_rules.py",  # promtool 2 and 3 on every fixture: ~2 minutes of CPU each
    "test_report.py",
    "test_image.py",  # the image and the compose stack, most of it the alert's `for: 2m`
    "test_dashboards_e2e.py",
    "test_pool_19.py",  # a minute of it pgbench's alternating runs (issue 45)
    "test_report_html.py",  # three 10 s reports, Chromium and the Nu checker
    "test_alerts_e2e.py",
    "test_workload_time.py",
    "test_faults.py",
    "test_alerts_e2e_pool.py",
    "test_alerts_vmalert.py",
    "test_versions.py",
    "test_hit_ratio.py",
    "test_alerts_e2e_io_uring.py",
    "test_workload_active_time.py",  # ~110 s alone (issue 43)
    # Not in that table's first 15; earlier measures.
    "test_workload_sound.py",
    "test_report_upgrade_19.py",  # five 10 s reports on 18 and 19: ~100-120 s alone
    "test_sampler.py",
    "test_deploy_wheel.py",
    "test_demo.py",  # ~100 s in the parallel run since issue 37 (a nested run of a part)
    "test_supervision.py",  # 48 s alone on a shared machine (issue 32)
    "test_core.py",
    "test_cli.py",
    "test_io_uring.py",
    "test_runtime_faults.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test is either pure logic or talks to real servers; unmarked means integration.
    for item in items:
        if not any(item.iter_markers("unit")):
            item.add_marker(pytest.mark.integration)
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept


def pytest_configure(config: pytest.Config) -> None:
    """A shell starts a background job (`nohup make test > log 2>&1 &`, a script's `&`) with
    SIGINT ignored, and an ignored signal stays ignored through fork and exec: every child the
    suite starts would then ignore the Ctrl-C that stops it (harness.interrupt; issue 48).
    Python's own handler instead: children start with the default, and this pytest stops on
    Ctrl-C as in a terminal."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    """As root, the servers' OS user exists before any test runs: the demo's test checks that
    the demo leaves it as it found it, which a server of a parallel worker created meanwhile
    would otherwise change under it."""
    if os.geteuid() == 0:
        demo_server.ensure_os_user()


# Seconds of setup, call and teardown per test file: the phase summary of `make test`.
MODULE_SECONDS: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    MODULE_SECONDS[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ranked = sorted(MODULE_SECONDS.items(), key=lambda item: -item[1])
    terminalreporter.section("seconds per test file (setup + call + teardown)")
    for path, seconds in ranked[:15]:
        terminalreporter.write_line(f"{seconds:8.1f}s  {path}")
    rest = sum(seconds for _, seconds in ranked[15:])
    terminalreporter.write_line(f"{rest:8.1f}s  {len(ranked[15:])} other files")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A throwaway CA with `server` and `client` certificates for localhost and 127.0.0.1, and
    a `stranger` from the same CA for elsewhere.example (tests/certs.py)."""
    return make_certs(tmp_path_factory.mktemp("certs"), stranger=True)


@pytest.fixture(scope="session")
def pg18() -> Iterator[LocalServer]:
    server = LocalServer.create(settings={**SMALL_BUFFERS, "io_method": "worker"})
    server.start()
    create_table(server.dsn(), TABLE_MB)
    yield server
    server.destroy()


@pytest.fixture(scope="module")
def statements_server() -> Iterator[LocalServer]:
    """pg18's settings and table, with pg_stat_statements loaded and created."""
    server = LocalServer.create(
        settings={**SMALL_BUFFERS, "shared_preload_libraries": "pg_stat_statements"}
    )
    server.start()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    create_table(server.dsn(), TABLE_MB)
    yield server
    server.destroy()


@pytest.fixture(scope="session")
def pw_server() -> Iterator[LocalServer]:
    """No TLS; roles `monitor` (MONITOR_PASSWORD, pg_monitor), `pgpassuser` and `rotating`
    (created by tests/test_passwords.py) log in with a password over TCP, everyone else is
    trusted."""
    server = LocalServer.create(
        hba=("host all monitor,pgpassuser,rotating 127.0.0.1/32 scram-sha-256",)
    )
    server.start()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE monitor LOGIN PASSWORD '{MONITOR_PASSWORD}' IN ROLE pg_monitor")
        conn.execute("CREATE ROLE pgpassuser LOGIN PASSWORD 'the-right-one'")
    yield server
    server.destroy()


@dataclass
class Uring:
    server: LocalServer
    disk: ThrottledDisk

    def io_method(self) -> str:
        with psycopg.connect(self.server.dsn(), autocommit=True) as conn:
            row = conn.execute("SHOW io_method").fetchone()
        assert row is not None
        return str(row[0])


# One scanning client per table: scans of one table synchronize and then wait on each other.
URING_SCAN_TABLES = ("scan_a", "scan_b")


@pytest.fixture(scope="session")
def uring() -> Iterator[Uring]:
    """PostgreSQL 18 built with liburing (scripts/build-postgres-io-uring.py, run by `make
    test`) with io_method=io_uring; its tables live on a ThrottledDisk, normal until a test
    slows it (and sets it back)."""
    settings = {**SMALL_BUFFERS, "io_method": "io_uring"}
    with server_on_slow_disk(iouring.bin_dir(), settings) as (server, disk):
        create_table(server.dsn(), 32)
        for table in URING_SCAN_TABLES:
            create_table(server.dsn(), 16, table)
        stack = Uring(server, disk)
        assert stack.io_method() == "io_uring"
        yield stack

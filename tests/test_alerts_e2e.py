"""End to end: PostgreSQL 18 on slow storage, the exporter, and Prometheus 2 and 3 side by side,
each running the rules (storage turning slow: VictoriaMetrics with vmalert beside them).

Storage turning slow: the shipped rules generated with short windows from a params override
(never edited by hand). One io worker serves four clients scanning a table 2x shared_buffers.
With fast storage no alert may even be pending; once the read-delay shim makes every read slow,
the latency, storage and io worker pool alerts must fire; once storage is fast again they must
resolve.

Storage slow from the start: the shipped rules as shipped, a server whose reads are slow from
its first second next to a normal one, watched by a fresh Prometheus. The regression alerts
cannot see it (the server never differs from its own past): the absolute latency alert must
go pending for it, and nothing for the normal one."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from alertstack import WINDOW, Stack, follow_storage, short_rules
from dashboard_stack import RULE_FILES
from harness import Exporter, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table
from prometheus import VERSIONS, Prometheus
from slowread import ONE_IO_WORKER, SlowReads
from victoriametrics import ENGINES, engine

pytestmark = pytest.mark.integration

SLOW_ALERTS = {
    "PgAioReadLatencyRegression",
    "PgAioReadLatencyHigh",
    "PgAioStorageSaturated",
    "PgAioWorkerPoolSaturated",
}
DELAY_US = 5000


def value(prom: Prometheus, expr: str) -> float | None:
    result = prom.query(expr)
    return float(result[0]["value"][1]) if result else None


def start_prometheus(
    exporter: Exporter, rule_files: list[Path], versions: Sequence[str] = VERSIONS
) -> dict[str, Prometheus]:
    """One Prometheus per version (or VictoriaMetrics with vmalert), each scraping the
    exporter every second."""
    proms: dict[str, Prometheus] = {}
    try:
        for version in versions:
            proms[version] = engine(version, [f"127.0.0.1:{exporter.port}"], rule_files)
    except BaseException:
        stop(proms)
        raise
    return proms


def stop(proms: dict[str, Prometheus]) -> None:
    for prom in proms.values():
        prom.stop()


@dataclass
class Storage:
    """One server on storage slowed at will, its exporter, and one Prometheus per version."""

    slow: SlowReads
    stacks: list[Stack]


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Storage]:
    rules_dir = tmp_path_factory.mktemp("rules")
    short_rules(rules_dir)
    server = LocalServer.create(settings=ONE_IO_WORKER)
    exporter = None
    proms: dict[str, Prometheus] = {}
    try:
        slow = SlowReads(server)
        server.start()
        create_table(server.dsn(), 32)
        exporter = Exporter(
            "--dsn", server.dsn(), "--poll-interval", "1s", "--sample-interval", "200ms"
        )
        proms = start_prometheus(exporter, sorted(rules_dir.glob("*.yml")), ENGINES)
        yield Storage(slow, [Stack(server, exporter, prom) for prom in proms.values()])
    finally:
        stop(proms)
        if exporter:
            exporter.stop()
        server.destroy()


def test_alerts_follow_storage_from_fast_to_slow_and_back(storage: Storage) -> None:
    runs = follow_storage(
        storage.stacks,
        slow=lambda: storage.slow.set_delay(DELAY_US),
        fast=lambda: storage.slow.set_delay(0),
        expected=SLOW_ALERTS,
        inputs=(f"pg_aio:io_worker_utilization:rate{WINDOW}",),
    )
    for stack, run in zip(storage.stacks, runs, strict=True):
        assert run.firing["PgAioWorkerPoolSaturated"]["labels"]["signal"] == "utilization"
        before, after = run.measured["fast"]["ms_per_read"], run.measured["slow"]["ms_per_read"]
        assert before is not None and after is not None, stack.name
        assert after > 10 * before, stack.name


# 8 kB reads at 8 ms each, one at a time: the badly throttled volume of docs/alerts.md.
FROM_START_DELAY_US = 8000
STORAGE_ALERTS = SLOW_ALERTS - {"PgAioWorkerPoolSaturated"}


def test_storage_slow_from_the_first_second_alerts(tmp_path: Path) -> None:
    servers: dict[str, LocalServer] = {}
    workloads: list[Workload] = []
    exporter = None
    proms: dict[str, Prometheus] = {}
    try:
        for name in ("slow", "normal"):
            servers[name] = LocalServer.create(settings=ONE_IO_WORKER)
            if name == "slow":
                SlowReads(servers[name]).set_delay(FROM_START_DELAY_US)
            servers[name].start()
            create_table(servers[name].dsn(), 32)
        config = tmp_path / "targets.yaml"
        targets = [{"name": name, "dsn": server.dsn()} for name, server in servers.items()]
        config.write_text(yaml.safe_dump({"targets": targets}))
        workloads = [Workload(s.dsn(), clients=2, pause=0.1).start() for s in servers.values()]
        exporter = Exporter("--config", str(config), "--poll-interval", "1s")
        proms = start_prometheus(exporter, RULE_FILES)
        watched_since = time.monotonic()
        pending_after: dict[str, float] = {}

        def slow_alerted_normal_quiet() -> bool:
            for version, prom in proms.items():
                alerts = prom.alerts()
                # The alerts on storage speed. The pool's and the exporter's own are not about
                # it: one io worker feeding two scans can be busy on fast storage too, and a
                # sampler can overrun on a loaded machine.
                normal = [
                    a
                    for a in alerts
                    if a["labels"].get("target") == "normal"
                    and a["labels"]["alertname"] in STORAGE_ALERTS
                ]
                assert normal == [], f"Prometheus {version}: alert under a normal load: {normal}"
                if any(
                    a["labels"]["alertname"] == "PgAioReadLatencyHigh"
                    and a["labels"]["target"] == "slow"
                    for a in alerts
                ):
                    pending_after.setdefault(version, round(time.monotonic() - watched_since, 1))
            return pending_after.keys() >= proms.keys()

        def normal_measured() -> bool:
            # Quiet means something only while the normal target's latency is measured and its
            # traffic passes the alert's guard.
            return all(
                value(p, 'pg_aio_target:read_ops_per_second:rate5m{target="normal"} >= 10')
                and value(p, 'pg_aio_target:read_latency_seconds:rate5m{target="normal"}')
                for p in proms.values()
            )

        try:
            wait_for(slow_alerted_normal_quiet, 300, "PgAioReadLatencyHigh on slow", every=1)
            wait_for(
                lambda: slow_alerted_normal_quiet() and normal_measured(),
                120,
                "the normal target's latency under traffic",
                every=1,
            )
        finally:
            for version, prom in proms.items():
                numbers = {
                    target: {
                        name: value(prom, f'pg_aio_target:{rule}:rate5m{{target="{target}"}}')
                        for name, rule in (
                            ("s_per_read", "read_latency_seconds"),
                            ("read_size_bytes", "read_size_bytes"),
                            ("reads_per_s", "read_ops_per_second"),
                        )
                    }
                    for target in servers
                }
                alerts = sorted(
                    (a["labels"]["alertname"], a["labels"].get("target"), a["state"])
                    for a in prom.alerts()
                )
                print(
                    f"\nPrometheus {version}: PgAioReadLatencyHigh pending after "
                    f"{pending_after.get(version)} s\n{numbers}\n{alerts}"
                )
    finally:
        stop(proms)
        if exporter:
            exporter.stop()
        for workload in workloads:
            workload.stop()
        for server in servers.values():
            server.destroy()

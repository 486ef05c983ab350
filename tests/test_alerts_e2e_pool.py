"""End to end: the io worker pool resized under load, with io_method=worker on slow storage
(the read-delay shim), the exporter and a real Prometheus 2 running the shipped rules with
short windows (alertstack.py): quiet with three workers, saturated once the pool shrinks to one.
`make test-vm-e2e` runs it with VictoriaMetrics and vmalert beside Prometheus 2 on the same
exporter (the pool alert on VictoriaMetrics is in `make test` by test_alerts_e2e.py's storage
scenario; a second engine here costs CPU that `make test` has no room for)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from alertstack import WINDOW, Stack, alert_stacks, short_rules
from harness import labels, set_io_workers, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table
from slowread import ONE_IO_WORKER, SlowReads
from victoriametrics import ENGINE, engine_id

pytestmark = pytest.mark.integration

POOL_ALERT = "PgAioWorkerPoolSaturated"
DELAY_US = 5000
POOL_QUIET_SECONDS = 15
# The engines on the one exporter: Prometheus 2 in `make test`, VictoriaMetrics beside it in
# `make test-vm-e2e` (marker vm_e2e).
POOL_ENGINES = [("2",), pytest.param(("2", ENGINE), marks=pytest.mark.vm_e2e)]


@dataclass
class WorkerStack:
    alerts: list[Stack]  # one per engine, on one exporter
    slow: SlowReads


@pytest.fixture(scope="module", params=POOL_ENGINES, ids=lambda v: "+".join(map(engine_id, v)))
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerStack]:
    rules = short_rules(tmp_path_factory.mktemp("rules"))
    server = LocalServer.create(settings=ONE_IO_WORKER)
    try:
        slow = SlowReads(server)
        server.start()
        create_table(server.dsn(), 32)
        with alert_stacks(server, rules, request.param) as alerts:
            yield WorkerStack(alerts, slow)
    finally:
        server.destroy()


def test_shrinking_the_pool_under_load_raises_the_pool_alert(stack: WorkerStack) -> None:
    """io_workers 3 -> 1 under four scans on slow storage: the utilisation, worker samples
    over worker samples, follows the pool at once, and the pool alert fires (the issue saw it
    stay silent for minutes with the former denominator)."""
    stacks, server = stack.alerts, stack.alerts[0].server
    exporter = stacks[0].exporter
    utilization = f"pg_aio:io_worker_utilization:rate{WINDOW}"
    t = labels(target="default")
    set_io_workers(server, 3)
    stack.slow.set_delay(DELAY_US)
    workload = Workload(server.dsn(), clients=4, pause=0.1).start()
    try:
        wait_for(
            lambda: exporter.scrape().get("pg_aio_io_workers", {}).get(t) == 3,
            30,
            "three io workers",
        )
        time.sleep(16)  # the utilisation window holds only the three-worker pool
        three: dict[str, list[float | None]] = {s.name: [] for s in stacks}
        for _ in range(POOL_QUIET_SECONDS):
            for alerts in stacks:
                pool = [
                    a for a in alerts.prometheus.alerts() if a["labels"]["alertname"] == POOL_ALERT
                ]
                assert pool == [], f"{alerts.name}: three io workers are not saturated: {pool}"
                three[alerts.name].append(alerts.value(utilization))
            time.sleep(1)
        set_io_workers(server, 1)
        shrunk = time.monotonic()
        firing: dict[str, dict[str, Any]] = {}
        fired_after: dict[str, float] = {}
        one: dict[str, float | None] = {}

        def all_fired() -> bool:
            for alerts in stacks:
                if alerts.name not in firing and POOL_ALERT in (now := alerts.firing()):
                    firing[alerts.name] = now[POOL_ALERT]
                    fired_after[alerts.name] = round(time.monotonic() - shrunk, 1)
                    one[alerts.name] = alerts.value(utilization)
            return len(firing) == len(stacks)

        # The bar: within 5 minutes of the change, on every engine.
        wait_for(all_fired, 300, "the pool alert", every=1)
        print(f"\nutilisation with 3 workers: {three}\nwith 1: {one}, fired after {fired_after}")
    finally:
        workload.stop()
        stack.slow.set_delay(0)
        set_io_workers(server, None)
    for alert in firing.values():
        assert alert["labels"]["signal"] == "utilization"

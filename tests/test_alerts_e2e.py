"""End to end: PostgreSQL 18 on slow storage, the exporter, and a real Prometheus running the
shipped rules, generated with short windows from a params override (never edited by hand).

One io worker serves four clients scanning a table 2x shared_buffers. With fast storage no
alert may even be pending; once the read-delay shim makes every read slow, the latency,
storage and io worker pool alerts must fire; once storage is fast again they must resolve."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import Exporter, wait_for
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table
from prometheus import Prometheus
from slowread import ONE_IO_WORKER, SlowReads

pytestmark = pytest.mark.integration

GENERATOR = Path(__file__).resolve().parent.parent / "alerts" / "generate.py"
WINDOW = "15s"
# Windows and `for` shrunk to fit a test; every threshold keeps its shipped default except the
# absolute latency one: the shim's slow reads (a few ms) are slow but not 20 ms slow.
SHORT: dict[str, Any] = {
    "rate_windows": ["5s", WINDOW],
    "alert_window": WINDOW,
    "alerts": {
        # Longer than the whole test: the baseline is the median of everything seen.
        "PgAioReadLatencyRegression": {"for": "5s", "baseline_window": "10m"},
        "PgAioReadLatencyHigh": {"for": "5s", "max_seconds_per_read": 0.002},
        "PgAioStorageSaturated": {"for": "5s"},
        "PgAioWorkerPoolSaturated": {"for": "5s"},
    },
}
SLOW_ALERTS = {
    "PgAioReadLatencyRegression",
    "PgAioReadLatencyHigh",
    "PgAioStorageSaturated",
    "PgAioWorkerPoolSaturated",
}
DELAY_US = 5000
QUIET_SECONDS = 40


@dataclass
class Stack:
    server: LocalServer
    slow: SlowReads
    exporter: Exporter
    prometheus: Prometheus

    def firing(self) -> dict[str, dict[str, Any]]:
        return {
            a["labels"]["alertname"]: a for a in self.prometheus.alerts() if a["state"] == "firing"
        }

    def value(self, expr: str) -> float | None:
        result = self.prometheus.query(expr)
        return float(result[0]["value"][1]) if result else None

    def measure(self) -> dict[str, float | None]:
        return {
            name: self.value(expr)
            for name, expr in (
                ("ms_per_read", f"pg_aio_target:read_latency_seconds:rate{WINDOW} * 1e3"),
                ("ms_per_MiB", f"pg_aio_target:read_seconds_per_byte:rate{WINDOW} * 2^20 * 1e3"),
                ("reads_per_s", f"pg_aio_target:read_ops_per_second:rate{WINDOW}"),
                ("read_size_bytes", f"pg_aio_target:read_size_bytes:rate{WINDOW}"),
                ("io_worker_utilization", f"pg_aio:io_worker_utilization:rate{WINDOW}"),
                (
                    "sessions_waiting_on_io",
                    f'sum(pg_aio:active_sessions:rate{WINDOW}{{wait_event_type="IO",'
                    'backend_type!="io worker"})',
                ),
            )
        }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    rules_dir = tmp_path_factory.mktemp("rules")
    override = rules_dir / "short.yaml"
    override.write_text(yaml.safe_dump(SHORT))
    subprocess.run(
        [sys.executable, GENERATOR, "--params", override, "--out", rules_dir], check=True
    )
    server = LocalServer.create(settings=ONE_IO_WORKER)
    exporter = prometheus = None
    try:
        slow = SlowReads(server)
        server.start()
        create_table(server.dsn(), 32)
        exporter = Exporter(
            "--dsn", server.dsn(), "--poll-interval", "1s", "--sample-interval", "200ms"
        )
        prometheus = Prometheus(
            targets=[f"127.0.0.1:{exporter.port}"],
            rule_files=sorted(rules_dir.glob("*.yml")),
            interval="1s",
        )
        yield Stack(server, slow, exporter, prometheus)
    finally:
        if prometheus:
            prometheus.stop()
        if exporter:
            exporter.stop()
        server.destroy()


def test_alerts_follow_storage_from_fast_to_slow_and_back(stack: Stack) -> None:
    started = time.monotonic()
    workload = Workload(stack.server.dsn(), clients=4, pause=0.1).start()
    try:
        # The quiet phase only proves something if the alerts' inputs exist and the traffic
        # guard is passed: otherwise "no alert" would be trivially true.
        wait_for(
            lambda: (
                stack.value(f"pg_aio_target:read_ops_per_second:rate{WINDOW} >= 10")
                and stack.value(f"pg_aio:io_worker_utilization:rate{WINDOW}") is not None
                and stack.value(f"pg_aio_target:read_seconds_per_byte:rate{WINDOW}")
            ),
            60,
            "recording rules with traffic",
            every=0.5,
        )
        deadline = time.monotonic() + QUIET_SECONDS
        while time.monotonic() < deadline:
            alerts = stack.prometheus.alerts()
            assert alerts == [], f"alert under a normal load: {alerts}"
            time.sleep(1)
        fast = stack.measure()

        stack.slow.set_delay(DELAY_US)
        slow_since = time.monotonic()
        fired_after: dict[str, float] = {}

        def all_fired() -> bool:
            firing = stack.firing()
            for name in firing.keys() & SLOW_ALERTS:
                fired_after.setdefault(name, round(time.monotonic() - slow_since, 1))
            unexpected = firing.keys() - SLOW_ALERTS
            assert not unexpected, f"unexpected alerts: {[firing[n] for n in unexpected]}"
            return fired_after.keys() >= SLOW_ALERTS

        try:
            wait_for(all_fired, 120, "latency, storage and io worker alerts", every=1)
        finally:
            slow_numbers = stack.measure()
            print(
                f"\nfast: {fast}\nslow ({DELAY_US} us): {slow_numbers}\nfired after {fired_after}"
            )
        firing = stack.firing()
        assert firing["PgAioWorkerPoolSaturated"]["labels"]["signal"] == "utilization"
        for alert in firing.values():
            assert alert["annotations"]["runbook_url"].endswith(
                alert["labels"]["alertname"].lower()
            )

        stack.slow.set_delay(0)
        fast_since = time.monotonic()
        wait_for(
            lambda: not stack.firing().keys() & SLOW_ALERTS,
            90,
            "the alerts to resolve on fast storage",
            every=1,
        )
        print(f"resolved after {time.monotonic() - fast_since:.1f}s")
    finally:
        workload.stop()
        print(f"e2e phases took {time.monotonic() - started:.1f}s")

    assert fast["ms_per_read"] is not None and slow_numbers["ms_per_read"] is not None
    assert slow_numbers["ms_per_read"] > 10 * fast["ms_per_read"]

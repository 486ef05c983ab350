"""End to end with io_method=io_uring: the session's io_uring server (conftest.uring), whose
tables sit on a disk throttled below the system call (slowdisk.py: io_uring never calls the
libc read that the shim slows), the exporter, and a real Prometheus 2 with the shipped rules in
short windows (alertstack.py); `make test-vm-e2e` runs it with VictoriaMetrics and vmalert
beside Prometheus 2 on the same exporter (the storage alerts on VictoriaMetrics are in `make
test` by test_alerts_e2e.py; a second engine here costs CPU that `make test` has no room for).

With fast storage no alert may even be pending; once the disk is throttled the latency and
storage alerts must fire and the io worker pool alert must not (io_uring runs no io workers:
no utilisation exists to alert on); once it is fast again they must resolve. The dashboards'
io worker panels then find nothing to draw and say why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from dashboards import dashboard_queries as dq

from alertstack import STORAGE_ALERTS, WINDOW, Stack, alert_stacks, follow_storage, short_rules
from conftest import Uring
from dashboard_stack import E2E_GLOBALS, E2E_OFFSET, ROOT
from victoriametrics import ENGINE, engine_id

pytestmark = pytest.mark.integration

SLOW_BPS = 8 << 20
# The engines on the one exporter: Prometheus 2 in `make test`, VictoriaMetrics beside it in
# `make test-vm-e2e` (marker vm_e2e).
URING_ENGINES = [("2",), pytest.param(("2", ENGINE), marks=pytest.mark.vm_e2e)]


@pytest.fixture(scope="module", params=URING_ENGINES, ids=lambda v: "+".join(map(engine_id, v)))
def stacks(
    request: pytest.FixtureRequest, uring: Uring, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Stack]]:
    rules = short_rules(tmp_path_factory.mktemp("rules"))
    with alert_stacks(uring.server, rules, request.param) as stacks:
        yield stacks


def test_alerts_follow_throttled_storage_under_io_uring(uring: Uring, stacks: list[Stack]) -> None:
    assert uring.io_method() == "io_uring"
    runs = follow_storage(
        stacks,
        slow=lambda: uring.disk.set_limit(read_bps=SLOW_BPS),
        fast=uring.disk.set_limit,
        expected=STORAGE_ALERTS,
    )
    assert uring.io_method() == "io_uring"
    for stack, run in zip(stacks, runs, strict=True):
        fast, slow = run.measured["fast"], run.measured["slow"]
        assert fast["ms_per_read"] is not None and slow["ms_per_read"] is not None, stack.name
        assert slow["ms_per_read"] > 10 * fast["ms_per_read"], stack.name
        assert slow["io_worker_utilization"] is None, f"{stack.name}: no io workers, io_uring"
        waiting = slow["sessions_waiting_on_reads"]
        assert waiting is not None and waiting > 2, stack.name


def every_value(board: dict[str, Any]) -> dict[str, str]:
    """Grafana's variables at their widest: "All" for every label, the short rules' window."""
    values = {"datasource": "prometheus", **E2E_GLOBALS, "offset": E2E_OFFSET, "window": WINDOW}
    for var in dq.variables(board):
        if var["type"] == "query":
            values[var["name"]] = var["allValue"]
    return values


def test_io_worker_panels_say_there_are_none(uring: Uring, stacks: list[Stack]) -> None:
    """Every panel that reads io worker metrics returns nothing under io_uring, so Grafana
    shows its "no io workers" text, not 0 and not a blank panel."""
    assert uring.io_method() == "io_uring"
    checked = 0
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        values = every_value(board)
        for panel in dq.panels(board):
            exprs = [target["expr"] for target in panel.get("targets", [])]
            if not any("pg_aio_io_worker" in e or "io_worker_utilization" in e for e in exprs):
                continue
            no_value = panel["fieldConfig"]["defaults"].get("noValue", "")
            assert no_value.startswith("no io workers"), (path.name, panel["title"])
            for expr in exprs:
                for stack in stacks:
                    found = stack.prometheus.query(dq.substitute(expr, values))
                    assert found == [], (stack.name, expr)
            checked += 1
    assert checked >= 3

"""The stack the dashboards are checked and pictured against: a read workload on a real
PostgreSQL 18, the exporter with short intervals, and a real Prometheus that scrapes it and
evaluates the shipped rules. Used by test_dashboards_e2e.py and dashboards/render_pictures.py."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import Exporter, wait_for
from pg_aio_exporter.demo.workload import Workload
from prometheus import Prometheus

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "dashboards"))

import dashboard_queries as dq  # noqa: E402  (dashboards/ is not a package)

# The shipped rule files, as shipped: their shortest window (1m) already yields data after two
# 1 s scrapes, so no regeneration with shorter windows is needed.
RULE_FILES = sorted((ROOT / "alerts").glob("*.yml"))
# Grafana's globals for a dashboard over the last minute of 1 s scrapes ($__rate_interval is
# at least 4 scrape intervals).
E2E_GLOBALS = {"__rate_interval": "5s", "__interval": "1s", "__range": "20s"}
# A user-typed comparison offset short enough for "now vs before" to have both sides in a
# one-minute test; 1d/7d/30d are the same query with a longer offset.
E2E_OFFSET = "20s"


@contextmanager
def aio_stack(dsn: str) -> Iterator[tuple[Exporter, Prometheus]]:
    workload = Workload(dsn, clients=2, pause=0.05).start()
    exporter = prom = None
    try:
        # An extra label, as a fleet has: the dashboards' variable for it must list a value.
        exporter = Exporter(
            "--dsn",
            dsn,
            "--label",
            "cluster=e2e",
            "--poll-interval",
            "1s",
            "--sample-interval",
            "200ms",
        )
        prom = Prometheus([f"127.0.0.1:{exporter.port}"], rule_files=RULE_FILES, interval="1s")
        wait_for(lambda: prom and prom.query("pg_up"), 30, "Prometheus' first scrape")
        yield exporter, prom
    finally:
        if prom:
            prom.stop()
        if exporter:
            exporter.stop()
        workload.stop()


def regex_escape(value: str) -> str:
    # Grafana escapes regex metacharacters in multi-value variables, doubled for PromQL strings.
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", value)


def resolve(
    board: Mapping[str, Any],
    prom: Prometheus,
    prefer: Mapping[str, str] | None = None,
    seconds: float = 60,
) -> dict[str, str]:
    """Variable values as Grafana would set them, each label_values() query run against
    Prometheus with the variables before it already set. Without `prefer` every multi-value
    variable is "All" (its allValue); with it, one real value: the preferred one if Prometheus
    has it, else the first. Raises AssertionError when a variable query lists nothing."""
    values: dict[str, str] = {"datasource": "prometheus", **E2E_GLOBALS}
    end = time.time()
    variable_queries = {q.where: q for q in dq.queries(board) if q.kind == "variable"}
    for var in dq.variables(board):
        name = var["name"]
        if var["type"] == "custom":
            values[name] = E2E_OFFSET if name == "offset" else var["current"]["value"]
            continue
        if var["type"] != "query":
            continue
        query = variable_queries[f"variable {name!r}"]
        selector = dq.substitute(query.expr, values)
        listed = prom.api(
            f"label/{query.label}/values",
            **{"match[]": selector, "start": str(end - seconds), "end": str(end)},
        )
        assert listed, f"variable {name}: label_values({selector}, {query.label}) lists nothing"
        if prefer is None:
            values[name] = var["allValue"]
        else:
            pick = prefer.get(name) if prefer.get(name) in listed else listed[0]
            values[name] = regex_escape(str(pick))
    return values

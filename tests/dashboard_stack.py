"""The stack the dashboards are checked and pictured against: a read workload on a real
PostgreSQL 18, the exporter, and real Prometheus servers (one per version asked for) that scrape
it and evaluate the shipped rules. Used by test_dashboards_e2e.py and
dashboards/render_pictures.py."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from dashboards import dashboard_queries as dq

from harness import Exporter, wait_for
from pg_aio_exporter.demo.workload import Workload
from prometheus import Prometheus
from victoriametrics import engine

ROOT = Path(__file__).resolve().parent.parent

# The shipped rule files, as shipped: their windows (4m, 5m) yield data after two scrapes.
RULE_FILES = sorted((ROOT / "alerts").glob("*.yml"))


def grafana_globals(scrape_seconds: int, range_seconds: int) -> dict[str, str]:
    """Grafana's globals for a dashboard over the last `range_seconds`, its data source's scrape
    interval set to the real one. $__interval is then the scrape interval (a short range), and
    $__rate_interval = max($__interval + scrape interval, 4 x scrape interval) = 4 x."""
    return {
        "__rate_interval": f"{4 * scrape_seconds}s",
        "__interval": f"{scrape_seconds}s",
        "__range": f"{range_seconds}s",
    }


# Grafana over the last 20 s of 1 s scrapes, and a user-typed comparison offset short enough
# for "now vs before" to have both sides in a one-minute run; 1d/7d/30d are the same query
# with a longer offset.
E2E_GLOBALS = grafana_globals(1, 20)
E2E_OFFSET = "20s"


@contextmanager
def aio_stack(
    dsn: str,
    *,
    scrape_interval: str = "1s",
    poll_interval: str = "1s",
    versions: Sequence[str] = ("2",),
    jobs: Mapping[str, Sequence[str]] | None = None,
) -> Iterator[tuple[Exporter, dict[str, Prometheus]]]:
    """Yields the exporter and a Prometheus per version in `versions` (or VictoriaMetrics with
    vmalert: victoriametrics.ENGINES), each scraping it (and `jobs`) every `scrape_interval`,
    once each has scraped it."""
    workload = Workload(dsn, clients=2, pause=0.05).start()
    exporter = None
    proms: dict[str, Prometheus] = {}
    try:
        # An extra label, as a fleet has: the dashboards' variable for it must list a value.
        exporter = Exporter(
            "--dsn",
            dsn,
            "--label",
            "cluster=e2e",
            "--poll-interval",
            poll_interval,
            "--sample-interval",
            "200ms",
        )
        for version in versions:
            proms[version] = engine(
                version,
                [f"127.0.0.1:{exporter.port}"],
                rule_files=RULE_FILES,
                interval=scrape_interval,
                jobs=jobs,
            )
        for prom in proms.values():
            # The first scrape comes within one interval (Prometheus spreads scrape starts).
            wait_for(partial(prom.query, 'pg_up{target!=""}'), 90, "a first scrape", every=1)
        yield exporter, proms
    finally:
        for prom in proms.values():
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
    *,
    grafana: Mapping[str, str] = E2E_GLOBALS,
    offset: str = E2E_OFFSET,
) -> dict[str, str]:
    """Variable values as Grafana would set them, each label_values() query run against
    Prometheus with the variables before it already set. Without `prefer` every multi-value
    variable is "All" (its allValue); with it, one real value: the preferred one if Prometheus
    has it, else the first. `grafana`: Grafana's globals; `offset`: the comparison offset typed
    in. Raises AssertionError when a variable query lists nothing."""
    values: dict[str, str] = {"datasource": "prometheus", **grafana}
    end = time.time()
    variable_queries = {q.where: q for q in dq.queries(board) if q.kind == "variable"}
    for var in dq.variables(board):
        name = var["name"]
        if var["type"] == "custom":
            values[name] = offset if name == "offset" else var["current"]["value"]
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

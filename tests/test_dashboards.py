"""Static checks of the shipped Grafana dashboards: what Grafana and Prometheus would reject or
silently show empty, caught without either running."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from alerts.params import seconds
from dashboards import dashboard_queries as dq
from dashboards import generate

import dashboard_lint
from prometheus import VERSIONS, binary

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.unit

BOARDS = sorted((ROOT / "dashboards").glob("*.json"))
ROW = frozenset({"target", "backend_type", "object", "context"})
TARGET = frozenset({"target"})
# What the dashboards may read, with the labels each carries: the metric contract,
# docs/metrics.md (tests/test_contract.py checks that every name here is documented there).
CONTRACT: dict[str, frozenset[str]] = {
    **{
        f"pg_stat_io_{column}_total": ROW
        for column in [
            "reads",
            "read_bytes",
            "read_time_seconds",
            "writes",
            "write_bytes",
            "write_time_seconds",
            "writebacks",
            "writeback_time_seconds",
            "extends",
            "extend_bytes",
            "extend_time_seconds",
            "hits",
            "evictions",
            "reuses",
            "fsyncs",
            "fsync_time_seconds",
        ]
    },
    "pg_stat_io_stats_reset_timestamp_seconds": TARGET,
    "pg_aio_read_latency_seconds": ROW,
    "pg_aio_read_seconds_per_byte": ROW,
    "pg_aio_read_size_bytes": ROW,
    "pg_aio_hit_ratio": ROW,
    # The write side (issue 23), documented in docs/metrics.md.
    **{f"pg_aio_{op}_latency_seconds": ROW for op in ("write", "extend", "writeback", "fsync")},
    **{f"pg_aio_{op}_seconds_per_byte": ROW for op in ("write", "extend")},
    **{
        f"pg_aio_wal_{name}": TARGET
        for name in (
            "writes_total",
            "write_time_seconds_total",
            "syncs_total",
            "sync_time_seconds_total",
            "write_latency_seconds",
            "sync_latency_seconds",
        )
    },
    **{f"pg_stat_wal_{name}_total": TARGET for name in ("records", "fpi", "bytes", "buffers_full")},
    "pg_up": TARGET,
    "pg_aio_supported": TARGET,
    "pg_server_info": TARGET | {"version", "version_num"},
    "pg_postmaster_start_time_seconds": TARGET,
    **{
        f"pg_settings_{name}": TARGET
        for name in [
            "io_workers",
            "io_min_workers",
            "io_max_workers",
            "io_worker_idle_timeout_seconds",
            "io_worker_launch_interval_seconds",
            "effective_io_concurrency",
            "maintenance_io_concurrency",
            "io_max_concurrency",
            "io_combine_limit_bytes",
            "io_max_combine_limit_bytes",
            "shared_buffers_bytes",
            "track_io_timing",
            "track_wal_io_timing",
            "block_size_bytes",
        ]
    },
    "pg_aio_io_method": TARGET | {"io_method"},
    "pg_settings_pending_restart": TARGET | {"name"},
    "pg_aio_sampler_samples_total": TARGET,
    "pg_aio_wait_event_samples_total": TARGET | {"backend_type", "wait_event_type", "wait_event"},
    "pg_aio_io_workers": TARGET,
    "pg_aio_io_worker_busy_samples_total": TARGET,
    "pg_aio_io_worker_samples_total": TARGET,
    "pg_aio_io_worker_utilization_ratio": TARGET,
    "pg_aio_in_flight_samples_total": TARGET | {"state", "operation"},
    "pg_aio_in_flight_bytes_samples_total": TARGET | {"operation"},
    "pg_aio_in_flight_max": TARGET | {"operation"},
    "pg_aio_exporter_build_info": frozenset({"version", "python_version"}),
    "pg_aio_exporter_poll_errors_total": TARGET | {"collector", "kind"},
    "pg_aio_exporter_last_poll_success_timestamp_seconds": TARGET,
    "pg_aio_exporter_sample_overruns_total": TARGET,
    "pg_aio_exporter_sample_stalls_total": TARGET,
    **{
        f"pg_aio_statements_{name}_total": TARGET
        for name in [
            "calls",
            "exec_seconds",
            "rows",
            "shared_blocks_read",
            "shared_blocks_hit",
            "shared_block_read_seconds",
        ]
    },
    "pg_aio_statements_entries": TARGET,
    "pg_aio_statements_deallocations_total": TARGET,
    **{
        f"pg_stat_database_{name}_total": TARGET | {"datname"}
        for name in ["xact_commit", "xact_rollback", "blks_read", "blks_hit"]
    },
}
HISTOGRAMS = {
    "pg_aio_exporter_poll_duration_seconds": TARGET | {"collector"},
    "pg_aio_exporter_sample_duration_seconds": TARGET,
}
for _name, _labels in HISTOGRAMS.items():
    CONTRACT[f"{_name}_bucket"] = _labels | {"le"}
    CONTRACT[f"{_name}_sum"] = _labels
    CONTRACT[f"{_name}_count"] = _labels
# Labels Prometheus adds to every scraped series.
SCRAPE_LABELS = frozenset({"job", "instance"})
# Values for the query variables in static checks: any string works, these read naturally.
SAMPLE_VALUES = {"target": "default", "backend_type": "client backend", "object": "relation"}
SAMPLE_VALUES |= {"context": "normal", "job": "pg_aio", "instance": "db:9188", "cluster": "c1"}


def load(path: Path) -> dict[str, Any]:
    board: dict[str, Any] = json.loads(path.read_text())
    return board


def substituted(board: dict[str, Any]) -> Iterator[tuple[dq.Query, str]]:
    """Each query with its variables replaced, once per combination of the custom variables'
    options (each offset)."""
    for combo in dq.custom_combinations(board):
        values = {"datasource": "prometheus", **dq.GLOBALS, **SAMPLE_VALUES, **combo}
        for query in dq.queries(board):
            yield query, dq.substitute(query.expr, values)


def check_metrics(expr: str, allowed: dict[str, frozenset[str]]) -> list[str]:
    """Problems with the series an expression selects: unknown metric, or a matcher on a label
    that metric does not carry (which would silently select nothing)."""
    problems = []
    for selector in dq.selectors(expr):
        name = dq.metric_name(selector)
        if name is None:
            problems.append(f"selector without a metric name: {selector}")
        elif name == "ALERTS":
            if not any(m.name == "alertname" for m in selector.matchers.matchers):
                problems.append("ALERTS without an alertname matcher")
        elif name not in allowed:
            problems.append(f"{name} is not a contract metric")
        else:
            matchers = selector.matchers.matchers
            carried = allowed[name] | SCRAPE_LABELS | {"__name__"}
            # A target's extra labels are on its PostgreSQL series, not on the exporter's own.
            if "target" in carried and not name.startswith("pg_aio_exporter_"):
                carried |= set(generate.EXTRA_LABELS)
            for matcher in matchers:
                if matcher.name not in carried:
                    problems.append(f"{name} has no label {matcher.name}")
            if not any(
                (m.name, str(m.op), m.value) == ("target", "MatchOp.NotEqual", "") for m in matchers
            ):
                # Without it, postgres_exporter's pg_up or pg_settings_* show up as well.
                problems.append(f'{name} may select other exporters\' series: no target!=""')
    return problems


def overlaps(board: dict[str, Any]) -> list[str]:
    seen: dict[tuple[int, int], int] = {}
    problems = []
    for panel in dq.panels(board):
        pos = panel["gridPos"]
        for y in range(pos["y"], pos["y"] + pos["h"]):
            for x in range(pos["x"], pos["x"] + pos["w"]):
                if (x, y) in seen:
                    problems.append(f"panel {panel['id']} overlaps panel {seen[x, y]} at {x},{y}")
                seen[x, y] = panel["id"]
    return problems


@pytest.fixture(params=BOARDS, ids=lambda p: p.name)
def board(request: pytest.FixtureRequest) -> dict[str, Any]:
    return load(request.param)


def test_two_dashboards_are_shipped() -> None:
    titles = {load(p)["title"] for p in BOARDS}
    assert titles == {"PostgreSQL AIO overview", "AIO upgrade and io_method comparison"}


def test_committed_json_is_what_the_generator_builds() -> None:
    built = generate.dashboards()
    assert sorted(built) == BOARDS, "a dashboards/*.json that the generator does not build"
    for path, board in built.items():
        assert path.read_text() == generate.render(board), (
            f"{path.name} is stale: run make dashboards"
        )


def test_importable_as_is(board: dict[str, Any]) -> None:
    # Grafana 10.x writes schemaVersion 36-39, 11.x 39-41: newer would make 10/11 refuse it.
    assert 36 <= board["schemaVersion"] <= 41
    assert board["uid"] and len(board["uid"]) <= 40
    assert board["title"]
    assert board.get("id") is None, "a numeric id makes the import overwrite another dashboard"
    assert board["tags"] and board["description"]

    def datasources(node: Any) -> Iterator[Any]:
        if isinstance(node, dict):
            if "datasource" in node:
                yield node["datasource"]
            for value in node.values():
                yield from datasources(value)
        elif isinstance(node, list):
            for value in node:
                yield from datasources(value)

    refs = {json.dumps(ref, sort_keys=True) for ref in datasources(board)}
    # Only the variable, and Grafana's own annotation store: no uid of one installation.
    assert refs <= {
        json.dumps({"type": "prometheus", "uid": "${datasource}"}, sort_keys=True),
        json.dumps({"type": "grafana", "uid": "-- Grafana --"}, sort_keys=True),
    }, refs


def test_variables(board: dict[str, Any]) -> None:
    by_name = {v["name"]: v for v in dq.variables(board)}
    assert by_name["datasource"]["type"] == "datasource"
    assert by_name["datasource"]["query"] == "prometheus"
    server = ("job", "instance", *generate.EXTRA_LABELS, "target")
    for name in (*server, "backend_type", "object", "context"):
        var = by_name[name]
        assert var["type"] == "query" and var["multi"] and var["includeAll"], name
        assert var["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    # Rates follow Grafana's $__rate_interval, not a window variable.
    assert "window" not in by_name


def test_ranges_hold_at_any_scrape_interval(board: dict[str, Any]) -> None:
    """Panels rate over $__rate_interval (at least 4 scrapes at the data source's scrape
    interval) or the whole $__range; annotations' fixed ranges hold 4 scrapes of 60 s."""
    problems = []
    for query in dq.queries(board):
        for window in re.findall(r"\[([^\]]+)\]", query.expr):
            if query.kind == "annotation":
                if seconds(window) < 4 * 60:
                    problems.append(f"{query.where}: {window}")
            elif window not in ("$__rate_interval", "$__range"):
                problems.append(f"{query.where}: {window}")
    assert problems == []


def test_every_variable_used_is_defined_before_use(board: dict[str, Any]) -> None:
    defined: set[str] = set(dq.GLOBALS)
    for var in dq.variables(board):
        query = var.get("query", "")
        text = json.dumps(query) if isinstance(query, dict) else str(query)
        assert dq.referenced(text) <= defined, f"variable {var['name']} uses a later variable"
        defined.add(var["name"])
    texts = [json.dumps(board.get("panels", [])), json.dumps(board.get("annotations", {}))]
    used = set().union(*(dq.referenced(t) for t in texts))
    assert used <= defined, f"undefined: {used - defined}"


def test_panels_ids_and_grid(board: dict[str, Any]) -> None:
    ids = [p["id"] for p in dq.panels(board)]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    for panel in dq.panels(board):
        pos = panel["gridPos"]
        assert all(isinstance(pos[k], int) for k in "xywh"), panel["title"]
        assert pos["x"] >= 0 and pos["y"] >= 0 and pos["w"] >= 1 and pos["h"] >= 1
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            assert pos["w"] == 24 and pos["h"] == 1 and not panel.get("targets")
    assert overlaps(board) == []


def test_every_panel_is_described_and_queried(board: dict[str, Any]) -> None:
    for panel in dq.panels(board):
        if panel["type"] == "row":
            continue
        where = f"panel {panel['id']} {panel['title']!r}"
        assert len(panel.get("description", "")) >= 60, f"{where}: say what it shows"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)) and all(refs), where
        assert all(t["expr"].strip() for t in panel["targets"]), where
        if panel["type"] in {"timeseries", "stat"}:
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{where}: no unit"


def test_every_query_parses_and_selects_only_our_contract_metrics(
    board: dict[str, Any],
) -> None:
    problems = []
    for query, expr in substituted(board):
        try:
            problems += [f"{query.where}: {p}" for p in check_metrics(expr, CONTRACT)]
        except ValueError as err:
            problems.append(f"{query.where}: does not parse: {err}: {expr}")
    assert problems == []


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"prometheus{v}")
def test_prometheus_itself_accepts_every_query(tmp_path: Path, version: str) -> None:
    """promql-parser is a port; Prometheus' own parser (promtool) is the one that will run the
    queries, and it knows which functions each Prometheus version has."""
    exprs = sorted({expr for path in BOARDS for _, expr in substituted(load(path))})
    rules = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = subprocess.run(
        [binary(version, "promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafanas_linter_rules_and_the_metric_contract_hold(board: dict[str, Any]) -> None:
    """tests/dashboard_lint.py: Grafana's dashboard-linter rules, and every metric a panel
    selects in docs/metrics.md or the recording rules (a dashboard must not depend on a hidden
    or misspelled series)."""
    assert dashboard_lint.lint(board) == []


def test_every_lint_exclusion_is_still_needed() -> None:
    everything = [load(p) for p in BOARDS]
    for rule, title in dashboard_lint.EXCLUSIONS:
        unexcused = dict(dashboard_lint.EXCLUSIONS)
        del unexcused[rule, title]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(dashboard_lint, "EXCLUSIONS", unexcused)
            found = [p for b in everything for p in dashboard_lint.lint(b)]
        assert any(p.startswith(f"{rule}: ") and repr(title) in p for p in found), (rule, title)


def _mutated(change: Any) -> list[str]:
    """The overview dashboard's findings after `change(board)` edits a copy of it."""
    board = load(ROOT / "dashboards" / "pg-aio-overview.json")
    change(board)
    return dashboard_lint.lint(board)


def _first_target(board: dict[str, Any], containing: str) -> dict[str, Any]:
    return next(
        t for p in dq.panels(board) for t in p.get("targets", []) if containing in t["expr"]
    )


def _replace_in_first(containing: str, new: str) -> Any:
    def change(board: dict[str, Any]) -> None:
        target = _first_target(board, containing)
        target["expr"] = target["expr"].replace(containing, new)

    return change


def _variable(name: str, key: str, value: Any) -> Any:
    def change(board: dict[str, Any]) -> None:
        next(v for v in dq.variables(board) if v["name"] == name)[key] = value

    return change


@pytest.mark.parametrize(
    ("change", "rule", "says"),
    [
        (
            _replace_in_first("pg_stat_io_reads_total", "pg_stat_io_read_total"),
            "target-contract-rule",
            "pg_stat_io_read_total",
        ),
        (_replace_in_first("[$__rate_interval]", "[5m]"), "target-rate-interval-rule", "0:05:00"),
        (_replace_in_first("[$__rate_interval]", "[$__range]"), "target-rate-interval-rule", ""),
        (_replace_in_first('job=~"$job", ', ""), "target-job-rule", 'job=~"$job"'),
        (_replace_in_first('instance=~"$instance", ', ""), "target-instance-rule", ""),
        (
            _replace_in_first("rate(pg_stat_io_reads_total", "(pg_stat_io_reads_total"),
            "target-promql-rule",
            "",
        ),
        (
            _replace_in_first("rate(pg_stat_io_reads_total", "delta(pg_stat_io_reads_total"),
            "target-counter-agg-rule",
            "pg_stat_io_reads_total",
        ),
        (_variable("job", "allValue", ".*"), "template-job-rule", "allValue"),
        (_variable("instance", "multi", False), "template-instance-rule", "multi"),
        (_variable("datasource", "name", "ds"), "template-datasource-rule", "ds"),
        (
            _variable("target", "query", {"query": "label_values(pg_up{, target)"}),
            "template-label-promql-rule",
            "target",
        ),
        (
            lambda b: _first_target(b, "pg_up").update(datasource={"uid": "P1809F7CD0C75ACF3"}),
            "panel-datasource-rule",
            "P1809F7CD0C75ACF3",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_linter_fails_on_a_broken_copy(change: Any, rule: str, says: str) -> None:
    found = _mutated(change)
    assert any(p.startswith(f"{rule}: ") and says in p for p in found), found


# The checkers above must be able to fail: each gets an input it has to reject.


def test_checkers_reject_bad_queries() -> None:
    allowed = dict(CONTRACT)
    assert check_metrics('rate(pg_stat_io_reads_total{target!=""}[5m])', allowed) == []
    assert check_metrics('rate(pg_stat_io_read_total{target!=""}[5m])', allowed)
    assert check_metrics('pg_up{target!="", backend_type="x"}', allowed)
    assert check_metrics('pg_up{target=~".*"}', allowed)
    assert check_metrics('{__name__=~"pg_.*"}', allowed)
    assert check_metrics("ALERTS", allowed)
    with pytest.raises(ValueError):
        dq.selectors("rate(pg_up[5m)")
    with pytest.raises(KeyError):
        dq.substitute('pg_up{target=~"$targte"}', {"target": "x"})
    assert dq.referenced("a $x ${y:regex} [[z]] $__rate_interval") == {
        "x",
        "y",
        "z",
        "__rate_interval",
    }
    assert dq.without_threshold("(sum(a) > 0) or (b > 1)") == "(sum(a{})) or (b{})"


def test_overlap_checker_rejects_overlap() -> None:
    def panel(i: int, x: int, y: int) -> dict[str, Any]:
        return {"id": i, "gridPos": {"x": x, "y": y, "w": 12, "h": 8}}

    assert overlaps({"panels": [panel(1, 0, 0), panel(2, 12, 0)]}) == []
    assert overlaps({"panels": [panel(1, 0, 0), panel(2, 11, 7)]})

"""Grafana's dashboard-linter rules, reimplemented (it cannot be built here), and the dashboards'
metric contract: every metric a panel names is in docs/metrics.md or is a recording rule of
alerts/*.yml.

    PYTHONPATH=. python tests/dashboard_lint.py dashboards/*.json  # a line a finding; exit 1 if any

Rules as the linter names them, applied where they fit this exporter:
- template-datasource-rule: a data source variable `datasource` ("Data source") of Prometheus.
- template-job-rule, template-instance-rule: `job` and `instance` query variables on that data
  source, labelled "Job" / "Instance", multi-value, "All" = `.+` (both labels are on every
  scraped series, so `.+` selects them all; the `cluster` variable keeps `.*`, as a target may
  carry no cluster label).
- template-label-promql-rule: every variable query is valid PromQL.
- panel-datasource-rule: every panel and target uses the data source variable.
- target-promql-rule: every target is valid PromQL.
- target-rate-interval-rule: rate(), irate() and increase() range over `$__rate_interval`; the
  one exception is `$__range` in an instant query (a stat over the whole dashboard range).
- target-job-rule, target-instance-rule: every selector has `job=~"$job"` and
  `instance=~"$instance"`.
- target-counter-agg-rule: a counter (`_total`) is read only through rate(), irate() or
  increase().
- target-contract-rule (ours): every metric a target selects is in the contract.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from dashboards import dashboard_queries as dq

import contract

ROOT = Path(__file__).resolve().parent.parent

DATASOURCE_UIDS = ("${datasource}", "$datasource")
# Durations no dashboard writes, standing in for Grafana's range variables so that the parsed
# expression still tells which one a range was (as the linter itself does).
RATE_INTERVAL = timedelta(seconds=7777)
RANGE = timedelta(seconds=7778)
DURATIONS = {"__rate_interval": "7777s", "__range": "7778s", "__interval": "7779s"}
# Where a rule does not fit a panel, as the linter's own `.lint` exclusions: (rule, panel title)
# -> the reason. tests/test_dashboards.py fails on an exclusion that no panel needs any more.
ALERTS_PANEL = (
    "every target's alerts, so that no filter hides one; ALERTS carry the labels an alert "
    "keeps, not always job and instance"
)
EXCLUSIONS = {
    ("target-job-rule", "Firing AIO alerts"): ALERTS_PANEL,
    ("target-instance-rule", "Firing AIO alerts"): ALERTS_PANEL,
}
RATES = frozenset({"rate", "irate", "increase"})
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def contract_names(doc: Path = contract.DOC, rules: Path = ROOT / "alerts") -> frozenset[str]:
    """What a panel may select: docs/metrics.md's metrics (a histogram as its three series),
    the recording rules' outputs, and Prometheus' own ALERTS."""
    names = {"ALERTS"}
    for metric in contract.metrics(doc):
        if metric.kind == "histogram":
            names |= {metric.name + suffix for suffix in HISTOGRAM_SERIES}
        else:
            names.add(metric.name)
    for path in sorted(rules.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            names |= {rule["record"] for rule in group["rules"] if "record" in rule}
    return frozenset(names)


def parse(expr: str, board: Mapping[str, Any]) -> promql_parser.Expr:
    """The expression with Grafana's range variables and the custom variables (offsets) set;
    the query variables stay as written, inside their label matchers' strings."""
    values = {
        **DURATIONS,
        **{v["name"]: f"${v['name']}" for v in dq.variables(board) if v.get("type") == "query"},
        **dq.custom_combinations(board)[0],
    }
    return promql_parser.parse(dq.substitute(expr, values))


def _with_parents(expr: promql_parser.Expr) -> Iterator[tuple[Any, list[Any]]]:
    """Every node of the tree with its ancestors, innermost last."""
    found: list[tuple[Any, list[Any]]] = []
    stack: list[Any] = []

    def enter(node: Any) -> None:
        found.append((node, list(stack)))
        stack.append(node)

    promql_parser.walk(expr, enter, lambda _node: stack.pop() and None)
    return iter(found)


def _template_rules(board: Mapping[str, Any]) -> list[str]:
    problems = []
    datasources = [v for v in dq.variables(board) if v.get("type") == "datasource"]
    if not datasources:
        problems.append("template-datasource-rule: no data source variable")
    for var in datasources:
        if var["name"] != "datasource" or var.get("label") != "Data source":
            problems.append(f"template-datasource-rule: {var['name']!r} ({var.get('label')!r})")
        if var.get("query") != "prometheus":
            problems.append(f"template-datasource-rule: of type {var.get('query')!r}")
    by_name = {v["name"]: v for v in dq.variables(board)}
    for name in ("job", "instance"):
        problems += [f"template-{name}-rule: {p}" for p in _scrape_label_variable(name, by_name)]
    for query in dq.queries(board):
        if query.kind == "variable":
            try:
                parse(query.expr, board)
            except ValueError as err:
                problems.append(f"template-label-promql-rule: {query.where}: {err}")
    return problems


def _scrape_label_variable(name: str, variables: Mapping[str, dict[str, Any]]) -> list[str]:
    var = variables.get(name)
    if var is None:
        return [f"no {name} variable"]
    checks = {
        f"of type {var.get('type')!r}, not a query": var.get("type") == "query",
        f"data source {var.get('datasource')!r}": (var.get("datasource") or {}).get("uid")
        in DATASOURCE_UIDS,
        f"labelled {var.get('label')!r}": var.get("label") == name.capitalize(),
        "not multi-value": bool(var.get("multi")),
        f"allValue {var.get('allValue')!r}, not '.+'": var.get("allValue") == ".+",
    }
    return [problem for problem, ok in checks.items() if not ok]


def _panel_datasource(board: Mapping[str, Any]) -> list[str]:
    problems = []
    for panel in dq.panels(board):
        if panel.get("type") == "row":
            continue
        for where, ref in [
            (f"panel {panel['title']!r}", panel.get("datasource")),
            *(
                (f"panel {panel['title']!r} {t.get('refId')}", t.get("datasource"))
                for t in panel.get("targets", [])
            ),
        ]:
            if (ref or {}).get("uid") not in DATASOURCE_UIDS:
                problems.append(f"panel-datasource-rule: {where}: {ref!r}")
    return problems


def _target_rules(
    board: Mapping[str, Any], query: dq.Query, instant: bool, names: frozenset[str]
) -> list[str]:
    where = query.where
    try:
        expr = parse(query.expr, board)
    except ValueError as err:
        return [f"target-promql-rule: {where}: {err}"]
    problems: list[str] = []
    for node, parents in _with_parents(expr):
        if isinstance(node, promql_parser.MatrixSelector):
            call = parents[-1] if parents else None
            function = call.func.name if isinstance(call, promql_parser.Call) else None
            ok = node.range == RATE_INTERVAL or (node.range == RANGE and instant)
            if function in RATES and not ok:
                problems.append(
                    f"target-rate-interval-rule: {where}: {function}() over {node.range}, "
                    "not $__rate_interval"
                )
        if not isinstance(node, promql_parser.VectorSelector):
            continue
        name = dq.metric_name(node)
        matchers = {(m.name, str(m.op), m.value) for m in node.matchers.matchers}
        for label in ("job", "instance"):
            if (f"target-{label}-rule", query.title) in EXCLUSIONS:
                continue
            if (label, "MatchOp.Re", f"${label}") not in matchers:
                problems.append(f'target-{label}-rule: {where}: {node} has no {label}=~"${label}"')
        if name and name.endswith("_total"):
            call, matrix = parents[-2:] if len(parents) >= 2 else (None, None)
            if not (
                isinstance(matrix, promql_parser.MatrixSelector)
                and isinstance(call, promql_parser.Call)
                and call.func.name in RATES
            ):
                problems.append(f"target-counter-agg-rule: {where}: {name} not in a rate")
        if name not in names:
            problems.append(f"target-contract-rule: {where}: {name} is not in the contract")
    return problems


def lint(board: Mapping[str, Any], names: frozenset[str] | None = None) -> list[str]:
    """Every finding of every rule on one dashboard, one line each; empty when it is clean."""
    names = contract_names() if names is None else names
    problems = _template_rules(board) + _panel_datasource(board)
    instant = {
        (panel["id"], target.get("refId")): bool(target.get("instant"))
        for panel in dq.panels(board)
        for target in panel.get("targets", [])
    }
    for query in dq.queries(board):
        if query.kind == "panel":
            problems += _target_rules(board, query, instant[query.panel_id, query.ref_id], names)
    return problems


def main(paths: list[str]) -> int:
    names = contract_names()
    found = 0
    for path in paths:
        for problem in lint(json.loads(Path(path).read_text()), names):
            print(f"{path}: {problem}")
            found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

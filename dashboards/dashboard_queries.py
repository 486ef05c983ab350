"""Every PromQL query a Grafana dashboard JSON makes, and Grafana's variable substitution.

Shared by the dashboard tests (static and end-to-end) and the README picture script, so that
all three look at exactly the queries Grafana would run.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import promql_parser

# $name, ${name}, ${name:format}, [[name]]: Grafana's variable syntaxes.
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)(?::\w+)?\]\]|\$(\w+)")
# label_values(selector, label) and query_result(expr): the Prometheus variable query forms.
LABEL_VALUES = re.compile(r"^\s*label_values\((?P<expr>.*),\s*(?P<label>\w+)\s*\)\s*$", re.S)
QUERY_RESULT = re.compile(r"^\s*query_result\((?P<expr>.*)\)\s*$", re.S)
# Grafana's global variables that a panel query may use. Values are what a 3-hour dashboard on a
# 30 s scrape interval would get; the end-to-end test overrides them for its 1 s scrapes.
GLOBALS = {
    "__rate_interval": "2m",
    "__interval": "30s",
    "__range": "3h",
}


@dataclass(frozen=True)
class Query:
    kind: str  # panel, annotation or variable
    title: str  # of the panel or annotation, or the variable's name
    where: str  # human-readable origin, for failure messages
    expr: str  # as written in the JSON, variables not substituted
    panel_id: int | None = None
    ref_id: str | None = None
    label: str | None = None  # for label_values(): the label whose values the variable lists
    legend: str = ""


def panels(board: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, with the panels nested in collapsed rows."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def queries(board: Mapping[str, Any]) -> list[Query]:
    out = []
    for panel in panels(board):
        for target in panel.get("targets", []):
            out.append(
                Query(
                    "panel",
                    panel["title"],
                    f"panel {panel['id']} {panel['title']!r} {target.get('refId')}",
                    target.get("expr", ""),
                    panel_id=panel["id"],
                    ref_id=target.get("refId"),
                    legend=target.get("legendFormat", ""),
                )
            )
    for item in board.get("annotations", {}).get("list", []):
        if "expr" in item:
            out.append(
                Query("annotation", item["name"], f"annotation {item['name']!r}", item["expr"])
            )
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        text = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        where = f"variable {var['name']!r}"
        if match := LABEL_VALUES.match(text):
            out.append(Query("variable", var["name"], where, match["expr"], label=match["label"]))
        elif match := QUERY_RESULT.match(text):
            out.append(Query("variable", var["name"], where, match["expr"]))
        else:
            raise ValueError(f"{where}: unsupported variable query {text!r}")
    return out


def referenced(text: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in VARIABLE.finditer(text)}


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Grafana's interpolation; a reference to an unknown variable raises KeyError."""
    return VARIABLE.sub(lambda m: values[next(g for g in m.groups() if g)], text)


def variables(board: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(board.get("templating", {}).get("list", []))


def custom_combinations(board: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every combination of the custom (fixed-list) variables' options, so that a check covers
    e.g. each rate window's recording rule name, not only the default one."""
    custom = [v for v in variables(board) if v.get("type") == "custom"]
    names = [v["name"] for v in custom]
    options = [[o["value"] for o in v["options"]] for v in custom]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*options)]


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    """The vector selectors of a substituted expression; raises ValueError if it does not
    parse."""
    found: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def metric_name(selector: promql_parser.VectorSelector) -> str | None:
    if selector.name:
        return str(selector.name)
    for matcher in selector.matchers.matchers:
        if matcher.name == "__name__" and str(matcher.op) == "MatchOp.Equal":
            return str(matcher.value)
    return None


def without_threshold(expr: str) -> str | None:
    """`X > 0` -> `X`, also inside `(...) or (...)`: an annotation's event condition removed,
    leaving the series it watches. None when there is no such comparison to remove."""

    def strip(node: Any) -> str | None:
        if isinstance(node, promql_parser.ParenExpr):
            return strip(node.expr)
        if not isinstance(node, promql_parser.BinaryExpr):
            return None
        op = str(node.op)
        if op == "or":
            lhs, rhs = strip(node.lhs), strip(node.rhs)
            return f"({lhs}) or ({rhs})" if lhs and rhs else None
        if op in {">", ">=", "<", "<=", "==", "!="} and isinstance(
            node.rhs, promql_parser.NumberLiteral
        ):
            return str(node.lhs)
        return None

    return strip(promql_parser.parse(expr))

"""Which alert needs which collector, derived rather than written down: the rules' PromQL
(parsed), each recording rule resolved to the series it reads, and the metric names each
collector publishes (its `families`, collectors/registry.py).

Turning a collector off removes its series. An alert is silenced when its expression can no
longer return anything; weakened when it reads those series but still can: one `or` branch or
signal of several is lost, or an `unless` no longer holds it back. Only metric names count,
never the labels the rules join on. A name no collector publishes (pg_up, the storage class
the configuration declares, the exporter's own metrics) is served whatever collectors run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import promql_parser

Effect = Literal["silences", "weakens"]
# Functions whose answer is the opposite of their argument's presence: none of the rules uses
# one, and a rule that did would need its own case below.
INVERTING = frozenset({"absent", "absent_over_time"})


class Rules:
    """The parsed rules: recording rules by the name they record, alerts by name."""

    def __init__(self, recording: Mapping[str, str], alerts: Mapping[str, str]) -> None:
        self.recording = {name: promql_parser.parse(expr) for name, expr in recording.items()}
        self.alerts = {name: promql_parser.parse(expr) for name, expr in alerts.items()}

    def reads(self, node: Any) -> set[str]:
        """The metric names `node` reads, through the recording rules it reads."""
        names: set[str] = set()
        for selector in _selectors(node):
            names.add(selector)
            if selector in self.recording:
                names |= self.reads(self.recording[selector])
        return names

    def lives(self, node: Any, gone: frozenset[str]) -> bool:
        """Whether `node` can still return series once the names in `gone` have none."""
        if isinstance(node, promql_parser.VectorSelector):
            name = str(node.name)
            recorded = self.recording.get(name)
            return name not in gone if recorded is None else self.lives(recorded, gone)
        if isinstance(node, promql_parser.BinaryExpr):
            lhs, rhs = self.lives(node.lhs, gone), self.lives(node.rhs, gone)
            op = str(node.op)
            return (lhs or rhs) if op == "or" else lhs if op == "unless" else (lhs and rhs)
        if isinstance(node, promql_parser.Call) and node.func.name in INVERTING:
            raise ValueError(f"{node.func.name}() is not handled: {node}")
        return all(self.lives(child, gone) for child in _operands(node))

    def lost(self, families: Mapping[str, tuple[str, ...]]) -> dict[str, dict[str, Effect]]:
        """For each collector, what turning it off does to each alert that reads its series."""
        out: dict[str, dict[str, Effect]] = {}
        for collector, names in families.items():
            gone = frozenset(names)
            effects: dict[str, Effect] = {}
            for alert, node in self.alerts.items():
                if self.reads(node) & gone:
                    effects[alert] = "weakens" if self.lives(node, gone) else "silences"
            out[collector] = effects
        return out


def _operands(node: Any) -> list[Any]:
    """What a node other than a selector or binary operation returns series from; none for a
    literal (always there)."""
    if isinstance(node, promql_parser.MatrixSelector):
        return [node.vector_selector]
    if isinstance(
        node,
        promql_parser.ParenExpr
        | promql_parser.SubqueryExpr
        | promql_parser.UnaryExpr
        | promql_parser.AggregateExpr,
    ):
        return [node.expr]
    if isinstance(node, promql_parser.Call):
        return list(node.args)
    if isinstance(node, promql_parser.NumberLiteral | promql_parser.StringLiteral):
        return []
    raise ValueError(f"unexpected PromQL node {type(node).__name__}: {node}")


def _selectors(node: Any) -> list[str]:
    found: list[str] = []

    def visit(child: object) -> None:
        if isinstance(child, promql_parser.VectorSelector):
            if not child.name:
                raise ValueError(f"a selector without a metric name: {child}")
            found.append(str(child.name))

    promql_parser.walk(node, visit)
    return found

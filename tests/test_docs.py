"""The docs say what the code and the shipped files do: dashboard and panel names, error kinds,
measured costs, versions."""

from __future__ import annotations

import json
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import psycopg
import pytest
import yaml

from deploy_files import REPO
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.expose.selfmetrics import INTERNAL, KINDS, SelfMetrics
from pg_aio_exporter.poll.errors import UnsupportedServerError, error_kind

pytestmark = pytest.mark.unit

DOCS = REPO / "docs"
ITALIC = re.compile(r"(?<![*\w])\*([^*]+)\*(?![*\w])")


def dashboards() -> dict[str, set[str]]:
    """Title -> panel titles of every shipped dashboard (the generator's output, as
    tests/test_dashboards.py keeps the committed JSON equal to it)."""

    def panels(node: dict[str, Any]) -> set[str]:
        return {
            title
            for panel in node.get("panels", [])
            for title in {panel.get("title", "")} | panels(panel)
        }

    boards = [json.loads(p.read_text()) for p in sorted((REPO / "dashboards").glob("*.json"))]
    return {board["title"]: panels(board) for board in boards}


def test_runbooks_name_dashboards_and_panels_as_they_are_titled() -> None:
    """Each "**Confirm.** Dashboard *title*, panels *a*, *b*" paragraph of the runbooks names a
    shipped dashboard, then panels of that dashboard."""
    shipped = dashboards()
    paragraphs = [
        " ".join(p.split())
        for p in (DOCS / "runbooks.md").read_text().split("\n\n")
        if p.startswith("**Confirm.** Dashboard")
    ]
    assert len(paragraphs) >= 3
    for paragraph in paragraphs:
        board, *panels = ITALIC.findall(paragraph)
        assert board in shipped, f"no dashboard titled {board!r}: {sorted(shipped)}"
        for panel in panels:
            assert panel in shipped[board], f"{board!r} has no panel {panel!r}"
    mentioned = {ITALIC.findall(p)[0] for p in paragraphs}
    assert mentioned == set(shipped), "every dashboard is used by some runbook"


def test_readme_lists_the_dashboards_by_title() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Dashboards", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^- \*\*(.+?)\*\*", section, flags=re.MULTILINE)) == set(dashboards())


def test_every_error_kind_is_in_the_help_text_and_the_docs() -> None:
    errors = [
        UnsupportedServerError(),
        TimeoutError(),
        psycopg.errors.InsufficientPrivilege(),
        psycopg.errors.InvalidPassword(),
        psycopg.OperationalError("connection refused"),
        psycopg.OperationalError("timeout expired"),
        ValueError(),
    ]
    assert {error_kind(e) for e in errors} | {INTERNAL} == set(KINDS)
    body = b"".join(SelfMetrics().render()).decode()
    (help_line,) = re.findall(r"^# HELP pg_aio_exporter_poll_errors_total .*$", body, re.MULTILINE)
    (row,) = [
        line
        for line in (DOCS / "metrics.md").read_text().splitlines()
        if line.startswith("| `pg_aio_exporter_poll_errors_total")
    ]
    runbooks = (DOCS / "runbooks.md").read_text()
    for kind in KINDS:
        assert kind in help_line, kind
        assert f"`{kind}`" in row, kind
        assert f"`{kind}` —" in runbooks, f"no runbook says what to do about {kind}"


def test_readme_names_the_grafana_the_stack_runs_and_the_dashboards_need() -> None:
    compose = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())
    grafana = compose["services"]["grafana"]["image"].split(":")[1]
    schemas = {json.loads(p.read_text())["schemaVersion"] for p in REPO.glob("dashboards/*.json")}
    section = (REPO / "README.md").read_text().split("## Dashboards", 1)[1].split("\n## ", 1)[0]
    prose = " ".join(section.split())
    assert f"runs Grafana {grafana}" in prose
    assert {f"schema {s}" for s in schemas} <= {
        m.group(0) for m in re.finditer(r"schema \d+", prose)
    }


def test_per_sample_server_cost_is_quoted_as_measured() -> None:
    """metrics.md and the README quote the sample rows of performance.md's server_cost table."""
    rows = re.findall(
        r"^\| (\d+) \| sample \| ([\d.]+) \| ([\d.]+) \|",
        (DOCS / "performance.md").read_text(),
        flags=re.MULTILINE,
    )
    assert [int(s) for s, _, _ in rows] == [10, 100, 500]

    def quoted(column: int) -> str:
        cents = [Decimal(row[column]).quantize(Decimal("0.01"), ROUND_HALF_UP) for row in rows]
        return " / ".join(map(str, cents)) + " ms"

    metrics = " ".join((DOCS / "metrics.md").read_text().split())
    assert f"{quoted(2)} of backend CPU ({quoted(1)} of statement time)" in metrics
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"one sample costs the server {quoted(2)} of CPU" in readme


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_runbooks_say_what_to_do_without_superuser() -> None:
    """Every runbook section that acts with ALTER SYSTEM also says how on a managed service,
    by a link into managed.md that resolves."""
    runbooks = (DOCS / "runbooks.md").read_text()
    anchors = {
        github_anchor(h)
        for h in re.findall(r"^#+ (.+)$", (DOCS / "managed.md").read_text(), re.MULTILINE)
    }
    sections = re.split(r"^## ", runbooks, flags=re.MULTILINE)[1:]
    acting = [s for s in sections if "ALTER SYSTEM" in s]
    assert len(acting) >= 3
    for section in acting:
        assert "managed.md" in section, f"{section.splitlines()[0]}: no managed-service step"
    for anchor in re.findall(r"\(managed\.md#([^)]+)\)", runbooks):
        assert anchor in anchors, anchor


def test_the_collectors_that_can_be_turned_off_are_listed_whole() -> None:
    """Issue 47: the README listed 5 of the 9. Its --no-collector.NAME row and docs/metrics.md
    name every collector of the registry, in its order."""
    readme = next(
        line for line in (REPO / "README.md").read_text().splitlines() if "--no-collector." in line
    )
    metrics = (DOCS / "metrics.md").read_text()
    section = metrics.split("## Turning collectors off")[1].split("A collector that is off")[0]
    names = re.compile(r"`([a-z_]+)`")
    assert names.findall(readme.split("turn one view off:")[1].split("(")[0]) == registry.names()
    assert names.findall(section.split("Names:")[1]) == registry.names()


# A recorded series named with its window (`pg_aio_target:read_size_bytes:rate5m`): the form
# a user copies into a query. performance.md records measurements of rules since renamed.
RECORDED_QUERY = re.compile(r"\bpg_aio(?:_target)?:\w+:i?rate\d+[smh]\b")


def test_queries_in_the_docs_and_dashboards_name_recording_rules_that_are_shipped() -> None:
    """A query a user copies from the runbooks, docs or a dashboard reads a series the shipped
    rules record (issue 46 cut the per-row and per-wait-event rules: their queries read the raw
    counters now)."""
    shipped = {
        rule["record"]
        for path in sorted((REPO / "alerts").glob("pg_aio_*.yml"))
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    }
    readers = [
        *(p for p in sorted(DOCS.glob("*.md")) if p.name != "performance.md"),
        REPO / "README.md",
        *sorted((REPO / "dashboards").glob("*.json")),
    ]
    missing = {
        f"{path.name}: {name}"
        for path in readers
        for name in RECORDED_QUERY.findall(path.read_text())
        if name not in shipped
    }
    assert not missing, sorted(missing)

"""The promtool fixtures of tests/rules/ evaluated by vmalert on VictoriaMetrics (MetricsQL),
through `vmalert-tool unittest`: one rule file for every engine (docs/alerts.md,
"VictoriaMetrics and vmalert"). Integration, not unit: an engine of its own per fixture, a few
seconds to two minutes each (the latency fixture's day of history), run once per suite rather
than again with the lowest dependency versions."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from alerts import generate

from test_alerts_rules import FIXTURES, unsafe_fixture
from victoriametrics import binary

pytestmark = pytest.mark.integration


def vmalert_tool(fixture: Path, directory: Path) -> subprocess.CompletedProcess[str]:
    """`vmalert-tool unittest` on a promtool fixture. Its format is promtool's but for the
    name of the expression tests (MetricsQL is not PromQL): a copy in `directory` renames
    them, its rule files named by absolute path."""
    test = yaml.safe_load(fixture.read_text())
    test["rule_files"] = [str((fixture.parent / f).resolve()) for f in test["rule_files"]]
    for group in test["tests"]:
        if "promql_expr_test" in group:
            group["metricsql_expr_test"] = group.pop("promql_expr_test")
    copy = directory / fixture.name
    copy.write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run(
        # The promtool format names no rule group: vmalert's alertgroup label stays off.
        [binary("vmalert-tool"), "unittest", "-disableAlertgroupLabel", f"--files={copy}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


# The latency fixture's day of 1-minute history takes vmalert-tool minutes of CPU: it runs in
# `make test-vmalert-history`, not in `make test` (promtool 2 and 3 run it there).
@pytest.mark.parametrize(
    "fixture",
    [
        pytest.param(f, marks=pytest.mark.long_history) if f.stem == "latency" else f
        for f in FIXTURES
    ],
    ids=lambda p: p.stem,
)
def test_vmalert_tool_fixtures(fixture: Path, tmp_path: Path) -> None:
    result = vmalert_tool(fixture, tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def test_a_fixture_fails_under_vmalert_without_the_target_selector(tmp_path: Path) -> None:
    """As under promtool (tests/test_alerts_rules.py): the settings fixture holds another
    exporter's series of our names, which rules with an empty selector pick up."""
    copy = unsafe_fixture(generate, tmp_path, "settings")
    (tmp_path / "vm").mkdir()
    result = vmalert_tool(copy, tmp_path / "vm")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED" in result.stdout + result.stderr

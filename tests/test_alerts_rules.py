"""The shipped Prometheus rules: valid for promtool, exactly the generator's output for
alerts/params.yaml, every alert proven to fire and to stay quiet by a promtool fixture, and
every alert documented with a runbook."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
ALERTS_DIR = REPO / "alerts"
RULE_FILES = sorted(ALERTS_DIR.glob("*.yml"))
FIXTURES = sorted((Path(__file__).parent / "rules").glob("*.yml"))
RUNBOOKS = REPO / "docs" / "runbooks.md"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

# The names dashboards are built on (issue 5): renaming one breaks them.
INTERFACE = [
    f"{level}:{name}:rate{window}"
    for window in ("1m", "5m")
    for level in ("pg_aio", "pg_aio_target")
    for name in (
        "read_ops_per_second",
        "read_bytes_per_second",
        "read_latency_seconds",
        "read_seconds_per_byte",
        "read_size_bytes",
        "hit_ratio",
    )
] + [
    f"pg_aio:{name}:rate{window}"
    for window in ("1m", "5m")
    for name in ("io_worker_utilization", "active_sessions", "in_flight_depth")
]


def load_generator() -> ModuleType:
    # alerts/ is not a package: the generator is a standalone script users run.
    spec = importlib.util.spec_from_file_location("generate", ALERTS_DIR / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate"] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generate() -> ModuleType:
    return load_generator()


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, check=False, timeout=300
    )


def rules(kind: str, paths: list[Path] = RULE_FILES) -> list[dict[str, Any]]:
    return [
        rule
        for path in paths
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if kind in rule
    ]


def test_rule_files_are_shipped() -> None:
    assert [p.name for p in RULE_FILES] == ["pg_aio_alerts.yml", "pg_aio_recording.yml"]


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(path: Path) -> None:
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_promtool_fixtures(fixture: Path) -> None:
    result = promtool("test", "rules", fixture)
    assert result.returncode == 0, result.stdout + result.stderr


def test_committed_output_is_the_generators(generate: ModuleType) -> None:
    params = generate.load_params()
    for name, text in generate.outputs(params).items():
        assert (ALERTS_DIR / name).read_text() == text, f"alerts/{name} drifted: run make rules"
    doc = generate.DOC.read_text()
    assert generate.render_doc(doc, params) == doc, "docs/alerts.md drifted: run make rules"


def test_interface_names_exist() -> None:
    recorded = {r["record"] for r in rules("record")}
    assert set(INTERFACE) <= recorded, sorted(set(INTERFACE) - recorded)
    for name in recorded:
        assert re.fullmatch(r"pg_aio(_target)?:[a-z_]+:rate(1m|5m)", name), name


def test_every_alert_has_a_firing_and_a_quiet_fixture() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for fixture in FIXTURES:
        for group in yaml.safe_load(fixture.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                (fired if case["exp_alerts"] else quiet).add(case["alertname"])
    names = {r["alert"] for r in rules("alert")}
    assert names - fired == set(), "alerts never shown firing"
    assert names - quiet == set(), "alerts never shown quiet"


def test_every_recording_rule_is_checked_by_a_fixture() -> None:
    # Alerts read rate5m rules, so the fixtures cover the formula of each name at least once.
    exprs = " ".join(
        str(case["expr"])
        for fixture in FIXTURES
        for group in yaml.safe_load(fixture.read_text())["tests"]
        for case in group.get("promql_expr_test", [])
    )
    for name in {r["record"].rsplit(":", 1)[0] for r in rules("record")}:
        assert f"{name}:rate" in exprs, f"no promql_expr_test reads {name}"


def test_alerts_carry_severity_text_and_a_runbook_section() -> None:
    headings = set(re.findall(r"^## (PgAio\w+)$", RUNBOOKS.read_text(), re.MULTILINE))
    alerts = rules("alert")
    assert len(alerts) >= 11
    for alert in alerts:
        name = alert["alert"]
        assert name.startswith("PgAio")
        assert alert["labels"]["severity"] in ("info", "warning", "critical")
        notes = alert["annotations"]
        assert notes["summary"] and notes["description"]
        assert notes["runbook_url"].endswith(f"docs/runbooks.md#{name.lower()}")
        assert name in headings, f"docs/runbooks.md has no section for {name}"
    assert headings == {a["alert"] for a in alerts}, "runbook sections for unknown alerts"


def test_runbook_links_resolve_where_the_docs_ship_with_the_rules() -> None:
    """The default runbook_url is relative to where this tree's docs/ is served, so it names a
    file that exists, not an address that may not."""
    for alert in rules("alert"):
        link = urllib.parse.urlsplit(alert["annotations"]["runbook_url"])
        assert not link.scheme and not link.netloc, link
        assert (REPO / link.path).is_file(), link


def test_latency_regression_reads_latency_per_byte() -> None:
    # Per operation, a 17 -> 18 upgrade alone would fire it (the fixture proves the behaviour;
    # this keeps a refactor from swapping the recording rule under it).
    (regression,) = [r for r in rules("alert") if r["alert"] == "PgAioReadLatencyRegression"]
    assert "read_seconds_per_byte" in regression["expr"]
    assert "read_latency_seconds" not in regression["expr"]


def test_override_renames_windows_and_keeps_docs(generate: ModuleType, tmp_path: Path) -> None:
    override = tmp_path / "short.yaml"
    override.write_text(
        yaml.safe_dump(
            {
                "rate_windows": ["10s", "30s"],
                "alert_window": "30s",
                "alerts": {"PgAioReadLatencyRegression": {"baseline_window": "10m", "for": "10s"}},
            }
        )
    )
    doc_before = generate.DOC.read_text()
    out = tmp_path / "rules"
    result = subprocess.run(
        [sys.executable, ALERTS_DIR / "generate.py", "--params", override, "--out", out],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert generate.DOC.read_text() == doc_before
    files = sorted(out.glob("*.yml"))
    assert promtool("check", "rules", *files).returncode == 0
    recorded = {r["record"] for r in rules("record", files)}
    assert "pg_aio_target:read_seconds_per_byte:rate30s" in recorded
    assert not any(name.endswith("rate5m") for name in recorded)
    (regression,) = [r for r in rules("alert", files) if r["alert"] == "PgAioReadLatencyRegression"]
    assert "pg_aio_target:read_seconds_per_byte:rate30s[10m]" in regression["expr"]
    assert regression["for"] == "10s"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"alerts": {"PgAioReadLatencyHigh": {"max_second_per_read": 1}}}, "max_second_per_read"),
        ({"min_read_ops": 1}, "min_read_ops"),
        ({"alert_window": "2m"}, "alert_window"),
        ({"rate_windows": ["1m", "5 minutes"], "alert_window": "1m"}, "5 minutes"),
        ({"alerts": {"PgAioTargetDown": {"severity": "page"}}}, "severity"),
    ],
)
def test_bad_override_is_rejected(
    generate: ModuleType, tmp_path: Path, override: dict[str, Any], message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(override))
    with pytest.raises(generate.ParamsError, match=message):
        generate.load_params([path])


def test_make_rules_regenerates_every_file_from_the_params(tmp_path: Path) -> None:
    """A changed parameter reaches every file generated from it with one `make rules`, the
    PrometheusRule of deploy/kubernetes included."""
    copy = tmp_path / "repo"
    for part in ("Makefile", "pyproject.toml", "alerts", "docs/alerts.md", "deploy/kubernetes"):
        (copy / part).parent.mkdir(parents=True, exist_ok=True)
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, copy / part)
        else:
            shutil.copy2(source, copy / part)
    params_file = copy / "alerts" / "params.yaml"
    params = yaml.safe_load(params_file.read_text())
    params["min_read_ops_per_second"] += 1
    params_file.write_text(yaml.safe_dump(params))
    venv = Path(sys.prefix)  # the one running these tests, taken as built
    subprocess.run(
        ["make", "-C", str(copy), f"VENV={venv}", "-o", f"{venv}/.installed-stamp", "rules"],
        check=True,
        capture_output=True,
    )
    # The latency alerts and their table in the docs read min_read_ops_per_second.
    for name in (
        "alerts/pg_aio_alerts.yml",
        "docs/alerts.md",
        "deploy/kubernetes/prometheusrule.yaml",
    ):
        assert (copy / name).read_text() != (REPO / name).read_text(), f"{name} not regenerated"
    check = [sys.executable, str(copy / "deploy" / "kubernetes" / "generate_prometheusrule.py")]
    assert subprocess.run([*check, "--check"], capture_output=True, check=False).returncode == 0

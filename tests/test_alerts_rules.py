"""The shipped Prometheus rules: valid for the promtool of Prometheus 2 and 3, exactly the
generator's output for alerts/params.yaml, every alert proven to fire and to stay quiet by a
promtool fixture (on 60 s scrapes) under both, blind to other exporters' series of the same
names, and every alert documented with a runbook."""

from __future__ import annotations

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
from alerts import alerting, generate
from alerts.params import DEFAULT_PARAMS, THRESHOLDS, ParamsError, load_params
from alerts.render import DOC, NEEDS, needs_file, outputs, render_doc

from alert_rules import COMMAND
from pg_aio_exporter.vocabulary import WAL_SYNC
from prometheus import VERSIONS, binary

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
ALERTS_DIR = REPO / "alerts"
RULE_FILES = sorted(ALERTS_DIR.glob("*.yml"))
FIXTURES = sorted((Path(__file__).parent / "rules").glob("*.yml"))
RUNBOOKS = REPO / "docs" / "runbooks.md"

# The names users build their own panels on: renaming one breaks them. The rate rules are
# recorded at the alerts' 5m only; the last scrape interval's figures over 4 scrapes of the
# shipped scrape_interval 60s (4m).
INTERFACE = [
    *(
        f"pg_aio_target:{name}:rate5m"
        for name in (
            "read_ops_per_second",
            "read_bytes_per_second",
            "read_latency_seconds",
            "read_seconds_per_byte",
            "read_size_bytes",
            "hit_ratio",
            "active_sessions",
        )
    ),
    "pg_aio:io_worker_utilization:rate5m",
    "pg_aio_target:read_latency_seconds:irate4m",
]


def promtool(*args: str | Path, version: str = "2") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary(version, "promtool"), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
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


@pytest.mark.tool_only
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"prometheus{v}")
@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(path: Path, version: str) -> None:
    result = promtool("check", "rules", path, version=version)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.tool_only
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"prometheus{v}")
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_promtool_fixtures(fixture: Path, version: str) -> None:
    result = promtool("test", "rules", fixture, version=version)
    assert result.returncode == 0, result.stdout + result.stderr


def test_fixtures_fix_the_order_of_the_rule_groups() -> None:
    """promtool evaluates the groups of one time step in Go's map order, a new one each run,
    unless the fixture names one: timeweighted's db3 pended at 61m45s or not, 6 runs of 20
    (issue 48). Every fixture of more than one group evaluates them in the order of its rule
    files, the recording group first, as vmalert-tool does."""
    for fixture in FIXTURES:
        doc = yaml.safe_load(fixture.read_text())
        groups = [
            group["name"]
            for name in doc["rule_files"]
            for group in yaml.safe_load((fixture.parent / name).read_text())["groups"]
        ]
        if len(groups) > 1:
            assert doc.get("group_eval_order") == groups, fixture.name


# Two groups whose answer is the order they run in: the second alerts on a stamp the first
# records at each evaluation, so it fires only when the first ran before it at that time.
ORDER_RULES = {
    "groups": [
        {"name": "first", "rules": [{"record": "stamp", "expr": "vector(time())"}]},
        {
            "name": "second",
            "rules": [{"alert": "StampOfThisEvaluation", "expr": "stamp >= time()"}],
        },
    ]
}
# Left to its map order, promtool ran "first" first 55 times of 60 here (2.42 and 3.5,
# 2026-11-28): one that ignored group_eval_order would fail the reversed order's 3 runs about
# 1 time in 1,700.
ORDER_RUNS = 3


@pytest.mark.tool_only
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"prometheus{v}")
def test_promtool_runs_the_groups_in_the_fixtures_order(tmp_path: Path, version: str) -> None:
    """What makes the order-sensitive fixtures (timeweighted: issue 48) give one answer:
    each promtool evaluates the groups in the order a fixture names, both ways round."""
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(ORDER_RULES))
    for order, passes in ((["first", "second"], True), (["second", "first"], False)):
        fixture = tmp_path / f"{order[0]}.yml"
        test = {
            "interval": "1m",
            "input_series": [],
            "alert_rule_test": [
                {
                    "eval_time": "3m",
                    "alertname": "StampOfThisEvaluation",
                    "exp_alerts": [{"exp_labels": {}}],
                }
            ],
        }
        fixture.write_text(
            yaml.safe_dump(
                {
                    "rule_files": ["rules.yml"],
                    "evaluation_interval": "1m",
                    "group_eval_order": order,
                    "tests": [test],
                }
            )
        )
        for _ in range(ORDER_RUNS):
            result = promtool("test", "rules", fixture, version=version)
            assert (result.returncode == 0) == passes, (order, result.stdout + result.stderr)


def test_every_alert_family_has_a_60s_scrape_fixture() -> None:
    # 60 s is the longest scrape interval the rules are built for (params.yaml scrape_interval).
    for fixture in FIXTURES:
        intervals = {group["interval"] for group in yaml.safe_load(fixture.read_text())["tests"]}
        assert "1m" in intervals, f"{fixture.name}: no test group scraped every minute"


def unsafe_fixture(generate: ModuleType, directory: Path, fixture: str) -> Path:
    """A copy of a fixture whose rules are generated with an empty selector."""
    override = directory / "unsafe.yaml"
    override.write_text(yaml.safe_dump({"selector": ""}))
    # The fixtures name their rules ../../alerts/*.yml: rebuild that layout around a copy.
    generated = directory / "alerts"
    (directory / "tests" / "rules").mkdir(parents=True)
    copy = directory / "tests" / "rules" / f"{fixture}.yml"
    shutil.copy(Path(__file__).parent / "rules" / f"{fixture}.yml", copy)
    assert generate.main(["--params", str(override), "--out", str(generated)]) == 0
    return copy


@pytest.mark.parametrize("fixture", ["health", "latency_absolute", "settings"])
def test_fixtures_fail_without_the_target_selector(tmp_path: Path, fixture: str) -> None:
    """These fixtures hold another exporter's series of the same names (no `target` label):
    with an empty selector the rules pick them up and the fixture fails, so it can fail."""
    result = promtool("test", "rules", unsafe_fixture(generate, tmp_path, fixture))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED" in result.stdout + result.stderr


def test_committed_output_is_the_generators() -> None:
    params = load_params()
    for name, text in outputs(params).items():
        assert (ALERTS_DIR / name).read_text() == text, f"alerts/{name} drifted: run make rules"
    doc = DOC.read_text()
    assert render_doc(doc, params) == doc, "docs/alerts.md drifted: run make rules"
    assert NEEDS.read_text() == needs_file(params), f"{NEEDS.name} drifted: run make rules"


def test_interface_names_exist() -> None:
    recorded = {r["record"] for r in rules("record")}
    assert set(INTERFACE) <= recorded, sorted(set(INTERFACE) - recorded)
    for name in recorded:
        # Windowed (a rate over the window, or the last scrape interval's: irate), or without
        # a window: the regime (server version and io_method) and the storage class's limits.
        assert (
            re.fullmatch(r"pg_aio(_target)?:[a-z_]+:(rate5m|irate4m)", name)
            or name == "pg_aio_target:regime"
            or re.fullmatch(r"pg_aio_target:storage_class_[a-z_]+", name)
        ), name


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
    for record in {r["record"] for r in rules("record")}:
        name, _, operation = record.rpartition(":")
        # A windowed rule is covered by any of its windows; one without a window by itself.
        read = f"{name}:rate" if operation.startswith("rate") else record
        assert read in exprs, f"no promql_expr_test reads {record}"


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


def test_override_renames_windows_and_keeps_docs(tmp_path: Path) -> None:
    override = tmp_path / "short.yaml"
    override.write_text(
        yaml.safe_dump(
            {
                "scrape_interval": "2s",
                "rate_windows": ["10s", "30s"],
                "alert_window": "30s",
                "alerts": {"PgAioReadLatencyRegression": {"baseline_window": "10m", "for": "10s"}},
            }
        )
    )
    doc_before = DOC.read_text()
    out = tmp_path / "rules"
    result = subprocess.run(
        [sys.executable, *COMMAND, "--params", override, "--out", out],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert DOC.read_text() == doc_before
    files = sorted(out.glob("*.yml"))
    assert promtool("check", "rules", *files).returncode == 0
    recorded = {r["record"] for r in rules("record", files)}
    assert "pg_aio_target:read_seconds_per_byte:rate30s" in recorded
    assert not any(name.endswith("rate5m") for name in recorded)
    (regression,) = [r for r in rules("alert", files) if r["alert"] == "PgAioReadLatencyRegression"]
    assert "pg_aio_target:read_seconds_per_byte_by_regime:rate30s[10m]" in regression["expr"]
    assert regression["for"] == "10s"


@pytest.mark.parametrize(
    ("scrape_interval", "interval_window"),
    [("10s", "40s"), ("15s", "1m"), ("30s", "2m"), ("60s", "4m")],
)
def test_windows_follow_the_scrape_interval(
    tmp_path: Path, scrape_interval: str, interval_window: str
) -> None:
    """The rate rules at the alerts' 5m alone, the last interval's over 4 scrapes."""
    override = tmp_path / "scrape.yaml"
    override.write_text(yaml.safe_dump({"scrape_interval": scrape_interval}))
    params = load_params([override])
    windows = (params["rate_windows"], params["alert_window"], params["interval_window"])
    assert windows == (["5m"], "5m", interval_window)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"alerts": {"PgAioReadLatencyHigh": {"max_second_per_read": 1}}}, "max_second_per_read"),
        ({"min_read_ops": 1}, "min_read_ops"),
        ({"rate_windows": ["4m", "5m"], "alert_window": "10m"}, "alert_window"),
        ({"rate_windows": ["4m", "5 minutes"], "alert_window": "4m"}, "5 minutes"),
        ({"scrape_interval": "a minute"}, "a minute"),
        ({"alerts": {"PgAioTargetDown": {"severity": "page"}}}, "severity"),
        # Empty under Prometheus 3 at 60 s scrapes: one sample in the window.
        ({"rate_windows": ["1m", "5m"], "alert_window": "5m"}, r"rate_windows\[0\] 1m holds fewer"),
        ({"interval_window": "2m"}, "interval_window 2m holds fewer"),
        ({"alerts": {"PgAioPollsFailing": {"window": "2m"}}}, "PgAioPollsFailing.window 2m"),
        # A threshold the report's typed form cannot read (pg_aio_exporter.thresholds).
        (
            {"alerts": {"PgAioWriteLatencyRegression": {"factor": "three"}}},
            "thresholds: ValueError: .*'three'",
        ),
    ],
)
def test_bad_override_is_rejected(tmp_path: Path, override: dict[str, Any], message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(override))
    with pytest.raises(ParamsError, match=message):
        load_params([path])


def test_each_side_regresses_against_its_own_baseline(tmp_path: Path) -> None:
    """The read and write regressions are one builder; each reads its own alert's baseline
    settings, and the saturation alerts' latency signal its side's."""
    override = tmp_path / "baseline.yaml"
    override.write_text(
        yaml.safe_dump(
            {
                "alerts": {
                    "PgAioWriteLatencyRegression": {
                        "baseline_window": "2d",
                        "baseline_quantile": 0.9,
                    }
                }
            }
        )
    )
    built = alerting.alerts(load_params([override]))
    read_baseline = "quantile_over_time(0.5, pg_aio_target:read_seconds_per_byte_by_regime"
    write_baseline = "quantile_over_time(0.9, pg_aio_target:write_seconds_per_byte_by_regime"
    for name in ("PgAioReadLatencyRegression", "PgAioStorageSaturated"):
        assert f"{read_baseline}:rate5m[1d])" in built[name].expr, name
        assert "write_seconds_per_byte" not in built[name].expr, name
    for name in ("PgAioWriteLatencyRegression", "PgAioStorageSaturatedByWrites"):
        assert f"{write_baseline}:rate5m[2d])" in built[name].expr, name
        assert "read_seconds_per_byte" not in built[name].expr, name
    assert "0.9 quantile over 2d" in built["PgAioWriteLatencyRegression"].condition
    assert "median over 1d" in built["PgAioReadLatencyRegression"].condition


def test_make_rules_regenerates_every_file_from_the_params(tmp_path: Path) -> None:
    """A changed parameter reaches every file generated from it with one `make rules`, the
    PrometheusRule of deploy/kubernetes included."""
    copy = tmp_path / "repo"
    parts = ("Makefile", "pyproject.toml", "alerts", "docs/alerts.md", "deploy/kubernetes")
    package = "exporter/pg_aio_exporter"
    for part in (*parts, f"{package}/thresholds.yaml", f"{package}/collectors/alert_needs.json"):
        (copy / part).parent.mkdir(parents=True, exist_ok=True)
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, copy / part)
        else:
            shutil.copy2(source, copy / part)
    thresholds_file = copy / "exporter" / "pg_aio_exporter" / "thresholds.yaml"
    thresholds = yaml.safe_load(thresholds_file.read_text())
    thresholds["min_read_ops_per_second"] += 1
    thresholds_file.write_text(yaml.safe_dump(thresholds))
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


def test_a_threshold_has_one_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's thresholds file and params.yaml set different keys; a key in both fails."""
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    thresholds = yaml.safe_load(THRESHOLDS.read_text())
    assert "min_read_ops_per_second" not in params
    assert "factor" not in params["alerts"]["PgAioReadLatencyRegression"]
    assert (
        load_params()["alerts"]["PgAioReadLatencyRegression"]["factor"]
        == (thresholds["alerts"]["PgAioReadLatencyRegression"]["factor"])
    )
    params["alerts"]["PgAioStorageSaturated"]["latency_factor"] = 5
    twice = tmp_path / "params.yaml"
    twice.write_text(yaml.safe_dump(params))
    monkeypatch.setattr("alerts.params.DEFAULT_PARAMS", twice)
    with pytest.raises(ParamsError, match=r"PgAioStorageSaturated\.latency_factor is set in both"):
        load_params()


def test_the_wal_sync_events_are_the_exporters() -> None:
    """The rules' WAL sync events (thresholds.yaml) are the ones the exporter counts into
    pg_aio_wal_sync_sampled_seconds_total."""
    events = load_params()["alerts"]["PgAioStorageSaturatedByWrites"]["wal_sync_events"]
    assert set(events.split("|")) == WAL_SYNC

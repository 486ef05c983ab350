"""Which alert needs which collector (alerts/needs.py), derived from the committed rule files:
the cases read off the PromQL by hand, the package's copy the exporter warns with, and the
derivation's own logic on small expressions. tests/test_switches.py holds the collectors'
declared names to what a real exporter stops serving."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from alerts.needs import Rules
from alerts.render import ALERTS_FILE, RECORDING_FILE

from harness import REPO
from pg_aio_exporter.collectors import registry

pytestmark = pytest.mark.unit


def committed(name: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load((REPO / "alerts" / name).read_text())["groups"][0][
        "rules"
    ]
    return rules


@pytest.fixture(scope="module")
def rules() -> Rules:
    return Rules(
        {r["record"]: r["expr"] for r in committed(RECORDING_FILE)},
        {r["alert"]: r["expr"] for r in committed(ALERTS_FILE)},
    )


@pytest.fixture(scope="module")
def lost(rules: Rules) -> dict[str, dict[str, str]]:
    return {name: dict(effects) for name, effects in rules.lost(registry.families()).items()}


def test_server_silences_the_regressions_and_weakens_saturation(
    lost: dict[str, dict[str, str]],
) -> None:
    """Issue 47: the regime (major version, io_method) comes from pg_server_info, which the
    regression alerts compare within; PgAioStorageSaturated's baseline branch needs it too,
    its class-limit and volume-limit branches do not."""
    assert lost["server"] == {
        "PgAioReadLatencyRegression": "silences",
        "PgAioWriteLatencyRegression": "silences",
        "PgAioStorageSaturated": "weakens",
        "PgAioStorageSaturatedByWrites": "weakens",
    }


def test_cases_read_off_the_rules(lost: dict[str, dict[str, str]]) -> None:
    # The saturation alerts start from the sessions' wait events: nothing without activity.
    assert lost["activity"]["PgAioStorageSaturated"] == "silences"
    assert lost["activity"]["PgAioStorageSaturatedByWrites"] == "silences"
    # The pool alert's queue (pg_aios) is one signal of three; the submission queue remains.
    assert lost["pg_aios"] == {"PgAioWorkerPoolSaturated": "weakens"}
    # Latency figures count only while track_io_timing (a setting) was on.
    assert lost["settings"]["PgAioReadLatencyHigh"] == "silences"
    # Write waits with a WAL sync signal and a write latency one: either collector leaves one.
    assert lost["pg_stat_io"]["PgAioStorageSaturatedByWrites"] == "weakens"
    assert lost["pg_stat_wal"]["PgAioStorageSaturatedByWrites"] == "weakens"
    # No shipped alert reads these.
    for name in ("checkpointer", "pg_stat_statements", "pg_stat_database"):
        assert lost[name] == {}, name


def test_alerts_on_the_exporter_itself_need_no_collector(lost: dict[str, dict[str, str]]) -> None:
    """pg_up, the exporter's poll stamps and errors, and Prometheus' up are served whatever
    collectors run."""
    needing = {alert for effects in lost.values() for alert in effects}
    for alert in ("PgAioTargetDown", "PgAioTargetStale", "PgAioExporterDown", "PgAioPollsFailing"):
        assert alert not in needing, alert


def test_every_name_the_rules_read_is_recorded_or_known(rules: Rules) -> None:
    """A name the derivation does not know would count as always there: every one is recorded
    by a rule, declared by a collector or one of the exporter's own (tests/test_switches.py
    sees those served with every collector off)."""
    declared = set().union(*registry.families().values())
    read = set().union(*(rules.reads(node) for node in rules.alerts.values()))
    own = {name for name in read - declared - set(rules.recording)}
    assert own == {
        "up",
        "pg_up",
        "pg_aio_storage_class_info",
        "pg_aio_storage_volume_max_operations_per_second",
        "pg_aio_storage_volume_max_bytes_per_second",
        "pg_aio_sampler_samples_total",
        "pg_aio_exporter_last_poll_success_timestamp_seconds",
        "pg_aio_exporter_poll_errors_total",
        "pg_aio_exporter_sample_overruns_total",
    }


def test_the_exporters_copy_is_the_committed_rules(lost: dict[str, dict[str, str]]) -> None:
    """What the exporter warns with (collectors/alert_needs.json, written by make rules from
    the rules it renders) is the derivation over the rule files as committed."""
    assert json.loads(registry.NEEDS.read_text())["collectors"] == lost


def test_alerts_lost_groups_by_effect() -> None:
    lost = registry.alerts_lost(["server", "checkpointer"])
    assert set(lost) == {"server"}
    assert "PgAioReadLatencyRegression" in lost["server"]["silences"]
    assert "PgAioStorageSaturated" in lost["server"]["weakens"]


@pytest.mark.parametrize(
    ("expr", "gone", "lives"),
    [
        ("a or b", {"a"}, True),
        ("a or b", {"a", "b"}, False),
        ("a and b", {"b"}, False),
        ("a unless b", {"b"}, True),
        ("a unless b", {"a"}, False),
        ("rate(a[5m]) / (rate(b[5m]) > 0)", {"b"}, False),
        ("label_replace(a, 'x', 'y', 'z', '.*') * 0 + 1", {"c"}, True),
        ("max_over_time(rec[5m]) > 1", {"b"}, True),  # rec: a or b
        ("max_over_time(rec[5m]) > 1", {"a", "b"}, False),
        ("sum without (x) (rec) or vector(0)", {"a", "b"}, True),
    ],
)
def test_lives(expr: str, gone: set[str], lives: bool) -> None:
    rules = Rules({"rec": "a or b"}, {"it": expr})
    assert rules.lives(rules.alerts["it"], frozenset(gone)) is lives
    assert rules.reads(rules.alerts["it"]) <= {"a", "b", "c", "rec"}


def test_an_inverting_function_is_refused() -> None:
    rules = Rules({}, {"it": "absent(a)"})
    with pytest.raises(ValueError, match="absent"):
        rules.lives(rules.alerts["it"], frozenset({"a"}))

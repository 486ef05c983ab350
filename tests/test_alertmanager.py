"""deploy/alertmanager/alertmanager.yml in a real Alertmanager (Debian's): a target that is down
silences its own AIO alerts and never another server's, even when both are named `default`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy_files import DEPLOY, run
from harness import wait_for
from prometheus import Alertmanager

CONFIG = DEPLOY / "alertmanager" / "alertmanager.yml"
AMTOOL = "/usr/bin/amtool"

# One server down: the sidecar exporter of pod-a in cluster "us", whose target is "default".
DOWN = {
    "alertname": "PgAioTargetDown",
    "severity": "critical",
    "cluster": "us",
    "job": "pg_aio",
    "instance": "pod-a:9188",
    "target": "default",
}
SAME_SERVER = {**DOWN, "alertname": "PgAioReadLatencyHigh", "severity": "warning"}
# alert name -> (labels, inhibited by DOWN?)
CASES = {
    "same server, warning": (SAME_SERVER, True),
    "same server, info": ({**DOWN, "alertname": "PgAioSettingChanged", "severity": "info"}, True),
    "the down alert itself": (DOWN, False),
    "another exporter's `default`": ({**SAME_SERVER, "instance": "pod-b:9188"}, False),
    "another target of the exporter": ({**SAME_SERVER, "target": "replica"}, False),
    "the same names in another cluster": ({**SAME_SERVER, "cluster": "eu"}, False),
    "another server down too": ({**DOWN, "instance": "pod-c:9188"}, False),
    "the exporter itself": (
        {k: v for k, v in SAME_SERVER.items() if k != "target"}
        | {"alertname": "PgAioExporterDown"},
        False,
    ),
}


def test_amtool_accepts_the_config_and_rejects_a_broken_one(tmp_path: Path) -> None:
    result = run(AMTOOL, "check-config", CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "alertmanager.yml"
    broken.write_text(CONFIG.read_text().replace("receiver: ui-only", "receiver: nobody", 1))
    assert run(AMTOOL, "check-config", broken).returncode != 0


def inhibited_cases(config: dict[str, Any]) -> dict[str, bool]:
    """Post every case to an Alertmanager running `config`; which ones does it inhibit?"""
    now = datetime.now(UTC)
    alertmanager = Alertmanager(config)
    try:
        alertmanager.post(
            [
                {
                    "labels": labels,
                    "startsAt": now.isoformat(),
                    "endsAt": (now + timedelta(hours=1)).isoformat(),
                }
                for labels, _ in CASES.values()
            ]
        )

        def settled() -> list[dict[str, Any]] | None:
            # The inhibitor learns of the source alert asynchronously: wait until it has.
            alerts = alertmanager.alerts()
            same = next(a for a in alerts if a["labels"] == SAME_SERVER)
            return alerts if len(alerts) == len(CASES) and same["status"]["inhibitedBy"] else None

        alerts = wait_for(settled, 15, "the inhibition of the down server's own warning")
    finally:
        alertmanager.stop()
    by_labels = {frozenset(a["labels"].items()): bool(a["status"]["inhibitedBy"]) for a in alerts}
    return {case: by_labels[frozenset(labels.items())] for case, (labels, _) in CASES.items()}


@pytest.fixture(scope="module")
def shipped() -> dict[str, bool]:
    return inhibited_cases(yaml.safe_load(CONFIG.read_text()))


@pytest.mark.parametrize("case", CASES)
def test_shipped_inhibit_rule_stays_on_the_down_server(shipped: dict[str, bool], case: str) -> None:
    assert shipped[case] == CASES[case][1]


def test_the_old_rule_would_have_crossed_servers() -> None:
    """`equal: [target]` (the rule before) silences other servers named alike: the cases above
    tell the two rules apart."""
    config = yaml.safe_load(CONFIG.read_text())
    config["inhibit_rules"][0]["equal"] = ["target"]
    old = inhibited_cases(config)
    assert old["another exporter's `default`"] and old["the same names in another cluster"]

"""One list of AIO settings (collectors/settings.py AIO_SETTINGS): a setting added there is
read by the collector, shown by the report, annotated by the dashboards and alerted on by the
rules, with no other edit."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from alerts.alerting import setting_changed
from alerts.params import load_params

from pg_aio_exporter.collectors import settings
from pg_aio_exporter.collectors.server import ServerVersion
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.report import runner, text
from pg_aio_exporter.report.findings import combining
from test_dashboards import ROOT

pytestmark = pytest.mark.unit
NEW = settings.Setting("io_future_depth", "count", combining=True)


@pytest.fixture
def one_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "AIO_SETTINGS", (*settings.AIO_SETTINGS, NEW))


def row(name: str, setting: str) -> settings.SettingRow:
    return settings.SettingRow(
        name=name,
        setting=setting,
        unit=None,
        vartype="integer",
        enumvals=None,
        pending_restart=False,
    )


@pytest.mark.usefixtures("one_more")
def test_the_collector_reads_it() -> None:
    collector = settings.SettingsCollector()
    assert "'io_future_depth'" in (collector.query(180000) or "")
    out = MetricSet({"target": "t"})
    collector.collect([row("io_future_depth", "7")], out)
    assert [f.name for f in out.families()] == ["pg_settings_io_future_depth"]


@pytest.mark.usefixtures("one_more")
def test_the_report_shows_it() -> None:
    facts = runner.server_facts(
        ServerVersion("18.6", 180006), settings.settings_facts([row("io_future_depth", "7")])
    )
    assert facts.settings == {"io_future_depth": 7.0}
    assert "io_future_depth 7" in "\n".join(text._server(facts))
    assert combining.combining_settings(facts.settings)["io_future_depth"] == 7.0


@pytest.mark.usefixtures("one_more")
def test_the_dashboards_annotate_its_changes() -> None:
    spec = importlib.util.spec_from_file_location(
        "dashboards_fresh", ROOT / "dashboards" / "generate.py"
    )
    assert spec and spec.loader
    fresh = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fresh
    try:
        spec.loader.exec_module(fresh)
    finally:
        del sys.modules[spec.name]
    (changes,) = [a for a in fresh.ANNOTATIONS if a.name == "AIO setting change"]
    assert "pg_settings_io_future_depth" in changes.expr


@pytest.mark.usefixtures("one_more")
def test_the_rules_alert_on_its_changes() -> None:
    params = load_params()
    alert = setting_changed(params, params["alerts"]["PgAioSettingChanged"])
    assert "pg_settings_io_future_depth" in alert.expr
    assert '"setting", "io_future_depth"' in alert.expr

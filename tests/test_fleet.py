"""Fleets: every exporter started with --dsn names its target after the server it reaches
(never `default`, never with the password), or as --target-name says, with --label's labels;
a name that is only a local address (every sidecar's default) is one warning line at start."""

from __future__ import annotations

import json

import pytest
import yaml

from harness import REPO, Exporter, labels
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import local_only, target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from test_cli import assert_config_error, run

SECRET = "Fleet-Sekr1t-4242"
FAST = ("--poll-interval", "1s", "--sample-interval", "200ms")


def test_two_dsn_exporters_get_different_stable_names(pg18: LocalServer) -> None:
    """Two sidecar-like exporters, one per database, and a third with the first one's DSN written
    as a URI with a password: each target is named host:port/dbname, the same for the same
    server however the DSN is spelled."""
    kv = pg18.dsn()
    uri = f"postgresql://postgres:{SECRET}@127.0.0.1:{pg18.port}/postgres?sslmode=disable"
    exporters = [
        Exporter("--dsn", kv, *FAST, target_name=None),
        Exporter("--dsn", pg18.dsn(dbname="template1"), *FAST, target_name=None),
        Exporter("--dsn", uri, *FAST, target_name=None),
    ]
    try:
        names = [set(exp.wait_poll()["pg_up"]) for exp in exporters]
        logs = [exp.logs() for exp in exporters]
    finally:
        for exp in exporters:
            exp.stop()
    first = labels(target=f"127.0.0.1:{pg18.port}/postgres")
    assert names == [{first}, {labels(target=f"127.0.0.1:{pg18.port}/template1")}, {first}]
    # Each reaches its server as 127.0.0.1, as a sidecar does: one warning line each.
    for log, db in zip(logs, ("postgres", "template1", "postgres"), strict=True):
        warned = [line for line in log.splitlines() if "level=warn" in line]
        assert len(warned) == 1, warned
        assert "only a local address" in warned[0], warned
        assert f"target=127.0.0.1:{pg18.port}/{db}" in warned[0], warned


def test_target_name_and_labels_from_flags(pg18: LocalServer) -> None:
    exp = Exporter(
        "--dsn",
        pg18.dsn(),
        "--label",
        "cluster=payments",
        "--label",
        "role=primary",
        *FAST,
        target_name="orders-1",
    )
    try:
        samples = exp.wait_poll()
        log = exp.logs()
    finally:
        exp.stop()
    assert "level=warn" not in log, "a name of its own: no warning"
    assert set(samples["pg_up"]) == {labels(target="orders-1", cluster="payments", role="primary")}
    sampled = samples["pg_aio_sampler_samples_total"]
    assert set(sampled) == {labels(target="orders-1", cluster="payments", role="primary")}


@pytest.mark.unit
def test_the_name_follows_libpq_defaults_and_never_holds_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGHOST", "db.from.env")
    monkeypatch.setenv("PGPORT", "6543")
    monkeypatch.delenv("PGDATABASE", raising=False)
    target = target_from_dsn(f"user=monitor password={SECRET}")
    # libpq's own defaults: host and port from the environment, dbname = the user name.
    assert target.name == "db.from.env:6543/monitor"
    named = target_from_dsn(f"postgresql://u:{SECRET}@h1:5433/app", labels={"cluster": "c"})
    assert named.name == "h1:5433/app" and named.labels == {"cluster": "c"}
    with pytest.raises(ConfigError, match="reserved"):
        target_from_dsn("host=h", labels={"target": "x"})


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "local"),
    [
        ("localhost:5432/postgres", True),  # every sidecar's default
        ("127.0.0.1:5432/postgres", True),
        ("127.0.0.53", True),
        ("::1:5432/app", True),
        ("[::1]:5432/app", True),
        ("/var/run/postgresql:5432/postgres", True),  # a Unix socket, the same in every pod
        ("localhost", True),
        ("db-0.db.prod.svc:5432/postgres", False),
        ("10.0.0.7:5432/postgres", False),
        ("localhost-replica:5432/postgres", False),
        ("orders-1", False),
        ("pg-0", False),
    ],
)
def test_a_name_that_is_only_a_local_address_is_told_apart(name: str, local: bool) -> None:
    assert local_only(name) is local


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--dsn", "host=h", "--label", "cluster"], "use NAME=VALUE"),
        (["--dsn", "host=h", "--label", "a=1", "--label", "a=2"], "a given twice"),
        (["--dsn", "host=h", "--label", "target=x"], "reserved"),
        (["--dsn", "host=h", "--label", "9x=1"], "invalid label name"),
        (["--dsn", "host=h", "--target-name", " "], "--target-name"),
        (["--config", "targets.yaml", "--target-name", "x"], "a --config file names"),
        (["--config", "targets.yaml", "--label", "a=1"], "a --config file names"),
    ],
)
def test_bad_fleet_flags_are_one_line_errors(args: list[str], needle: str) -> None:
    assert_config_error(run(*args), needle)


@pytest.mark.unit
def test_alert_links_name_a_shipped_dashboard_and_its_variables() -> None:
    """alerts/params.yaml's dashboard link preselects variables that the dashboard has."""
    params = yaml.safe_load((REPO / "alerts" / "params.yaml").read_text())
    boards = {
        board["uid"]: board["templating"]["list"]
        for board in (json.loads(p.read_text()) for p in (REPO / "dashboards").glob("*.json"))
    }
    assert params["grafana_url"].startswith("http")
    variables = boards[params["dashboard_uid"]]
    # The variables that choose servers (listed from pg_up) are exactly those the link sets.
    server = {v["name"] for v in variables if "label_values(pg_up" in json.dumps(v.get("query"))}
    assert server >= {"job", "instance", "target"}
    assert set(params["dashboard_variables"]) == server
    for path in (REPO / "alerts").glob("*.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    url = rule["annotations"]["dashboard_url"]
                    assert url.startswith(f"{params['grafana_url']}/d/{params['dashboard_uid']}?")

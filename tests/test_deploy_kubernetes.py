"""deploy/kubernetes: every manifest well-formed and hardened, the pieces wired to each other,
and the PrometheusRule in step with alerts/*.yml."""

from __future__ import annotations

import importlib.util
import re
import sys
import urllib.parse
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

import pytest
import yaml

from deploy_files import (
    DEPLOY,
    REPO,
    final_stage,
    health_port,
    listen_port,
    load_yaml_docs,
    one,
    rules_exporter_job,
    run,
)
from pg_aio_exporter import __version__

pytestmark = pytest.mark.unit

K8S = DEPLOY / "kubernetes"
GENERATOR = K8S / "generate_prometheusrule.py"
API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Service": "v1",
    "Secret": "v1",
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "PodMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
}
WORKLOADS = ("Deployment", "StatefulSet")


def manifests() -> list[tuple[str, dict[str, Any]]]:
    found = [
        (f"{path.name}#{i}", doc)
        for path in sorted(K8S.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for i, doc in enumerate(load_yaml_docs(path))
    ]
    assert len(found) >= 7
    return found


def selects(selector: dict[str, Any], metadata: dict[str, Any]) -> bool:
    return bool(selector["matchLabels"].items() <= metadata["labels"].items())


def of_kind(*kinds: str) -> list[tuple[str, dict[str, Any]]]:
    return [(name, doc) for name, doc in manifests() if doc["kind"] in kinds]


def exporter_containers() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(manifest, pod spec, container) of every pg-aio-exporter container."""
    found = [
        (name, doc["spec"]["template"]["spec"], c)
        for name, doc in of_kind(*WORKLOADS)
        for c in doc["spec"]["template"]["spec"]["containers"]
        if c["image"].split(":")[0].endswith("pg-aio-exporter")
    ]
    assert len(found) == 2  # standalone Deployment and the sidecar example
    return found


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_prometheusrule", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name_doc", manifests(), ids=lambda nd: nd[0])
def test_manifest_has_api_version_kind_and_metadata(name_doc: tuple[str, Any]) -> None:
    _, doc = name_doc
    assert API_VERSIONS[doc["kind"]] == doc["apiVersion"]
    metadata = doc["metadata"]
    assert (
        metadata["name"] and "namespace" not in metadata
    )  # the user's namespace, via -n/kustomize
    assert metadata["labels"]["app.kubernetes.io/name"]


def test_kustomization_lists_every_manifest_but_the_examples() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == {p for p in present if "example" not in p}
    assert "secret-example.yaml" not in listed, "a Secret with a placeholder must not be applied"


@pytest.mark.parametrize("item", exporter_containers(), ids=lambda i: i[0])
def test_exporter_container_is_hardened_probed_and_bounded(item: tuple[str, Any, Any]) -> None:
    _, pod, container = item
    context = container.get("securityContext", {})
    pod_context = pod.get("securityContext", {})
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]
    assert True in (context.get("runAsNonRoot"), pod_context.get("runAsNonRoot"))
    uid = context.get("runAsUser", pod_context.get("runAsUser"))
    assert uid == int(one(final_stage(), "USER").args.split(":")[0])

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    cmd = one(final_stage(), "CMD").exec_form()
    assert ports["metrics"] == listen_port(cmd)
    # Probes ask the image's plain health listener, which a TLS web config does not touch.
    assert ports["health"] == health_port(cmd)
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}, probe
    # The image's CMD (listen address, log format) stays in force: args may only add naming.
    assert "command" not in container
    args = container.get("args", cmd)
    assert args[: len(cmd)] == cmd, args
    assert all(a.startswith(("--target-name=", "--label=")) for a in args[len(cmd) :]), args

    resources = container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]

    env = {e["name"]: e for e in container["env"]}
    dsn = env.pop("DATA_SOURCE_NAME")
    assert "value" not in dsn and dsn["valueFrom"]["secretKeyRef"]["key"] == "DATA_SOURCE_NAME"
    # Anything else comes from the pod (the downward API), and is what the args refer to.
    assert all(set(e["valueFrom"]) == {"fieldRef"} for e in env.values()), env
    referenced = {m for a in args for m in re.findall(r"\$\((\w+)\)", a)}
    assert referenced == set(env), (referenced, set(env))


def test_image_tag_is_the_package_version() -> None:
    for name, _, container in exporter_containers():
        assert container["image"].endswith(f":{__version__}"), name


def test_standalone_deployment_drops_what_it_does_not_need() -> None:
    ((_, deployment),) = of_kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert deployment["spec"]["replicas"] == 1


def test_service_and_servicemonitor_select_the_deployment() -> None:
    ((_, deployment),) = of_kind("Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    ((_, service),) = [(n, d) for n, d in of_kind("Service") if n.startswith("service.yaml")]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    ((_, monitor),) = of_kind("ServiceMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"


def test_scrapes_are_labelled_with_the_job_the_rules_expect() -> None:
    job = rules_exporter_job()
    endpoints = [
        *of_kind("ServiceMonitor")[0][1]["spec"]["endpoints"],
        *of_kind("PodMonitor")[0][1]["spec"]["podMetricsEndpoints"],
    ]
    for endpoint in endpoints:
        assert {"targetLabel": "job", "replacement": job} in endpoint["relabelings"]


def test_sidecar_reaches_its_server_on_localhost_and_is_found_by_a_podmonitor() -> None:
    ((_, statefulset),) = of_kind("StatefulSet")
    template = statefulset["spec"]["template"]
    names = {c["name"] for c in template["spec"]["containers"]}
    assert {"postgres", "pg-aio-exporter"} <= names
    postgres = next(c for c in template["spec"]["containers"] if c["name"] == "postgres")
    assert "track_io_timing=on" in postgres["args"]
    assert {"name": "data", "mountPath": "/var/lib/postgresql"} in postgres["volumeMounts"]
    ((_, monitor),) = of_kind("PodMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    )


def test_the_ca_bundle_the_example_dsn_verifies_with_is_mounted() -> None:
    """The Secret example's DSN verifies the server against a file that deployment.yaml mounts,
    read-only, from a ConfigMap key of the same name (docs/managed.md)."""
    ((_, secret),) = of_kind("Secret")
    query = urllib.parse.parse_qs(
        urllib.parse.urlsplit(secret["stringData"]["DATA_SOURCE_NAME"]).query
    )
    assert query["sslmode"] == ["verify-full"]
    (root_cert,) = (PurePosixPath(p) for p in query["sslrootcert"])
    ((_, deployment),) = of_kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (mount,) = [
        m for m in container["volumeMounts"] if root_cert.parent == PurePosixPath(m["mountPath"])
    ]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    config_map = volume["configMap"]
    assert config_map["optional"] is True, "the pod must start without a CA bundle too"
    assert {"key": root_cert.name, "path": root_cert.name} in config_map["items"]
    docs = (REPO / "docs" / "managed.md").read_text()
    assert f"create configmap {config_map['name']} --from-file={root_cert.name}=" in docs


def test_no_password_is_committed() -> None:
    ((_, secret),) = of_kind("Secret")
    dsn = secret["stringData"]["DATA_SOURCE_NAME"]
    assert ":CHANGE-ME@" in dsn and "data" not in secret


# --- the generated PrometheusRule -----------------------------------------------------------


def test_committed_prometheusrule_matches_the_generator(generator: ModuleType) -> None:
    committed = (K8S / "prometheusrule.yaml").read_text()
    assert committed == generator.render(REPO / "alerts"), (
        "deploy/kubernetes/prometheusrule.yaml is stale: run "
        "python deploy/kubernetes/generate_prometheusrule.py"
    )


def test_prometheusrule_carries_every_shipped_group_unchanged() -> None:
    (rule,) = load_yaml_docs(K8S / "prometheusrule.yaml")
    expected = []
    for path in sorted((REPO / "alerts").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict) and "groups" in doc:
            expected += doc["groups"]
    assert rule["spec"]["groups"] == expected


def test_prometheusrule_spec_passes_promtool(tmp_path: Path) -> None:
    (rule,) = load_yaml_docs(K8S / "prometheusrule.yaml")
    if not rule["spec"]["groups"]:
        pytest.skip("alerts/ holds no rule files yet")
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump(rule["spec"]))
    result = run("/usr/bin/promtool", "check", "rules", rules_file)
    assert result.returncode == 0, result.stdout + result.stderr


def test_generator_wraps_rule_files_and_skips_others(generator: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "b.yml").write_text(
        "groups:\n- name: b\n  rules:\n  - record: x\n    expr: |\n      1\n      + 1\n"
    )
    (tmp_path / "a.yml").write_text("groups: [{name: a, rules: [{record: y, expr: '2'}]}]\n")
    (tmp_path / "params.yml").write_text("selector: ''\n")
    (tmp_path / "c.yaml").write_text("groups: [{name: c, rules: []}]\n")  # not *.yml
    text = generator.render(tmp_path)
    doc = yaml.safe_load(text)
    assert [g["name"] for g in doc["spec"]["groups"]] == ["a", "b"]
    assert doc["spec"]["groups"][1]["rules"][0]["expr"] == "1\n+ 1\n"
    assert "expr: |" in text  # multi-line PromQL stays a readable block


def test_generator_check_mode_and_duplicate_groups(generator: ModuleType, tmp_path: Path) -> None:
    alerts = tmp_path / "alerts"
    alerts.mkdir()
    (alerts / "a.yml").write_text("groups: [{name: g, rules: []}]\n")
    output = tmp_path / "rule.yaml"
    argv = ["--alerts", str(alerts), "--output", str(output)]
    assert generator.main([*argv, "--check"]) == 1
    assert generator.main(argv) == 0
    assert generator.main([*argv, "--check"]) == 0
    (alerts / "b.yml").write_text("groups: [{name: g, rules: []}]\n")
    assert generator.main(argv) == 2


def test_generator_runs_as_a_script() -> None:
    result = run(sys.executable, GENERATOR, "--check")
    assert result.returncode == 0, result.stderr

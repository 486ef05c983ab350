"""A real Prometheus as a plain process on 127.0.0.1, for end-to-end tests: Debian's package
(2.x) or 3.5, built once by scripts/prometheus3.sh and cached outside the clone."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness import terminate, wait_for
from pg_aio_exporter.demo.server import free_port

BUILD_3 = Path(__file__).resolve().parents[1] / "scripts" / "prometheus3.sh"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
# The major versions every rule and dashboard test runs on: what Debian ships, what users install.
VERSIONS = ("2", "3")


@functools.cache
def binary(version: str, tool: str = "prometheus") -> str:
    """`prometheus` or `promtool` of a major version of VERSIONS."""
    if version == "2":
        return shutil.which(tool) or f"/usr/bin/{tool}"
    if version != "3":
        raise ValueError(f"no Prometheus {version} here: one of {VERSIONS}")
    # Instant when cached; otherwise a build of a few minutes, which `make test` runs first.
    built = subprocess.run([BUILD_3], capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise AssertionError(built.stderr.strip())
    return str(Path(built.stdout.strip()) / tool)


def api(base: str, path: str, **params: str) -> Any:
    """The data of a Prometheus HTTP API answer (VictoriaMetrics and vmalert answer alike)."""
    url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]


class _Daemon:
    """A Prometheus-stack server in a temp dir on a free 127.0.0.1 port, ready on return."""

    name = ""
    storage_flag = ""
    ready_path = "/-/ready"

    def __init__(self, config: dict[str, Any] | None, argv: Sequence[str]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = self.dir / f"{self.name}.yml"
        if config is not None:
            self.config.write_text(yaml.safe_dump(config))
        self._log_path = self.dir / f"{self.name}.log"
        self._log = self._log_path.open("w")
        self.proc = subprocess.Popen(
            [*argv, *self.flags()], stdout=self._log, stderr=subprocess.STDOUT
        )
        wait_for(self._ready, 30, f"{self.name} to be ready")

    def flags(self) -> list[str]:
        """The configuration file, storage and listen address, as Prometheus spells them."""
        return [
            f"--config.file={self.config}",
            f"{self.storage_flag}={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(self._log_path.read_text()[-3000:])
        try:
            with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as resp:  # noqa: S310
                return bool(resp.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        terminate(self.proc, grace=15)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Prometheus(_Daemon):
    """Scrapes `targets` (host:port) as job `pg_aio`, and each of `jobs` (job name: targets),
    every `interval`, and evaluates `rule_files` as often; `version` is one of VERSIONS."""

    name = "prometheus"
    storage_flag = "--storage.tsdb.path"

    def __init__(
        self,
        targets: Sequence[str],
        rule_files: Sequence[Path] = (),
        interval: str = "1s",
        version: str = "2",
        jobs: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.version = version
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(job_targets)}]}
                for job, job_targets in {"pg_aio": targets, **(jobs or {})}.items()
            ],
        }
        super().__init__(config, [binary(version)])

    def api(self, path: str, **params: str) -> Any:
        return api(self.url, path, **params)

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def query_range(self, expr: str, seconds: float, step: str = "1s") -> list[dict[str, Any]]:
        end = time.time()
        result: list[dict[str, Any]] = self.api(
            "query_range", query=expr, start=str(end - seconds), end=str(end), step=step
        )["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts


class Alertmanager(_Daemon):
    """Debian's Alertmanager with `config` (a parsed alertmanager.yml), clustering off."""

    name = "alertmanager"
    storage_flag = "--storage.path"

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config, [ALERTMANAGER, "--cluster.listen-address="])

    def post(self, alerts: Sequence[dict[str, Any]]) -> None:
        request = urllib.request.Request(  # noqa: S310 - the local test server
            self.url + "/api/v2/alerts",
            data=json.dumps(list(alerts)).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310
            assert resp.status == 200

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.url + "/api/v2/alerts", timeout=10) as resp:  # noqa: S310
            alerts: list[dict[str, Any]] = json.loads(resp.read())
        return alerts

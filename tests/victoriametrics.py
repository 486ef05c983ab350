"""VictoriaMetrics single-node scraping the exporter and vmalert evaluating the shipped rules
against it: a third engine beside Prometheus 2 and 3, answering the same API (query,
query_range, label values, alerts), so that the end-to-end stacks run it side by side.
Built once per machine by scripts/victoriametrics.sh and cached outside the clone."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus import VERSIONS, Prometheus, _Daemon, api

BUILD = Path(__file__).resolve().parents[1] / "scripts" / "victoriametrics.sh"
ENGINE = "vm"


@functools.cache
def binary(tool: str) -> str:
    """`victoria-metrics`, `vmalert` or `vmalert-tool`."""
    # Instant when cached; otherwise a build of a few minutes, which `make test` runs first.
    built = subprocess.run([BUILD], capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise AssertionError(built.stderr.strip())
    return str(Path(built.stdout.strip()) / tool)


# What a test needs of a time series database that the defaults, made for production, delay:
# a sample is visible to queries at once (not 30 s later) and no answer is served from cache.
# Recent samples are queried from memory: saved to disk once a minute rather than every 5 s,
# they do not compete with the fsyncs of the PostgreSQL under test on the same disk.
FRESH = (
    "-search.latencyOffset=0s",
    "-search.disableCache",
    "-inmemoryDataFlushInterval=1m",
    "-loggerLevel=WARN",
)


class _VmDaemon(_Daemon):
    """A VictoriaMetrics process: its flags are spelled -name=value."""

    ready_path = "/health"

    def flags(self) -> list[str]:
        return [f"-httpListenAddr=127.0.0.1:{self.port}", *self.own_flags()]

    def own_flags(self) -> list[str]:
        raise NotImplementedError


class _Storage(_VmDaemon):
    name = "victoria-metrics"

    def own_flags(self) -> list[str]:
        return [
            f"-promscrape.config={self.config}",
            f"-storageDataPath={self.dir / 'data'}",
            "-retentionPeriod=1d",
            *FRESH,
        ]


class _Rules(_VmDaemon):
    name = "vmalert"

    def __init__(self, storage: str, rule_files: Sequence[Path], interval: str) -> None:
        self._storage, self._rule_files, self._interval = storage, rule_files, interval
        super().__init__(None, [binary("vmalert")])

    def own_flags(self) -> list[str]:
        return [
            *(f"-rule={path}" for path in self._rule_files),
            f"-datasource.url={self._storage}",
            f"-remoteWrite.url={self._storage}",
            f"-remoteRead.url={self._storage}",
            f"-evaluationInterval={self._interval}",
            # Evaluate at the time of evaluation, as Prometheus does (the default looks 30 s
            # back, for storage that shows samples late), and write results out at once.
            "-rule.evalDelay=0s",
            "-remoteWrite.flushInterval=200ms",
            "-notifier.blackhole",
            "-loggerLevel=WARN",
        ]


class VictoriaMetrics(Prometheus):
    """Prometheus' interface (tests/prometheus.py) on VictoriaMetrics: the storage scrapes
    `targets` as job `pg_aio` and each of `jobs` every `interval`; vmalert evaluates
    `rule_files` as often, writes recorded series and ALERTS back, and answers alerts()."""

    def __init__(
        self,
        targets: Sequence[str],
        rule_files: Sequence[Path] = (),
        interval: str = "1s",
        version: str = ENGINE,
        jobs: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.version = version
        config = {
            "global": {"scrape_interval": interval},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(job_targets)}]}
                for job, job_targets in {"pg_aio": targets, **(jobs or {})}.items()
            ],
        }
        self.storage = _Storage(config, [binary("victoria-metrics")])
        self.url = self.storage.url
        try:
            self.rules = _Rules(self.storage.url, rule_files, interval)
        except BaseException:
            self.storage.stop()
            raise

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = api(self.rules.url, "alerts")["alerts"]
        return alerts

    def stop(self) -> None:
        try:
            self.rules.stop()
        finally:
            self.storage.stop()


# Every engine the end-to-end stacks run side by side: Prometheus 2 and 3, and this one.
ENGINES = (*VERSIONS, ENGINE)


def engine(
    version: str,
    targets: Sequence[str],
    rule_files: Sequence[Path] = (),
    interval: str = "1s",
    jobs: Mapping[str, Sequence[str]] | None = None,
) -> Prometheus:
    """A Prometheus of a major version of VERSIONS, or VictoriaMetrics with vmalert (ENGINE),
    scraping `targets` and evaluating `rule_files`."""
    kind = VictoriaMetrics if version == ENGINE else Prometheus
    return kind(targets, rule_files, interval=interval, version=version, jobs=jobs)


def engine_name(version: str) -> str:
    return "VictoriaMetrics" if version == ENGINE else f"Prometheus {version}"


def engine_id(version: str) -> str:
    """A test id: prometheus2, prometheus3, victoriametrics."""
    return engine_name(version).replace(" ", "").lower()

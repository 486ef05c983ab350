"""What a fleet costs the monitoring: series, ingestion, rule evaluation and memory of Prometheus
2 and 3 and VictoriaMetrics + vmalert scraping 10, 100 and 1,000 targets, beside Debian's
postgres_exporter scraped the same way.

Recording: one local PostgreSQL 18 server under `pgbench -c 4` (on a fresh `pgbench -i -s 5`),
the exporter (`--dsn`, defaults) and postgres_exporter (defaults) beside it; each /metrics is
saved twice, --record-gap seconds apart, into --recordings (kept: a re-run replays them).

Replay (tests/replay.py): one threaded HTTP server in this process answers /ours?target=NAME
and /peer?target=NAME with the second recorded exposition, every counter advancing at its rate
between the two recordings, our `target` label set to NAME; the engine's relabelling puts NAME
in `instance` as well (the multi-target pattern), which is all that tells postgres_exporter's
copies apart. The set of series is the recorded one: a real fleet's wait events and pg_stat_io
rows vary more.

Engines, one at a time, each fresh: a scrape every --scrape-interval (deploy/prometheus's 30 s),
the rule files given (alerts/ by default) evaluated every --eval-interval (60 s, what the
shipped windows are made for); vmalert as docs/deploy.md runs it (remote write to the same
VictoriaMetrics, its default 30 s evaluation delay). After --settle seconds (120), over
--measure seconds (125, two evaluations): the share of scrapes up, active series (Prometheus'
head; VictoriaMetrics' series seen this hour), samples appended per second (recorded series
included), each rule group's evaluation time (mean and maximum of the evaluations in the
window; vmalert's from its iteration summary), the engine's CPU in cores and its RSS
(VictoriaMetrics + vmalert). postgres_exporter's replay runs without rules (45 s, 65 s). The
load average closes every row: the machine is shared.

Usage: PYTHONPATH=.:tests python bench/fleet.py [--targets 10 100 1000] [--engines 2 3 vm]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import yaml
from common import Peer, cpu_seconds, load, machine, peer_dsn, rss_mb

from harness import Exporter, terminate, wait_for
from pg_aio_exporter.demo.server import LocalServer, free_port
from pgbins import bin_dir
from prometheus import binary as prometheus_binary
from replay import Replay, samples
from victoriametrics import binary as vm_binary

ROOT = Path(__file__).resolve().parents[1]
MONITOR = "pgaio_monitor"
KINDS = {"ours": "pg_aio", "peer": "postgres"}  # replayed exposition: job name


# --- Recording ------------------------------------------------------------------------------


def record(recordings: Path, gap: float, warmup: float) -> None:
    """Two scrapes of each exporter `gap` seconds apart, on a PostgreSQL 18 under pgbench."""
    server = LocalServer.create(settings={"track_io_timing": "on"})
    server.start()
    pgbench = str(bin_dir("18") / "pgbench")
    workload = None
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {MONITOR} LOGIN IN ROLE pg_monitor")
        subprocess.run([pgbench, "-i", "-q", "-s", "5", server.dsn()], check=True)
        workload = subprocess.Popen(
            [pgbench, "-n", "-c", "4", "-T", str(int(warmup + gap + 60)), server.dsn()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ours = Exporter("--dsn", server.dsn(user=MONITOR))
        peer = Peer(peer_dsn(server, MONITOR))
        try:
            time.sleep(warmup)
            recordings.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            for i in (1, 2):
                for kind, url in (("ours", ours.url + "/metrics"), ("peer", peer.url)):
                    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310
                        (recordings / f"{kind}-{i}.prom").write_bytes(resp.read())
                if i == 1:
                    time.sleep(gap)
            (recordings / "gap").write_text(f"{time.monotonic() - started:.3f}\n")
        finally:
            ours.stop()
            peer.stop()
    finally:
        if workload is not None:
            terminate(workload)
        server.destroy()


# --- Engines --------------------------------------------------------------------------------


def scrape_config(kind: str, targets: int, address: str) -> dict[str, Any]:
    """The multi-target pattern: each target a name, passed as ?target= to one address."""
    return {
        "job_name": KINDS[kind],
        "metrics_path": f"/{kind}",
        "static_configs": [{"targets": [f"t{i:04d}" for i in range(targets)]}],
        "relabel_configs": [
            {"source_labels": ["__address__"], "target_label": "__param_target"},
            {"source_labels": ["__param_target"], "target_label": "instance"},
            {"target_label": "__address__", "replacement": address},
        ],
    }


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310
        body: bytes = resp.read()
        return body


def metric(url: str, name: str, **labels: str) -> float:
    """Sum of a metric's samples in an engine's own /metrics whose labels include `labels`."""
    total = 0.0
    for key, value in samples(get(url).decode()):
        if key.split("{", 1)[0] == name and all(f'{k}="{v}"' in key for k, v in labels.items()):
            total += value
    return total


# Group name: (when Prometheus last evaluated it, or how often vmalert did; seconds; seconds
# per rule), as each engine tells it.
Groups = dict[str, tuple[Any, float, dict[str, float]]]


class Engine:
    name = ""

    def __init__(
        self, scrape: dict[str, Any], rules: Sequence[Path], scrape_s: int, eval_s: int
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fleet-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.start(scrape, rules, scrape_s, eval_s)

    def spawn(self, argv: list[str], ready: str) -> None:
        log = (self.dir / f"{len(self.procs)}.log").open("w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError((self.dir / f"{len(self.procs) - 1}.log").read_text()[-2000:])
            try:
                get(ready)
            except OSError:
                return False
            return True

        wait_for(up, 60, f"{argv[0]} to be ready")

    def start(
        self, scrape: dict[str, Any], rules: Sequence[Path], scrape_s: int, eval_s: int
    ) -> None:
        raise NotImplementedError

    def series(self) -> float:
        raise NotImplementedError

    def appended(self) -> float:
        raise NotImplementedError

    def groups(self) -> Groups:
        raise NotImplementedError

    def rss_mb(self) -> float:
        return sum(rss_mb(p.pid) for p in self.procs)

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            terminate(proc, grace=30)
        subprocess.run(["rm", "-rf", str(self.dir)], check=False)


class Prometheus(Engine):
    def __init__(self, version: str, *args: Any) -> None:
        self.version = version
        self.name = f"Prometheus {version}"
        super().__init__(*args)

    def start(
        self, scrape: dict[str, Any], rules: Sequence[Path], scrape_s: int, eval_s: int
    ) -> None:
        config = self.dir / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {
                        "scrape_interval": f"{scrape_s}s",
                        "scrape_timeout": "10s",
                        "evaluation_interval": f"{eval_s}s",
                    },
                    "rule_files": [str(p) for p in rules],
                    "scrape_configs": [scrape],
                }
            )
        )
        self.url = f"http://127.0.0.1:{free_port()}"
        self.spawn(
            [
                prometheus_binary(self.version),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
            ],
            self.url + "/-/ready",
        )

    def series(self) -> float:
        return metric(self.url + "/metrics", "prometheus_tsdb_head_series")

    def appended(self) -> float:
        return metric(self.url + "/metrics", "prometheus_tsdb_head_samples_appended_total")

    def groups(self) -> Groups:
        """Group name: (last evaluation's start, its seconds, seconds per rule)."""
        body = json.loads(get(self.url + "/api/v1/rules"))
        out = {}
        for group in body["data"]["groups"]:
            # Several rules may record one name: numbered as in the file.
            rules = {
                f"{group['name']} {i + 1}. {r['name']}": float(r.get("evaluationTime", 0))
                for i, r in enumerate(group["rules"])
            }
            out[group["name"]] = (
                group.get("lastEvaluation", ""),
                float(group.get("evaluationTime", 0)),
                rules,
            )
        return out


class Victoria(Engine):
    name = "VictoriaMetrics + vmalert"

    def start(
        self, scrape: dict[str, Any], rules: Sequence[Path], scrape_s: int, eval_s: int
    ) -> None:
        config = self.dir / "scrape.yml"
        config.write_text(
            yaml.safe_dump(
                {"global": {"scrape_interval": f"{scrape_s}s"}, "scrape_configs": [scrape]}
            )
        )
        self.url = f"http://127.0.0.1:{free_port()}"
        self.spawn(
            [
                vm_binary("victoria-metrics"),
                f"-httpListenAddr={self.url.removeprefix('http://')}",
                f"-promscrape.config={config}",
                f"-storageDataPath={self.dir / 'data'}",
                "-retentionPeriod=1d",
                "-loggerLevel=WARN",
            ],
            self.url + "/health",
        )
        self.rules_url = ""
        if rules:
            self.rules_url = f"http://127.0.0.1:{free_port()}"
            self.spawn(
                [
                    vm_binary("vmalert"),
                    f"-httpListenAddr={self.rules_url.removeprefix('http://')}",
                    *(f"-rule={p}" for p in rules),
                    f"-datasource.url={self.url}",
                    f"-remoteWrite.url={self.url}",
                    f"-remoteRead.url={self.url}",
                    f"-evaluationInterval={eval_s}s",
                    "-notifier.blackhole",
                    "-loggerLevel=WARN",
                ],
                self.rules_url + "/health",
            )

    def series(self) -> float:
        return metric(self.url + "/metrics", "vm_cache_entries", type="storage/hour_metric_ids")

    def appended(self) -> float:
        return metric(self.url + "/metrics", "vm_rows_added_to_storage_total")

    def groups(self) -> Groups:
        """Group name: (evaluations so far, their total seconds, {}) from vmalert's summary."""
        if not self.rules_url:
            return {}
        out: Groups = {}
        for key, value in samples(get(self.rules_url + "/metrics").decode()):
            name = key.split("{", 1)[0]
            group = re.search(r'group="([^"]*)"', key)
            if group and name.startswith("vmalert_iteration_duration_seconds_"):
                count, total, _ = out.get(group.group(1), (0.0, 0.0, {}))
                if name.endswith("_count"):
                    count = value
                elif name.endswith("_sum"):
                    total = value
                out[group.group(1)] = (count, total, {})
        return out


@dataclass
class Row:
    engine: str
    exporter: str
    targets: int
    exposed: int
    series: float = 0
    samples_per_s: float = 0
    rss_mb: float = 0
    cores: float = 0  # the engine's CPU seconds per second over the window
    up: float = 0  # the share of targets whose last scrape succeeded
    groups: dict[str, list[float]] = field(default_factory=dict)  # seconds per evaluation
    rules: dict[str, float] = field(default_factory=dict)  # last evaluation, seconds per rule
    load: str = ""


def measure(engine: Engine, row: Row, settle: float, seconds: float) -> Row:
    time.sleep(settle)
    vm = isinstance(engine, Victoria)
    seen = engine.groups()
    a0, c0, t0 = engine.appended(), engine.cpu_seconds(), time.monotonic()
    while time.monotonic() < t0 + seconds:
        time.sleep(5)
        if not vm:
            for name, (when, took, rules) in engine.groups().items():
                if when and when != seen.get(name, ("",))[0]:
                    row.groups.setdefault(name, []).append(took)
                    row.rules = {**row.rules, **rules}
                    seen[name] = (when, took, rules)
    a1, c1, t1 = engine.appended(), engine.cpu_seconds(), time.monotonic()
    if vm:
        for name, (count, total, _) in engine.groups().items():
            before = seen.get(name, (0.0, 0.0, {}))
            if count > before[0]:
                row.groups[name] = [(total - before[1]) / (count - before[0])] * int(
                    count - before[0]
                )
    row.series = engine.series()
    row.samples_per_s = (a1 - a0) / (t1 - t0)
    row.rss_mb = engine.rss_mb()
    row.cores = (c1 - c0) / (t1 - t0)
    answer = json.loads(get(f"{engine.url}/api/v1/query?query=avg(up)"))["data"]["result"]
    row.up = float(answer[0]["value"][1]) if answer else 0.0
    row.load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return row


def table(rows: Sequence[Row]) -> str:
    names = sorted({g for r in rows for g in r.groups})
    head = (
        "| engine | exporter | targets | series per target | scrapes up | active series |"
        " samples/s |"
        + "".join(f" {g} (s, mean / max) |" for g in names)
        + " groups, % of the interval | engine CPU (cores) | RSS (MB) | load average |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = []
        total = 0.0
        for g in names:
            took = r.groups.get(g)
            cells.append(f"{sum(took) / len(took):.3f} / {max(took):.3f}" if took else "-")
            total += sum(took) / len(took) if took else 0.0
        lines.append(
            f"| {r.engine} | {r.exporter} | {r.targets:,} | {r.exposed} | {r.up:.0%} |"
            f" {r.series:,.0f} |"
            f" {r.samples_per_s:,.0f} | "
            + " | ".join(cells)
            + (" |" if cells else "")
            + f" {total / ROW_EVAL[0] * 100:.1f} | {r.cores:.2f} | {r.rss_mb:,.0f} | {r.load} |"
        )
    return "\n".join(lines)


ROW_EVAL = [60.0]  # the evaluation interval, set from the arguments


@contextmanager
def engine_of(
    version: str, kind: str, replay: Replay, targets: int, *, rules: Sequence[Path], args: Any
) -> Iterator[Engine]:
    """A fresh engine (VERSION 2, 3 or vm) scraping `targets` replays of `kind`."""
    scrape = scrape_config(kind, targets, replay.address)
    intervals = (args.scrape_interval, args.eval_interval)
    engine: Engine = (
        Victoria(scrape, rules, *intervals)
        if version == "vm"
        else Prometheus(version, scrape, rules, *intervals)
    )
    try:
        yield engine
    finally:
        engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--engines", nargs="+", default=["3", "2", "vm"])
    parser.add_argument("--peer-engines", nargs="*", default=["3"])
    parser.add_argument(
        "--rules",
        type=Path,
        nargs="*",  # none: what the engine pays for scraping alone, the rules' cost by difference
        default=[ROOT / "alerts" / "pg_aio_recording.yml", ROOT / "alerts" / "pg_aio_alerts.yml"],
    )
    parser.add_argument("--recordings", type=Path, default=Path(tempfile.gettempdir()) / "fleet")
    parser.add_argument("--record-gap", type=float, default=60)
    parser.add_argument("--scrape-interval", type=int, default=30)
    parser.add_argument("--eval-interval", type=int, default=60)
    parser.add_argument("--settle", type=float, default=120)
    parser.add_argument("--measure", type=float, default=125)
    # Without rules the series and ingestion are steady after the first scrapes.
    parser.add_argument("--peer-settle", type=float, default=45)
    parser.add_argument("--peer-measure", type=float, default=65)
    args = parser.parse_args()
    ROW_EVAL[0] = args.eval_interval
    # Stopped by a signal, the engine running is stopped too (a background job ignores SIGINT).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    print(f"Machine: {machine()}\n", flush=True)
    if not (args.recordings / "gap").exists():
        record(args.recordings, args.record_gap, warmup=40)
    replay = Replay(args.recordings, KINDS)
    print(
        f"Recorded: ours {replay.series('ours')} series, {Peer.version()} {replay.series('peer')};"
        f" scrape every {args.scrape_interval} s, rules every {args.eval_interval} s,"
        f" settle {args.settle:.0f} s, measured over {args.measure:.0f} s"
        f" ({args.peer_settle:.0f} s and {args.peer_measure:.0f} s without rules)\n",
        flush=True,
    )
    runs = [(e, "ours") for e in args.engines] + [(e, "peer") for e in args.peer_engines]
    rows = []
    try:
        for targets in args.targets:
            for version, kind in runs:
                rules = args.rules if kind == "ours" else []
                started = time.monotonic()
                with engine_of(version, kind, replay, targets, rules=rules, args=args) as engine:
                    row = Row(
                        engine.name,
                        "postgres_exporter"
                        if kind == "peer"
                        else "pg_aio_exporter" + ("" if rules else " (no rules)"),
                        targets,
                        replay.series(kind),
                    )
                    times = (
                        (args.settle, args.measure)
                        if kind == "ours"
                        else (args.peer_settle, args.peer_measure)
                    )
                    rows.append(measure(engine, row, *times))
                print(
                    f"{engine.name} {kind} {targets}: {time.monotonic() - started:.0f} s;"
                    f" {json.dumps(row.groups)}",
                    flush=True,
                )
                if row.rules:
                    top = sorted(row.rules.items(), key=lambda kv: -kv[1])[:8]
                    print("  most expensive rules: " + "; ".join(f"{n} {s:.3f}" for n, s in top))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    finally:
        replay.stop()
    print("\n" + table(rows))
    print(f"\n{load()}")


if __name__ == "__main__":
    main()

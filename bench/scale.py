"""Exporter footprint at poll 30 s / sample 1 s: RSS and CPU per second for 1, 10, 100 targets.

Setup: one local PostgreSQL 18 server (max_connections 300) with 100 databases bench_000 ..
bench_099 and the role pgaio_monitor (member of pg_monitor). 1 target is `--dsn` (the common
deployment); 10 and 100 targets are a --config file with one target per database, so the process
holds 10 or 100 connections, polls 10 or 100 pg_stat_io and samples 10 or 100 times a second.
A Prometheus-like client scrapes with gzip every 15 s during the measurement. With one target,
Debian's prometheus-postgres-exporter runs alongside on the same server, scraped the same way.

Measured over --seconds after a warm-up covering the first poll: CPU (user + system, /proc) per
second of wall time, RSS at the end and its peak (read every second), gzip scrape median.

Usage: python bench/scale.py [--targets 1 10 100] [--seconds 60]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psycopg
from common import Peer, cpu_seconds, load, machine, peer_dsn, rss_mb, scrape_once

from harness import Exporter
from pg_aio_exporter.demo.server import LocalServer

MONITOR = "pgaio_monitor"
SCRAPE_EVERY = 15.0  # Prometheus' default scrape interval
WARMUP = 8.0


@dataclass
class Footprint:
    rss_mb: float
    peak_rss_mb: float
    cpu_ms_per_s: float
    scrape_ms: float
    body_kb: float


def watch(procs: list[tuple[int, str]], seconds: float) -> list[Footprint]:
    """Watch several exporters at once (pid, metrics URL), so they share the same load."""
    peak = [rss_mb(pid) for pid, _ in procs]
    scrapes: list[list[float]] = [[scrape_once(url, gzip=True)] for _, url in procs]
    cpu0, t0 = [cpu_seconds(pid) for pid, _ in procs], time.monotonic()
    next_scrape = t0 + SCRAPE_EVERY
    while (now := time.monotonic()) < t0 + seconds:
        if now >= next_scrape:
            for times, (_, url) in zip(scrapes, procs, strict=True):
                times.append(scrape_once(url, gzip=True))
            next_scrape += SCRAPE_EVERY
        peak = [max(p, rss_mb(pid)) for p, (pid, _) in zip(peak, procs, strict=True)]
        time.sleep(1.0)
    cpu1, t1 = [cpu_seconds(pid) for pid, _ in procs], time.monotonic()
    out = []
    for i, (pid, url) in enumerate(procs):
        with urllib.request.urlopen(url) as resp:  # noqa: S310
            body = len(resp.read())
        out.append(
            Footprint(
                rss_mb=rss_mb(pid),
                peak_rss_mb=max(peak[i], rss_mb(pid)),
                cpu_ms_per_s=(cpu1[i] - cpu0[i]) * 1000 / (t1 - t0),
                scrape_ms=statistics.median(scrapes[i]) * 1000,
                body_kb=body / 1024,
            )
        )
    return out


def config_file(server: LocalServer, count: int, directory: Path) -> Path:
    path = directory / f"targets-{count}.yaml"
    lines = ["targets:"]
    for i in range(count):
        dsn = server.dsn(user=MONITOR, dbname=f"bench_{i:03d}")
        lines += [f"  - name: t{i:03d}", f"    dsn: '{dsn}'"]
    path.write_text("\n".join(lines) + "\n")
    return path


def row(name: str, fp: Footprint, peer: Footprint | None = None) -> str:
    def vs(field: str) -> str:
        theirs = getattr(peer, field) if peer else None
        return f" (peer {theirs:.1f}, {theirs / getattr(fp, field):.1f}x)" if theirs else ""

    return (
        f"| {name} | {fp.rss_mb:.1f}{vs('rss_mb')} | {fp.peak_rss_mb:.1f} |"
        f" {fp.cpu_ms_per_s:.1f} ({fp.cpu_ms_per_s / 10:.1f}% of a core){vs('cpu_ms_per_s')} |"
        f" {fp.scrape_ms:.1f} | {fp.body_kb:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    print(f"Machine: {machine()}\n")
    server = LocalServer.create(settings={"max_connections": "300", "track_io_timing": "on"})
    server.start()
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {MONITOR} LOGIN IN ROLE pg_monitor")
            for i in range(max(args.targets)):
                conn.execute(f"CREATE DATABASE bench_{i:03d} STRATEGY FILE_COPY")
        print(
            f"Footprint at poll 30 s / sample 1 s, gzip scrape every {SCRAPE_EVERY:.0f} s,"
            f" over {args.seconds:.0f} s\n"
        )
        print(
            "| targets | RSS (MB) | peak RSS (MB) | CPU (ms per s) | gzip scrape median (ms)"
            " | body (kB, plain) |"
        )
        print("|---|---|---|---|---|---|")
        with tempfile.TemporaryDirectory() as tmp:
            for count in args.targets:
                source = (
                    ("--dsn", server.dsn(user=MONITOR))
                    if count == 1
                    else ("--config", str(config_file(server, count, Path(tmp))))
                )
                exporter = Exporter(*source)
                peer = Peer(peer_dsn(server, MONITOR)) if count == 1 and Peer.installed() else None
                try:
                    time.sleep(WARMUP)
                    procs = [(exporter.proc.pid, exporter.url + "/metrics")]
                    if peer is not None:
                        procs.append((peer.proc.pid, peer.url))
                    ours, *theirs = watch(procs, args.seconds)
                finally:
                    exporter.stop()
                    if peer is not None:
                        peer.stop()
                print(row(str(count), ours, theirs[0] if theirs else None), flush=True)
        print(f"\n{load()}")
    finally:
        server.destroy()


if __name__ == "__main__":
    main()

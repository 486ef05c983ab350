"""Scrape cost with one target: latency median/p95, exporter CPU and PostgreSQL CPU per scrape.

One PostgreSQL 18 server, the exporter with its defaults (poll 30 s, sample 1 s) and, when
installed, Debian's prometheus-postgres-exporter on the same server as the same role
(pgaio_monitor, a member of pg_monitor). Each round is --scrapes back-to-back scrapes by a fresh
urllib connection (no gzip, like the figures in issue 9; pg_aio_exporter also with gzip, as
Prometheus asks); the exporters take turns, and the table shows medians over --rounds rounds.
CPU per scrape subtracts what each process spends over the same time without scrapes (our
sampler, the server's own background work).

Usage: PYTHONPATH=.:tests python bench/scrape.py [--scrapes 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import psycopg
from common import Peer, ScrapeRun, load, machine, median_run, peer_dsn, scrape_run

from harness import Exporter
from pg_aio_exporter.demo.server import LocalServer

MONITOR = "pgaio_monitor"


def row(name: str, run: ScrapeRun, peer: ScrapeRun | None) -> str:
    def ratio(field: str) -> str:
        ours, theirs = getattr(run, field), getattr(peer, field) if peer else None
        return f" ({theirs / ours:.0f}x less)" if theirs and ours > 0 else ""

    return (
        f"| {name} | {run.median_ms:.2f}{ratio('median_ms')} | {run.p95_ms:.2f}{ratio('p95_ms')}"
        f" | {run.cpu_ms:.2f}{ratio('cpu_ms')} | {run.server_cpu_ms:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"Machine: {machine()}\n")
    server = LocalServer.create(settings={"track_io_timing": "on"})
    server.start()
    exporter = peer = None
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {MONITOR} LOGIN IN ROLE pg_monitor")
        exporter = Exporter("--dsn", server.dsn(user=MONITOR))
        peer = Peer(peer_dsn(server, MONITOR)) if Peer.installed() else None
        time.sleep(3)  # first poll and samples published
        ours: list[ScrapeRun] = []
        ours_gzip: list[ScrapeRun] = []
        theirs: list[ScrapeRun] = []
        pid = exporter.proc.pid
        url = exporter.url + "/metrics"
        for _ in range(args.rounds):
            ours.append(scrape_run(url, pid, server, args.scrapes))
            ours_gzip.append(scrape_run(url, pid, server, args.scrapes, gzip=True))
            if peer is not None:
                theirs.append(scrape_run(peer.url, peer.proc.pid, server, args.scrapes))
        peer_run = median_run(theirs) if theirs else None
        print(
            f"Scrapes, 1 target: medians of {args.rounds} rounds x {args.scrapes} scrapes"
            " (ratio: how many times less than the peer)\n"
        )
        print(
            "| exporter | scrape median (ms) | scrape p95 (ms) | exporter CPU per scrape (ms)"
            " | PostgreSQL CPU per scrape (ms) |"
        )
        print("|---|---|---|---|---|")
        print(row("pg_aio_exporter", median_run(ours), peer_run))
        print(row("pg_aio_exporter, gzip", median_run(ours_gzip), None))
        if peer_run is not None:
            print(row(Peer.version(), peer_run, None))
        else:
            print("| postgres_exporter | not installed | | | |")
        print(f"\n{load()}")
    finally:
        if peer is not None:
            peer.stop()
        if exporter is not None:
            exporter.stop()
        server.destroy()


if __name__ == "__main__":
    main()

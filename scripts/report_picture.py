"""Draws the README picture of the report's page from a real run (`make screenshots`).

    PYTHONPATH=tests python scripts/report_picture.py [--seconds 60] [--out docs/img]

Starts an embedded PostgreSQL 18 (shared_buffers 16MB, track_io_timing on, pg_stat_statements)
with the demo's table and read workload (two clients). Reports on it for --seconds with
io_method=worker (`--save`), restarts it with io_method=sync and reports again against the
first (`--baseline ... --format html`): the page of that comparison is opened in headless
Chromium (tests/browser.py, network off) and its top, at 1280 px wide, saved as
docs/img/report-page.png. The page itself and both JSON files are left in a temp dir, printed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import psycopg

from browser import chromium, screenshot
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import Workload, create_table

ROOT = Path(__file__).resolve().parent.parent

TABLE_MB = 64
HEIGHT = 2400  # the top of the page: verdict, findings, key figures and the first charts


def report(dsn: str, seconds: int, *args: str) -> str:
    workload = Workload(dsn, clients=2).start()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pg_aio_exporter", "report", "--dsn", dsn,
             "--duration", f"{seconds}s", *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 120,
        )  # fmt: skip
    finally:
        workload.stop()
    return result.stdout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pg-aio-report-page-"))
    server = LocalServer.create(
        settings={
            "shared_buffers": "16MB",
            "track_io_timing": "on",
            "io_method": "worker",
            "shared_preload_libraries": "pg_stat_statements",
        }
    )
    try:
        server.start()
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        create_table(server.dsn(), TABLE_MB)
        before = work / "worker.json"
        report(server.dsn(), args.seconds, "--save", str(before), "--format", "json")
        server.configure({"io_method": "sync"})
        server.restart()
        page = work / "sync-against-worker.html"
        page.write_text(
            report(
                server.dsn(),
                args.seconds,
                "--baseline",
                str(before),
                "--save",
                str(work / "sync.json"),
                "--format",
                "html",
            )
        )
    finally:
        server.destroy()
    out = args.out / "report-page.png"
    with chromium() as driver:
        driver.get(page.as_uri())
        screenshot(driver, 1280, out, height=HEIGHT)
    print(f"wrote {out}; the page and its reports: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

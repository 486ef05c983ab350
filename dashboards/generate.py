"""Builds the shipped Grafana dashboards with Grafana's foundation SDK and writes them as JSON.

    python -m dashboards.generate           # rewrite dashboards/*.json (make dashboards)
    python -m dashboards.generate --check   # exit 1 when the committed JSON is stale

(from the repository's root, with the package installed.)

The JSON files are what users import and what deploy/ provisions; this file and its siblings
are their source: each dashboard is a list of rows (dashboards/rows/, one module per row), the
rows' queries are the recording rules' formulas (alerts/promql.py) over Grafana's
$__rate_interval (dashboards/figures.py), placed with dashboards/panels.py, and
dashboards/frame.py adds the variables and annotations both dashboards share.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dashboards.figures import EXTRA_LABELS
from dashboards.frame import annotation_specs, dashboard
from dashboards.rows import (
    compare,
    exporter,
    reads,
    settings,
    throughput,
    timeline,
    waits,
    workload,
    writes,
)

HERE = Path(__file__).resolve().parent
OVERVIEW_FILE = HERE / "pg-aio-overview.json"
COMPARISON_FILE = HERE / "pg-aio-comparison.json"

__all__ = ["ANNOTATIONS", "EXTRA_LABELS", "dashboards", "main", "render"]

# Read from the package's list of AIO settings when this module loads.
ANNOTATIONS = annotation_specs()

OVERVIEW_ROWS = (
    settings.panels,
    reads.panels,
    throughput.panels,
    writes.panels,
    waits.panels,
    exporter.panels,
)
COMPARISON_ROWS = (workload.panels, timeline.panels, compare.per_target, compare.by_row)


def dashboards() -> dict[Path, dict[str, Any]]:
    return {
        OVERVIEW_FILE: dashboard(
            "PostgreSQL AIO overview",
            "pg-aio-overview",
            "PostgreSQL 18 asynchronous I/O: read latency per operation and per MiB, read size, "
            "throughput, hit ratio, I/O waits, io workers and in-flight AIO (pg_aio_exporter).",
            OVERVIEW_ROWS,
            comparison=False,
            specs=ANNOTATIONS,
        ),
        COMPARISON_FILE: dashboard(
            "AIO upgrade and io_method comparison",
            "pg-aio-comparison",
            "Before/after a PostgreSQL 17 -> 18 upgrade or an io_method / AIO setting change: "
            "the same read figures now and at an offset, with the changes annotated.",
            COMPARISON_ROWS,
            comparison=True,
            specs=ANNOTATIONS,
        ),
    }


def render(board: dict[str, Any]) -> str:
    return json.dumps(board, indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the JSON files are stale")
    args = parser.parse_args(argv)
    stale = []
    for path, board in dashboards().items():
        text = render(board)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}; run make dashboards", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

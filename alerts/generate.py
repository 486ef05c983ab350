"""Render the Prometheus recording and alerting rules of pg_aio_exporter from alerts/params.yaml.

    python -m alerts.generate [--params OVERRIDE.yaml ...] [--out DIR] [--no-docs]

(from the repository's root, with the package installed: `make rules`)

Writes DIR/pg_aio_recording.yml and DIR/pg_aio_alerts.yml (default DIR: alerts/) and, unless
--no-docs or --out points elsewhere, the generated tables of docs/alerts.md and the alerts each
collector's absence costs (exporter/pg_aio_exporter/collectors/alert_needs.json, which the
exporter warns with at start-up). The output is
plain PromQL for Prometheus 2.x and vmalert; the committed files are this script's output
for the shipped params.yaml (a test fails on drift).

Reads exporter/pg_aio_exporter/thresholds.yaml too, through the package's loader
(pg_aio_exporter.thresholds): the thresholds the rules share with `pg-aio-exporter report`.
The formulas are promql.py's, which the dashboards share; params.py loads and checks the
parameters, recording.py and alerting.py build the rules, render.py writes them out.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from alerts.params import HERE, ParamsError, load_params
from alerts.render import DOC, NEEDS, needs_file, outputs, render_doc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, action="append", default=[], help="override")
    parser.add_argument("--out", type=Path, default=HERE, help="directory for the rule files")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/alerts.md alone")
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params)
        args.out.mkdir(parents=True, exist_ok=True)
        for name, text in outputs(params).items():
            (args.out / name).write_text(text)
        # The docs describe the shipped rules, never a private override.
        if not args.no_docs and not args.params and args.out.resolve() == HERE:
            DOC.write_text(render_doc(DOC.read_text(), params))
            NEEDS.write_text(needs_file(params))
    except (ParamsError, OSError, yaml.YAMLError) as exc:
        print(f"generate.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The metric contract is the repository's own (docs/metrics.md), read by tests/contract.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import contract
import recorded
from test_dashboards import CONTRACT, HISTOGRAMS

pytestmark = pytest.mark.unit


def test_the_contract_is_read_from_the_docs() -> None:
    listed = {m.name: m.kind for m in contract.metrics()}
    assert listed["pg_up"] == "gauge"
    assert listed["pg_stat_io_reads_total"] == "counter"
    assert listed["pg_aio_exporter_poll_duration_seconds"] == "histogram"
    assert "pg_settings_track_wal_io_timing" in listed  # one of several names in a cell
    # Every name a group exempts is in the contract: the groups cannot name a metric the docs
    # dropped or renamed.
    for names in contract.GROUPS.values():
        assert names <= listed.keys()


def test_what_the_dashboards_read_is_documented() -> None:
    documented = {m.name for m in contract.metrics()}
    read = {name for name in CONTRACT if not name.endswith(("_bucket", "_sum", "_count"))}
    assert read - documented == set()
    assert set(HISTOGRAMS) <= documented


def test_a_missing_or_mistyped_metric_is_a_problem() -> None:
    body = (recorded.FIXTURES / "exposition" / "pg18.prom").read_text()
    assert not any("pg_up" in p for p in contract.problems(body))
    without = "\n".join(line for line in body.splitlines() if "pg_up" not in line)
    assert "MISSING core pg_up" in contract.problems(without)
    retyped = body.replace(
        "# TYPE pg_stat_io_reads_total counter", "# TYPE pg_stat_io_reads_total gauge"
    )
    assert any(
        p.startswith("WRONG-TYPE pg_stat_io_reads_total") for p in contract.problems(retyped)
    )


# A path through a folder named shared: "../shared", REPO.parent / "shared", '/work/shared/'.
SHARED = re.compile(r"""[/"']shared[/"']""")


def test_nothing_in_the_repository_needs_a_folder_beside_it() -> None:
    """CI runs from a clean clone: no test, script, Makefile or CI step may reach outside it."""
    root = Path(contract.__file__).resolve().parents[1]
    files = [root / "Makefile", *root.glob(".ci/*"), *root.glob("scripts/*")]
    files += [f for f in root.glob("tests/**/*.py") if f.name != Path(__file__).name]
    offenders = [str(f) for f in files if f.is_file() and SHARED.search(f.read_text())]
    assert offenders == []

"""The report takes what it needs through the worker's tap (poll/worker.py: Tap), not from the
collectors' internals; it serves nothing and leaves the process' logging alone."""

from __future__ import annotations

import ast
import asyncio
import logging
from pathlib import Path

import pytest

from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.report import runner

RUNNER = Path(runner.__file__)


@pytest.mark.unit
def test_the_runner_reads_no_collector_internals() -> None:
    tree = ast.parse(RUNNER.read_text())
    calls = {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    assert {"isinstance", "setLevel", "Exposition", "Sampler"} & calls == set()
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    internals = {
        "pg_aio_exporter.collectors.activity",
        "pg_aio_exporter.collectors.pg_aios",
        "pg_aio_exporter.expose.exposition",
        "pg_aio_exporter.poll.sampler",
    }
    assert imported & internals == set()


def test_a_report_leaves_logging_alone_and_gets_the_samples_through_the_tap(
    pg18: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    package = logging.getLogger("pg_aio_exporter")
    level = package.level
    summary = asyncio.run(
        runner.measure(
            target_from_dsn(pg18.dsn(), name="default"),
            duration=1.5,
            sample_interval=0.25,
            timeout=5,
        )
    )
    assert package.level == level
    with caplog.at_level(logging.INFO, logger="pg_aio_exporter"):
        package.info("still heard")
    assert "still heard" in caplog.text
    activity = summary.activity
    assert activity.samples >= 3
    assert activity.io_workers is not None and activity.io_worker_slots >= activity.samples

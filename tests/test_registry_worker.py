"""The worker runs whatever the registry lists: a view added in a test is polled from a real
PostgreSQL 18 and rendered, with no other edit."""

from __future__ import annotations

import asyncio

import pytest

from harness import labels, parse
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.worker import TargetWorker
from test_structure import DummyCollector


def test_worker_polls_a_registered_view(pg18: LocalServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(registry.POLL, DummyCollector.name, DummyCollector)

    async def one_poll() -> bytes:
        selfmetrics = SelfMetrics()
        exposition = Exposition(selfmetrics)
        target = target_from_dsn(pg18.dsn())
        worker = TargetWorker(
            target, exposition, selfmetrics, poll_interval=30, sample_interval=1, timeout=5
        )
        try:
            assert await worker.poll()
            assert await worker.sample()
        finally:
            await worker._disconnect()
        exposition.render()
        chunks: list[bytes] = []
        exposition.body.write(chunks.append)
        return b"".join(chunks)

    got = parse(asyncio.run(one_poll()).decode())
    assert got["pg_dummy_answer"] == {labels(target="default", dummy_label="x"): 42}
    assert got["pg_up"] == {labels(target="default"): 1}
    assert got["pg_aio_sampler_samples_total"] == {labels(target="default"): 1}
    poll_errors = got.get("pg_aio_exporter_poll_errors_total", {})
    assert not any(v for v in poll_errors.values())

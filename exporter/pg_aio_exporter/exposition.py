"""In-memory state -> the /metrics body, rendered off the scrape path.

Workers publish their latest families; a render task rebuilds the body (and its gzip form)
once per burst of updates and swaps it in. A scrape only reads `Exposition.body`, so it never
waits on PostgreSQL or on rendering.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterable
from typing import NamedTuple

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from pg_aio_exporter.metricset import merge
from pg_aio_exporter.selfmetrics import SelfMetrics

# Updates arriving within this window share one render.
COALESCE_SECONDS = 0.05


class Body(NamedTuple):
    plain: bytes
    gzipped: bytes


class _Published(Collector):
    def __init__(self) -> None:
        self.parts: dict[tuple[str, str], list[Metric]] = {}

    def collect(self) -> Iterable[Metric]:
        return merge(self.parts[key] for key in sorted(self.parts))


class Exposition:
    def __init__(self, selfmetrics: SelfMetrics) -> None:
        self._published = _Published()
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self._published)
        self._registry.register(selfmetrics.registry)
        self._changed = asyncio.Event()
        self.body = Body(b"", gzip.compress(b""))
        self.render()

    def publish(self, target: str, part: str, families: list[Metric]) -> None:
        """Replace what one target's poller ("poll") or sampler ("sample") last produced."""
        self._published.parts[(target, part)] = families
        self._changed.set()

    def render(self) -> None:
        plain = generate_latest(self._registry)
        self.body = Body(plain, gzip.compress(plain, compresslevel=1))

    async def run(self) -> None:
        while True:
            await self._changed.wait()
            await asyncio.sleep(COALESCE_SECONDS)
            self._changed.clear()
            self.render()

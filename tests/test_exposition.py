"""The /metrics body: assembled from each target's texts, sent in batches, gzipped whole."""

from __future__ import annotations

import asyncio
import gzip

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pg_aio_exporter.expose.exposition import EAGER_BYTES, WRITE_BATCH_BYTES, Exposition
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.expose.selfmetrics import SelfMetrics

pytestmark = pytest.mark.unit
ROWS = 200  # per target and family: about 15 kB of text per family


def published(targets: int) -> tuple[Exposition, dict[tuple[str, str, str], float]]:
    """An exposition fed by `targets` targets' polls, and the samples the body must hold."""

    async def build() -> Exposition:
        return Exposition(SelfMetrics())  # its asyncio.Event wants a running loop

    exposition = asyncio.run(build())
    expected = {}
    for t in range(targets):
        target = f"t{t:03d}"
        out = MetricSet({"target": target})
        for row in range(ROWS):
            value = t * 1000 + row + 0.5
            out.counter("demo_reads", "Reads.", value, row=str(row))
            out.gauge("demo_depth", "Depth.", -value, row=str(row))
            expected[("demo_reads_total", target, str(row))] = value
            expected[("demo_depth", target, str(row))] = -value
        exposition.publish(target, "poll", out.families())
    exposition.render()
    return exposition, expected


def written(exposition: Exposition) -> list[bytes]:
    writes: list[bytes] = []
    exposition.body.write(writes.append)
    return writes


@pytest.mark.parametrize("targets", [1, 60])
def test_body_holds_every_sample_once_with_one_header_per_family(targets: int) -> None:
    exposition, expected = published(targets)
    plain = b"".join(written(exposition))
    assert len(plain) == exposition.body.length
    assert gzip.decompress(exposition.body.gzipped) == plain
    found = {}
    for family in text_string_to_metric_families(plain.decode()):
        for sample in family.samples:
            if sample.name.startswith("demo_"):
                key = (sample.name, sample.labels["target"], sample.labels["row"])
                assert key not in found, f"{key} twice"
                found[key] = sample.value
    assert found == expected
    text = plain.decode()
    assert text.count("# TYPE demo_reads_total counter\n") == 1
    assert text.count("# HELP demo_depth Depth.\n") == 1
    assert "# TYPE pg_aio_exporter_build_info gauge" in text  # self-metrics ride along


def test_large_body_is_sent_in_batches_not_copied_whole() -> None:
    exposition, _ = published(60)
    assert exposition.body.length > EAGER_BYTES  # else this tests the small path
    writes = written(exposition)
    assert len(writes) > 1
    # A batch closes as soon as it reaches the batch size, so it exceeds it by less than one
    # target's family text (about 15 kB here).
    assert max(map(len, writes)) < WRITE_BATCH_BYTES + 32 * 1024


def test_small_body_is_one_write() -> None:
    exposition, _ = published(1)
    assert len(written(exposition)) == 1


def test_render_task_ends_when_cancelled_as_a_publish_lands() -> None:
    """The render task's wait for a publish must not drop a cancellation that arrives in the
    same loop iteration as the publish (asyncio.wait_for on 3.11 does): the exporter's
    shutdown waits for this task."""

    async def main() -> bool:
        exposition = Exposition(SelfMetrics(), max_age=10.0)
        task = asyncio.create_task(exposition.run())
        await asyncio.sleep(0.1)  # waiting for a publish
        exposition.publish("t", "poll", MetricSet({"target": "t"}).families())
        await asyncio.sleep(0)  # the wait has its result, the task has not run yet
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=2)
        if not done:
            task.cancel()
            await asyncio.wait([task], timeout=2)
        return bool(done)

    assert asyncio.run(main()), "the render task went on after its cancellation"

"""The sampled views of one target: the sample count and the registry's sample collectors.

Counters live in the exporter (they count samples, not server events) and only ever grow. The
collectors' window values (io worker utilisation, max in-flight) are rolled over at each poll,
so they describe the last complete poll interval.
"""

from __future__ import annotations

from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.base import SampleCollector
from pg_aio_exporter.expose.metricset import MetricSet


class Sampler:
    def __init__(self, collectors: list[SampleCollector] | None = None) -> None:
        self.samples = 0
        self.collectors = registry.sample_collectors() if collectors is None else collectors

    def roll_window(self) -> None:
        """Close the poll interval that just ended."""
        for collector in self.collectors:
            collector.roll_window()

    def collect(self, out: MetricSet, *, current: bool) -> None:
        """Counters always; gauges only while `current` (the last sample succeeded)."""
        out.counter("pg_aio_sampler_samples", "Samples taken (the denominator).", self.samples)
        for collector in self.collectors:
            collector.collect_counters(out)
        if current:
            for collector in self.collectors:
                collector.collect_gauges(out)

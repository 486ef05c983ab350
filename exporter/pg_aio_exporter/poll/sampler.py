"""The sampled views of one target: the sample count and the registry's sample collectors.

Counters live in the exporter (they count samples, not server events) and only ever grow. The
collectors' window values (io worker utilisation, max in-flight) are rolled over at each poll,
so they describe the last complete poll interval.

A bug in one collector's code costs its own series, never the round or another collector's:
roll_window and collect hand their failures back, (collector name, exception), for the worker
to count, and a collector whose window did not roll has no gauges until it rolls again (they
would describe an interval that is over).
"""

from __future__ import annotations

from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.base import SampleCollector
from pg_aio_exporter.expose.metricset import MetricSet

Failure = tuple[str, Exception]


class Sampler:
    def __init__(self, collectors: list[SampleCollector] | None = None) -> None:
        self.samples = 0
        self.collectors = registry.sample_collectors() if collectors is None else collectors
        self._unrolled: set[str] = set()  # collectors whose last roll_window raised

    def roll_window(self) -> list[Failure]:
        """Close the poll interval that just ended."""
        failures: list[Failure] = []
        for collector in self.collectors:
            try:
                collector.roll_window()
            except Exception as exc:
                self._unrolled.add(collector.name)
                failures.append((collector.name, exc))
            else:
                self._unrolled.discard(collector.name)
        return failures

    def collect(self, out: MetricSet, *, current: bool) -> list[Failure]:
        """Counters always; gauges only while `current` (the last sample succeeded) and the
        collector's window rolled. A collector that raises adds nothing to `out`."""
        out.counter("pg_aio_sampler_samples", "Samples taken (the denominator).", self.samples)
        failures: list[Failure] = []
        counters = [(c, c.collect_counters) for c in self.collectors]
        gauges = [(c, c.collect_gauges) for c in self.collectors if c.name not in self._unrolled]
        for collector, collect in [*counters, *(gauges if current else [])]:
            if any(name == collector.name for name, _ in failures):
                continue
            own = out.sibling()
            try:
                collect(own)
            except Exception as exc:
                failures.append((collector.name, exc))
                continue
            out.add(own)
        return failures

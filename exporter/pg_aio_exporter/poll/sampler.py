"""The sampled views of one target: the sample count and the registry's sample collectors.

Counters live in the exporter (they count samples, not server events) and only ever grow. The
collectors' window values (io worker utilisation, max in-flight) are rolled over at each poll,
so they describe the last complete poll interval.

A bug in one collector's code costs its own series, never the round or another collector's:
observe, roll_window and collect hand their failures back, (collector name, exception), for
the worker to count. A collector whose observe raised has no series while it raises (its
counters miss that sample, which the others count), and no gauges until a window in which
every sample was observed has rolled; one whose window did not roll has no gauges until it
rolls again (they would describe an interval that is over).
"""

from __future__ import annotations

from typing import Any

from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.base import SampleCollector
from pg_aio_exporter.expose.metricset import MetricSet

Failure = tuple[str, Exception]


class Sampler:
    def __init__(self, collectors: list[SampleCollector[Any]] | None = None) -> None:
        self.samples = 0
        self._rolled = 0  # self.samples when the last window was rolled
        self.collectors = registry.sample_collectors() if collectors is None else collectors
        # Collectors without gauges: the last roll_window raised, or the window it closed
        # missed a sample (observe raised).
        self._unrolled: set[str] = set()
        self._missed: set[str] = set()  # observe raised in the open window
        self._unobserved: set[str] = set()  # observe raised on the last sample

    def observe(
        self,
        answered: list[tuple[SampleCollector[Any], list[Any] | Exception]],
        version_num: int,
    ) -> tuple[list[tuple[SampleCollector[Any], str | None]], list[Failure]]:
        """Count one sample and fold it into each collector that answered, with its rows (of its
        row_type, or why they could not be read into it: a failure of its observe): (collector,
        what was hidden from this role) for those that took it, and the failures of the
        others."""
        self.samples += 1
        observed: list[tuple[SampleCollector[Any], str | None]] = []
        failures: list[Failure] = []
        self._unobserved.clear()
        for collector, rows in answered:
            try:
                if isinstance(rows, Exception):
                    raise rows  # its rows did not fit its row type
                observed.append((collector, collector.observe(rows, version_num)))
            except Exception as exc:
                self._unobserved.add(collector.name)
                self._missed.add(collector.name)
                failures.append((collector.name, exc))
        return observed, failures

    def roll_window(self, seconds: float) -> list[Failure]:
        """Close the poll interval that just ended, `seconds` long."""
        failures: list[Failure] = []
        missed, self._missed = self._missed, set()
        samples, self._rolled = self.samples - self._rolled, self.samples
        for collector in self.collectors:
            try:
                collector.roll_window(samples, seconds)
            except Exception as exc:
                self._unrolled.add(collector.name)
                failures.append((collector.name, exc))
            else:
                if collector.name in missed:
                    self._unrolled.add(collector.name)
                else:
                    self._unrolled.discard(collector.name)
        return failures

    def collect(self, out: MetricSet, *, current: bool) -> list[Failure]:
        """Counters of the collectors that observed the last sample; gauges only while
        `current` (the last sample succeeded) and the collector's window rolled whole. A
        collector that raises adds nothing to `out`."""
        out.counter("pg_aio_sampler_samples", "Samples taken (the denominator).", self.samples)
        failures: list[Failure] = []
        alive = [c for c in self.collectors if c.name not in self._unobserved]
        counters = [(c, c.collect_counters) for c in alive]
        gauges = [(c, c.collect_gauges) for c in alive if c.name not in self._unrolled]
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

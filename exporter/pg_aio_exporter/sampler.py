"""Sampler state of one target: cumulative counters over samples, and per-poll-interval windows.

Counters live in the exporter (they count samples, not server events) and only ever grow. The
window values (io worker utilisation, max in-flight) are rolled over at each poll, so they
describe the last complete poll interval.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pg_aio_exporter.collectors.activity import ActivitySample, WaitKey
from pg_aio_exporter.collectors.pg_aios import OPERATIONS, AiosSample
from pg_aio_exporter.metricset import MetricSet


@dataclass
class _Window:
    busy: int = 0
    slots: int = 0  # io workers seen, summed over samples
    max_in_flight: Counter[str] = field(default_factory=Counter)


@dataclass
class SamplerState:
    samples: int = 0
    wait_events: Counter[WaitKey] = field(default_factory=Counter)
    io_workers: int | None = None  # None until an AIO server was sampled
    busy: int = 0
    in_flight: Counter[tuple[str, str]] = field(default_factory=Counter)
    in_flight_bytes: Counter[str] = field(default_factory=Counter)
    _window: _Window = field(default_factory=_Window)
    utilization: float | None = None
    max_in_flight: Counter[str] | None = None

    def observe(self, activity: ActivitySample, aios: AiosSample | None) -> None:
        self.samples += 1
        self.wait_events.update(activity.working)
        if aios is None:  # no AIO on this server: AIO metrics stay absent
            return
        self.io_workers = activity.io_workers
        self.busy += activity.io_workers_busy
        self._window.busy += activity.io_workers_busy
        self._window.slots += activity.io_workers
        self.in_flight.update(aios.handles)
        for operation in OPERATIONS:
            self.in_flight_bytes[operation] += aios.bytes[operation]
        for operation, count in aios.per_operation().items():
            self._window.max_in_flight[operation] = max(
                self._window.max_in_flight[operation], count
            )

    def roll_window(self) -> None:
        """Close the poll interval that just ended."""
        window, self._window = self._window, _Window()
        if self.io_workers is None:
            return
        self.utilization = window.busy / window.slots if window.slots else None
        self.max_in_flight = window.max_in_flight

    def collect(self, out: MetricSet, *, current: bool) -> None:
        """Counters always; gauges only while `current` (the last sample succeeded)."""
        out.counter("pg_aio_sampler_samples", "Samples taken (the denominator).", self.samples)
        for (backend_type, wait_type, wait), count in sorted(self.wait_events.items()):
            out.counter(
                "pg_aio_wait_event_samples",
                "Sampled processes doing work, by wait event (CPU = no wait);"
                " rate / rate(samples) = average active sessions.",
                count,
                backend_type=backend_type,
                wait_event_type=wait_type,
                wait_event=wait,
            )
        if self.io_workers is None:
            return
        out.counter(
            "pg_aio_io_worker_busy_samples",
            "Sum over io workers of samples where the worker was not idle.",
            self.busy,
        )
        for (state, operation), count in sorted(self.in_flight.items()):
            out.counter(
                "pg_aio_in_flight_samples",
                "pg_aios handles summed over samples; rate / rate(samples) ="
                " average in-flight depth.",
                count,
                state=state,
                operation=operation,
            )
        for operation, total in sorted(self.in_flight_bytes.items()):
            out.counter(
                "pg_aio_in_flight_bytes_samples",
                "Bytes of pg_aios handles summed over samples.",
                total,
                operation=operation,
            )
        if not current:
            return
        out.gauge(
            "pg_aio_io_workers", "io worker processes seen in the last sample.", self.io_workers
        )
        if self.utilization is not None:
            out.gauge(
                "pg_aio_io_worker_utilization_ratio",
                "Busy io worker samples / (samples x workers) over the last poll interval.",
                self.utilization,
            )
        if self.max_in_flight is not None:
            for operation in sorted({*OPERATIONS, *self.max_in_flight}):
                out.gauge(
                    "pg_aio_in_flight_max",
                    "Most AIO handles seen in one sample during the last poll interval.",
                    self.max_in_flight[operation],
                    operation=operation,
                )

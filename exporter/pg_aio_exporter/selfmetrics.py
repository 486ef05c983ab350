"""The exporter's own metrics: build, poll and sample durations, errors, overruns."""

from __future__ import annotations

import platform

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)

from pg_aio_exporter import __version__

# A _created series per counter doubles the exposition and nobody queries it.
disable_created_metrics()  # type: ignore[no-untyped-call]

POLL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SAMPLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class SelfMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        build = Gauge(
            "pg_aio_exporter_build_info",
            "Exporter build; value 1.",
            ["version", "python_version"],
            registry=self.registry,
        )
        build.labels(__version__, platform.python_version()).set(1)
        self.poll_duration = Histogram(
            "pg_aio_exporter_poll_duration_seconds",
            "Poll time per collector: the shared pipelined round trip plus the collector's"
            " own processing.",
            ["target", "collector"],
            buckets=POLL_BUCKETS,
            registry=self.registry,
        )
        self.poll_errors = Counter(
            "pg_aio_exporter_poll_errors_total",
            "Failed polls and samples by collector and kind"
            " (connection, auth, timeout, privilege, query).",
            ["target", "collector", "kind"],
            registry=self.registry,
        )
        self.last_poll_success = Gauge(
            "pg_aio_exporter_last_poll_success_timestamp_seconds",
            "When the last fully successful poll ended, epoch seconds.",
            ["target"],
            registry=self.registry,
        )
        self.sample_duration = Histogram(
            "pg_aio_exporter_sample_duration_seconds",
            "Wall time of one sampler round trip.",
            ["target"],
            buckets=SAMPLE_BUCKETS,
            registry=self.registry,
        )
        self.sample_overruns = Counter(
            "pg_aio_exporter_sample_overruns_total",
            "Samples skipped because the previous sample or poll was still running.",
            ["target"],
            registry=self.registry,
        )

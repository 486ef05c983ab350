"""The exporter's own metrics: build, poll and sample durations, errors, overruns.

Labelled counters, gauges and histograms with the call surface of prometheus_client's
(`.labels(...).inc()`, `.set()`, `.observe()`) and the same exposition text, but each child
keeps its rendered lines until it changes: there are dozens per target, and a large body is
assembled every second. The body is a list of chunks (exposition.py), so each child's text is
its only copy. Only the event loop touches them (workers update, the render task
reads), so there are no locks.
"""

from __future__ import annotations

import bisect
import platform

from pg_aio_exporter import __version__
from pg_aio_exporter.expose import process
from pg_aio_exporter.expose.metricset import header, number, series, value

# The `kind` values of pg_aio_exporter_poll_errors_total: poll/errors.py tells them apart, and
# "internal" is a bug in a collector or a poll or sample round.
KINDS = ("connection", "auth", "timeout", "privilege", "query", "unsupported", "internal")
INTERNAL = "internal"
# Every label name of the exporter's own series (a target's extra labels must not shadow them).
LABELS = ("collector", "kind", "le", "python_version", "storage_class", "target", "version")
# Five bounds each, a factor of about 5 apart: the one reader is the overview's p99 panel,
# which asks whether a round trip nears its interval (a poll's is cut at --timeout, 5 s by
# default), not its exact milliseconds. Every bound costs one series per collector and target
# (docs/metrics.md, "What a target costs").
POLL_BUCKETS = (0.01, 0.05, 0.25, 1.0, 5.0)
SAMPLE_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5)


class _Child:
    __slots__ = ("_prefixes", "_text")

    def __init__(self, prefixes: list[str]) -> None:
        self._prefixes = prefixes  # one per line: `name{labels} `
        self._text: bytes | None = None

    def _changed(self) -> None:
        self._text = None

    def _values(self) -> list[float]:
        raise NotImplementedError

    def text(self) -> bytes:
        if self._text is None:
            self._text = "".join(
                p + value(v) for p, v in zip(self._prefixes, self._values(), strict=True)
            ).encode()
        return self._text


class _Scalar(_Child):
    __slots__ = ("_value",)

    def __init__(self, prefixes: list[str]) -> None:
        super().__init__(prefixes)
        self._value = 0.0

    def _values(self) -> list[float]:
        return [self._value]

    def inc(self, amount: float = 1.0) -> None:
        self._value += amount
        self._changed()

    def set(self, number: float) -> None:
        self._value = float(number)
        self._changed()


class _HistogramChild(_Child):
    __slots__ = ("_bounds", "_counts", "_sum")

    def __init__(self, prefixes: list[str], bounds: tuple[float, ...]) -> None:
        super().__init__(prefixes)
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)  # the last is +Inf
        self._sum = 0.0

    def observe(self, amount: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, amount)] += 1
        self._sum += amount
        self._changed()

    def _values(self) -> list[float]:
        cumulative: list[float] = []
        total = 0
        for count in self._counts:
            total += count
            cumulative.append(float(total))
        return [*cumulative, float(total), self._sum]  # buckets, _count, _sum


class _Family:
    def __init__(
        self, name: str, doc: str, kind: str, labelnames: tuple[str, ...], exposed: str
    ) -> None:
        self._name = name
        self._kind = kind
        self._labelnames = labelnames
        self._header = header(exposed, doc, kind)
        self._children: dict[tuple[str, ...], _Child] = {}

    def _prefixes(self, labels: dict[str, str]) -> list[str]:
        suffix = "_total" if self._kind == "counter" else ""
        return [series(self._name + suffix, labels)]

    def _child(self, values: tuple[str, ...]) -> _Child:
        child = self._children.get(values)
        if child is None:
            labels = dict(zip(self._labelnames, values, strict=True))
            child = self._children[values] = self._new_child(self._prefixes(labels))
        return child

    def _new_child(self, prefixes: list[str]) -> _Child:
        return _Scalar(prefixes)

    def forget(self, target: str) -> None:
        """Drop the children of one target (a family without a target label has none)."""
        if "target" in self._labelnames:
            at = self._labelnames.index("target")
            for values in [v for v in self._children if v[at] == target]:
                del self._children[values]

    def chunks(self) -> list[bytes]:
        return [self._header, *(child.text() for child in self._children.values())]


class _ScalarFamily(_Family):
    def labels(self, *values: str) -> _Scalar:
        child = self._child(values)
        assert isinstance(child, _Scalar)
        return child


class Counter(_ScalarFamily):
    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...]) -> None:
        """`name` without _total, as in the metric contract's counter families."""
        super().__init__(name, doc, "counter", labelnames, name + "_total")


class Gauge(_ScalarFamily):
    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...]) -> None:
        super().__init__(name, doc, "gauge", labelnames, name)


class Histogram(_Family):
    def __init__(
        self, name: str, doc: str, labelnames: tuple[str, ...], buckets: tuple[float, ...]
    ) -> None:
        super().__init__(name, doc, "histogram", labelnames, name)
        self._bounds = buckets

    def _prefixes(self, labels: dict[str, str]) -> list[str]:
        return [
            *(
                series(f"{self._name}_bucket", {**labels, "le": number(le)})
                for le in [*self._bounds, float("inf")]
            ),
            series(f"{self._name}_count", labels),
            series(f"{self._name}_sum", labels),
        ]

    def _new_child(self, prefixes: list[str]) -> _Child:
        return _HistogramChild(prefixes, self._bounds)

    def labels(self, *values: str) -> _HistogramChild:
        child = self._child(values)
        assert isinstance(child, _HistogramChild)
        return child


class SelfMetrics:
    def __init__(self) -> None:
        build = Gauge(
            "pg_aio_exporter_build_info", "Exporter build; value 1.", ("version", "python_version")
        )
        build.labels(__version__, platform.python_version()).set(1)
        self.poll_duration = Histogram(
            "pg_aio_exporter_poll_duration_seconds",
            "Poll time per collector: the shared pipelined round trip plus the collector's"
            " own processing.",
            ("target", "collector"),
            POLL_BUCKETS,
        )
        self.poll_errors = Counter(
            "pg_aio_exporter_poll_errors",
            f"Failed polls and samples by collector and kind ({', '.join(KINDS)}).",
            ("target", "collector", "kind"),
        )
        self.last_poll_success = Gauge(
            "pg_aio_exporter_last_poll_success_timestamp_seconds",
            "When the last fully successful poll sent its queries, epoch seconds.",
            ("target",),
        )
        self.sample_duration = Histogram(
            "pg_aio_exporter_sample_duration_seconds",
            "Wall time of one sampler round trip.",
            ("target",),
            SAMPLE_BUCKETS,
        )
        self.sample_overruns = Counter(
            "pg_aio_exporter_sample_overruns",
            "Samples skipped because the previous sample or poll was still running.",
            ("target",),
        )
        self.sample_stalls = Counter(
            "pg_aio_exporter_sample_stalls",
            "Samples skipped because the exporter woke late: it had no CPU in time (a busy host,"
            " a CPU limit), not a slow query.",
            ("target",),
        )
        # What each target's data sits on, as configured (none of them when not configured:
        # the rules and the report then judge by thresholds.yaml's default_storage_class).
        self.storage_class = Gauge(
            "pg_aio_storage_class_info",
            "The target's configured storage class (storage_class, --storage-class); value 1.",
            ("target", "storage_class"),
        )
        self.volume_iops = Gauge(
            "pg_aio_storage_volume_max_operations_per_second",
            "The target volume's IOPS limit, as configured (volume_iops).",
            ("target",),
        )
        self.volume_throughput = Gauge(
            "pg_aio_storage_volume_max_bytes_per_second",
            "The target volume's throughput limit, as configured (volume_bytes_per_second).",
            ("target",),
        )
        self._families: list[_Family] = [
            build,
            self.storage_class,
            self.volume_iops,
            self.volume_throughput,
            self.poll_duration,
            self.poll_errors,
            self.last_poll_success,
            self.sample_duration,
            self.sample_overruns,
            self.sample_stalls,
        ]

    def declare_storage(
        self, target: str, storage_class: str | None, iops: float | None, throughput: float | None
    ) -> None:
        """A target's configured storage, exported as set (each only when given)."""
        if storage_class is not None:
            self.storage_class.labels(target, storage_class).set(1)
        if iops is not None:
            self.volume_iops.labels(target).set(iops)
        if throughput is not None:
            self.volume_throughput.labels(target).set(throughput)

    def forget(self, target: str) -> None:
        """Drop a target's series from every family: a reload removed it, or changed it and
        starts it again from 0."""
        for family in self._families:
            family.forget(target)

    def render(self) -> list[bytes]:
        """The exposition text, in chunks."""
        # process_* (CPU, memory, fds) change at every render anyway: read each time.
        return [process.render()] + [
            chunk for family in self._families for chunk in family.chunks()
        ]

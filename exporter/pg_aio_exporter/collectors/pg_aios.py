"""pg_aios (PostgreSQL 18+), sampled: AIO handles in use right now, by state and operation.

A point-in-time view: only sampling well above the poll rate shows queue depth.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG18

OPERATIONS = ("readv", "writev")  # exported even when idle, so depth 0 is a value, not a gap

# A handle that is handed out but not yet defined has no operation (NULL): call it "invalid",
# the name PostgreSQL gives an undefined operation.
SQL = (
    "SELECT state, coalesce(operation, 'invalid') AS operation, count(*)::int AS n,"
    " coalesce(sum(length), 0)::float8 AS bytes"
    " FROM pg_aios WHERE pid <> pg_backend_pid() GROUP BY 1, 2"
)


@dataclass(frozen=True, slots=True)
class AiosRow:
    state: str
    operation: str
    n: int
    bytes: float


@dataclass
class AiosSample:
    handles: Counter[tuple[str, str]] = field(default_factory=Counter)  # state, operation
    bytes: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))  # operation

    def per_operation(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for (_, operation), count in self.handles.items():
            total[operation] += count
        return total


def summarize(rows: list[AiosRow]) -> AiosSample:
    sample = AiosSample()
    for row in rows:
        sample.handles[(row.state, row.operation)] += row.n
        sample.bytes[row.operation] += row.bytes
    return sample


class PgAiosCollector:
    name = "pg_aios"
    since = PG18
    labels = ("state", "operation")
    families = (
        "pg_aio_in_flight_samples_total",
        "pg_aio_in_flight_bytes_samples_total",
        "pg_aio_in_flight_max",
    )
    row_type = AiosRow

    def __init__(self) -> None:
        self.sampled = False  # AIO metrics stay absent until pg_aios was read once
        self.in_flight: Counter[tuple[str, str]] = Counter()
        self.in_flight_bytes: defaultdict[str, float] = defaultdict(float)
        self.max_in_flight: Counter[str] | None = None
        self.peak: Counter[str] = Counter()  # most handles in one sample, ever (the report's)
        self._window_max: Counter[str] = Counter()

    def query(self, version_num: int) -> str | None:
        return SQL if version_num >= self.since else None

    def observe(self, rows: list[AiosRow], version_num: int) -> str | None:
        seen = summarize(rows)
        self.sampled = True
        self.in_flight.update(seen.handles)
        for operation in OPERATIONS:
            self.in_flight_bytes[operation] += seen.bytes[operation]
        for operation, count in seen.per_operation().items():
            self._window_max[operation] = max(self._window_max[operation], count)
            self.peak[operation] = max(self.peak[operation], count)
        return None

    def totals(self) -> dict[str, Any]:
        return {"in_flight": dict(self.in_flight), "in_flight_max": dict(self.peak)}

    def roll_window(self, samples: int, seconds: float) -> None:
        window_max, self._window_max = self._window_max, Counter()
        if self.sampled:
            self.max_in_flight = window_max

    def collect_counters(self, out: MetricSet) -> None:
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

    def collect_gauges(self, out: MetricSet) -> None:
        if self.max_in_flight is not None:
            for operation in sorted({*OPERATIONS, *self.max_in_flight}):
                out.gauge(
                    "pg_aio_in_flight_max",
                    "Most AIO handles seen in one sample during the last poll interval.",
                    self.max_in_flight[operation],
                    operation=operation,
                )

"""pg_aios (PostgreSQL 18+), sampled: AIO handles in use right now, by state and operation.

A point-in-time view: only sampling well above the poll rate shows queue depth.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pg_aio_exporter.collectors import Row

PG18 = 180000
OPERATIONS = ("readv", "writev")  # exported even when idle, so depth 0 is a value, not a gap

# A handle that is handed out but not yet defined has no operation (NULL): call it "invalid",
# the name PostgreSQL gives an undefined operation.
SQL = (
    "SELECT state, coalesce(operation, 'invalid') AS operation, count(*)::int AS n,"
    " coalesce(sum(length), 0)::float8 AS bytes"
    " FROM pg_aios WHERE pid <> pg_backend_pid() GROUP BY 1, 2"
)


def query(version_num: int) -> str | None:
    return SQL if version_num >= PG18 else None


@dataclass
class AiosSample:
    handles: Counter[tuple[str, str]] = field(default_factory=Counter)  # state, operation
    bytes: Counter[str] = field(default_factory=Counter)  # operation

    def per_operation(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for (_, operation), count in self.handles.items():
            total[operation] += count
        return total


def summarize(rows: list[Row]) -> AiosSample:
    sample = AiosSample()
    for row in rows:
        sample.handles[(row["state"], row["operation"])] += row["n"]
        sample.bytes[row["operation"]] += row["bytes"]
    return sample

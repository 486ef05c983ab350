"""pg_settings: the AIO-relevant settings, the io_method state set, and pending restarts.

A setting the server does not have (io_method before 18, io_combine_limit before 17) has no
row, so its metric is simply absent: no version gate is needed here.
"""

from __future__ import annotations

import re

from pg_aio_exporter.collectors.base import Row
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10

# setting -> metric. Memory settings are converted to bytes (the metric name says so).
SETTINGS = {
    "io_workers": "pg_settings_io_workers",
    "effective_io_concurrency": "pg_settings_effective_io_concurrency",
    "maintenance_io_concurrency": "pg_settings_maintenance_io_concurrency",
    "io_max_concurrency": "pg_settings_io_max_concurrency",
    "io_combine_limit": "pg_settings_io_combine_limit_bytes",
    "io_max_combine_limit": "pg_settings_io_max_combine_limit_bytes",
    "shared_buffers": "pg_settings_shared_buffers_bytes",
    "track_io_timing": "pg_settings_track_io_timing",
    "track_wal_io_timing": "pg_settings_track_wal_io_timing",
}
ENUM_SETTINGS = {"io_method": "pg_aio_io_method"}

_MEMORY_UNIT = re.compile(r"^(\d*)(B|kB|MB|GB|TB)$")
_UNIT_BYTES = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}

_NAMES = ", ".join(f"'{name}'" for name in sorted([*SETTINGS, *ENUM_SETTINGS]))
SQL = (
    "SELECT name, setting, unit, vartype, enumvals, pending_restart FROM pg_settings"
    f" WHERE name IN ({_NAMES}) OR pending_restart"
)


def setting_value(setting: str, unit: str | None, vartype: str) -> float:
    """A pg_settings value in base units: bools 0/1, memory in bytes."""
    if vartype == "bool":
        return 1.0 if setting == "on" else 0.0
    value = float(setting)
    match = _MEMORY_UNIT.match(unit or "")
    if match:
        value *= int(match.group(1) or 1) * _UNIT_BYTES[match.group(2)]
    return value


class SettingsCollector:
    name = "settings"
    since = PG10
    labels = ("name", *ENUM_SETTINGS)

    def query(self, version_num: int) -> str | None:
        return SQL

    def collect(self, rows: list[Row], out: MetricSet) -> None:
        for row in rows:
            name = row["name"]
            if row["pending_restart"]:
                out.gauge(
                    "pg_settings_pending_restart",
                    "1 where an edited setting awaits a server restart.",
                    1.0,
                    name=name,
                )
            if name in SETTINGS:
                out.gauge(
                    SETTINGS[name],
                    f"PostgreSQL setting {name} (base units).",
                    setting_value(row["setting"], row["unit"], row["vartype"]),
                )
            elif name in ENUM_SETTINGS:
                metric = ENUM_SETTINGS[name]
                for allowed in row["enumvals"] or [row["setting"]]:
                    out.gauge(
                        metric,
                        f"PostgreSQL setting {name}: 1 for the active value.",
                        1.0 if allowed == row["setting"] else 0.0,
                        **{name: allowed},
                    )

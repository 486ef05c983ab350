"""pg_settings: the AIO-relevant settings, the io_method state set, and pending restarts.

A setting the server does not have (io_method before 18, io_combine_limit before 17) has no
row, so its metric is simply absent: no version gate is needed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.versions import PG10


@dataclass(frozen=True)
class Setting:
    """One AIO-relevant setting. This list is the one the collector, the report, the dashboards
    (dashboards/generate.py) and the alert rules (alerts/alerting.py) read."""

    name: str  # in pg_settings
    unit: str  # "count", "bytes" (memory), "seconds" (time) or "bool" (0/1)
    # Its changes are annotated on the dashboards and alerted on (PgAioSettingChanged).
    watched: bool = True
    # It shapes how large reads get and how many are in flight: the report quotes it when
    # PostgreSQL 18's reads look smaller or slower than they should.
    combining: bool = False

    @property
    def metric(self) -> str:
        return f"pg_settings_{self.key}"

    @property
    def key(self) -> str:
        """The metric's name without pg_settings_: the report's key (bytes say so)."""
        return f"{self.name}_{self.unit}" if self.unit in ("bytes", "seconds") else self.name


AIO_SETTINGS = (
    Setting("io_workers", "count"),  # PostgreSQL 18: the pool's fixed size
    # PostgreSQL 19: the pool sizes itself between these two, launching a worker at most every
    # io_worker_launch_interval while work queues and stopping one idle for
    # io_worker_idle_timeout.
    Setting("io_min_workers", "count"),
    Setting("io_max_workers", "count"),
    Setting("io_worker_idle_timeout", "seconds"),
    Setting("io_worker_launch_interval", "seconds"),
    Setting("effective_io_concurrency", "count", combining=True),
    Setting("maintenance_io_concurrency", "count"),
    Setting("io_max_concurrency", "count", combining=True),
    Setting("io_combine_limit", "bytes", combining=True),
    Setting("io_max_combine_limit", "bytes"),
    Setting("shared_buffers", "bytes", combining=True),
    Setting("track_io_timing", "bool"),
    Setting("track_wal_io_timing", "bool"),  # the WAL write and sync figures need it
    # What one shared buffer hit counts: the hit ratio turns bytes read into blocks with it.
    # Fixed when PostgreSQL is built: nothing to watch.
    Setting("block_size", "bytes", watched=False),
)
ENUM_SETTINGS = {"io_method": "pg_aio_io_method"}

_UNIT = re.compile(r"^(\d*)(B|kB|MB|GB|TB|us|ms|s|min|h|d)$")
_UNIT_BASE = {  # pg_settings units in bytes or seconds
    "B": 1,
    "kB": 1024,
    "MB": 1024**2,
    "GB": 1024**3,
    "TB": 1024**4,
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1,
    "min": 60,
    "h": 3600,
    "d": 86400,
}


def by_name() -> dict[str, Setting]:
    """AIO_SETTINGS by pg_settings name, read when called (a test may extend the list)."""
    return {s.name: s for s in AIO_SETTINGS}


def sql() -> str:
    names = ", ".join(f"'{name}'" for name in sorted([*by_name(), *ENUM_SETTINGS]))
    return (
        "SELECT name, setting, unit, vartype, enumvals, pending_restart FROM pg_settings"
        f" WHERE name IN ({names}) OR pending_restart"
    )


@dataclass(frozen=True, slots=True)
class SettingRow:
    name: str
    setting: str
    unit: str | None
    vartype: str
    enumvals: list[str] | None
    pending_restart: bool


def setting_value(setting: str, unit: str | None, vartype: str) -> float:
    """A pg_settings value in base units: bools 0/1, memory in bytes, time in seconds."""
    if vartype == "bool":
        return 1.0 if setting == "on" else 0.0
    value = float(setting)
    match = _UNIT.match(unit or "")
    if match:
        value *= int(match.group(1) or 1) * _UNIT_BASE[match.group(2)]
    return value


@dataclass(frozen=True)
class SettingsFacts:
    """The view's snapshot: the AIO settings' values in base units, keyed like the gauges
    without their `pg_settings_` prefix (Setting.key), io_method with the values this build
    accepts (None before PostgreSQL 18), and the settings that wait for a restart."""

    values: dict[str, float]
    io_method: str | None
    io_methods: tuple[str, ...]
    pending_restart: tuple[str, ...]


def settings_facts(rows: list[SettingRow]) -> SettingsFacts:
    values: dict[str, float] = {}
    io_method: str | None = None
    io_methods: tuple[str, ...] = ()
    pending: list[str] = []
    aio_settings = by_name()
    for row in rows:
        name = row.name
        if row.pending_restart:
            pending.append(name)
        if name in aio_settings:
            key = aio_settings[name].key
            values[key] = setting_value(row.setting, row.unit, row.vartype)
        elif name == "io_method":
            io_method, io_methods = row.setting, tuple(row.enumvals or [row.setting])
    return SettingsFacts(values, io_method, io_methods, tuple(sorted(pending)))


class SettingsCollector:
    name = "settings"
    since = PG10
    labels = ("name", *ENUM_SETTINGS)
    # Each only where the server has the setting (io_min_workers: 19+), pending_restart only
    # while one waits.
    families = (
        *(s.metric for s in AIO_SETTINGS),
        *ENUM_SETTINGS.values(),
        "pg_settings_pending_restart",
    )
    row_type = SettingRow

    def query(self, version_num: int) -> str | None:
        return sql()

    def snapshot(self, rows: list[SettingRow]) -> SettingsFacts:
        return settings_facts(rows)

    def collect(self, rows: list[SettingRow], out: MetricSet) -> None:
        settings = by_name()
        for row in rows:
            name = row.name
            if row.pending_restart:
                out.gauge(
                    "pg_settings_pending_restart",
                    "1 where an edited setting awaits a server restart.",
                    1.0,
                    name=name,
                )
            if name in settings:
                out.gauge(
                    settings[name].metric,
                    f"PostgreSQL setting {name} (base units).",
                    setting_value(row.setting, row.unit, row.vartype),
                )
            elif name in ENUM_SETTINGS:
                metric = ENUM_SETTINGS[name]
                for allowed in row.enumvals or [row.setting]:
                    out.gauge(
                        metric,
                        f"PostgreSQL setting {name}: 1 for the active value.",
                        1.0 if allowed == row.setting else 0.0,
                        **{name: allowed},
                    )

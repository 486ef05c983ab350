"""The overview's first row: is the server reachable, which version and io_method, the AIO
settings, and the PgAio alerts firing."""

from __future__ import annotations

from grafana_foundation_sdk.builders import table
from grafana_foundation_sdk.models import dashboard as dm

from dashboards.figures import series
from dashboards.panels import DATASOURCE, Grid, Item, Q, Stat, place_all, targets

ON_OFF = {"0": ("off", "red"), "1": ("on", "green")}


def setting(title: str, metrics: tuple[str, ...], unit: str, description: str, width: int) -> Stat:
    """A stat of each target's value of a setting, the `metrics` joined by `or` (a setting
    renamed between versions)."""
    query = Q(" or ".join(map(series, metrics)), "{{target}}")
    return Stat(title, description, [query], unit, width, 4, {})


def firing_alerts() -> table.Panel:
    """The shipped PgAio* alerts firing now, as a table."""
    return (
        table.Panel()
        .title("Firing AIO alerts")
        .description(
            "The shipped PgAio* alerts firing now, from Prometheus' ALERTS series (every "
            "target, so that a filter never hides an alert). Empty is the normal state."
        )
        .datasource(DATASOURCE)
        .targets(
            targets(
                [
                    Q(
                        'ALERTS{alertname=~"PgAio.*", alertstate="firing"}',
                        instant=True,
                        table=True,
                    )
                ]
            )
        )
        .with_transformation(
            dm.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": {
                        "Time": True,
                        "Value": True,
                        "__name__": True,
                        "alertstate": True,
                    }
                },
            )
        )
        .no_value("no PgAio alert firing")
    )


# Each panel in the order it is placed: title, description, queries, unit, width, height,
# stat options; `setting` for a setting's plain value.
STATS = (
    Stat(
        "Server reachable",
        "pg_up: 1 when the exporter's last poll reached the server. When it is 0 the "
        "exporter publishes no other PostgreSQL series for that target, so the panels "
        "below go blank instead of showing stale data.",
        [Q(series("pg_up"), "{{target}}")],
        "none",
        4,
        4,
        {"mappings": {"0": ("DOWN", "red"), "1": ("UP", "green")}},
    ),
    Stat(
        "PostgreSQL version",
        "Server version per target (pg_server_info). AIO and the pg_aio_* sampler "
        "metrics need PostgreSQL 18; on 16 and 17 only pg_stat_io is available.",
        [Q(series("pg_server_info"), "{{version}}")],
        "none",
        4,
        4,
        {"text": True},
    ),
    Stat(
        "io_method",
        "Active io_method (pg_aio_io_method == 1): sync reads in the backend itself, "
        "worker hands reads to io worker processes, io_uring submits them to the kernel. "
        "Changing it needs a restart.",
        [Q(f"{series('pg_aio_io_method')} == 1", "{{io_method}}")],
        "none",
        4,
        4,
        {"text": True},
    ),
    setting(
        "io_workers (19: io_max_workers)",
        ("pg_settings_io_workers", "pg_settings_io_max_workers"),
        "none",
        "Configured io worker processes (io_method=worker only): io_workers on "
        "PostgreSQL 18; on 19 the pool sizes itself and this is its ceiling, "
        "io_max_workers. Compare with the running count and their utilisation "
        "below. Reload to change.",
        3,
    ),
    setting(
        "effective_io_concurrency",
        ("pg_settings_effective_io_concurrency",),
        "none",
        "How many reads a backend may have in flight ahead of need (read-ahead "
        "depth of sequential and bitmap scans).",
        3,
    ),
    setting(
        "io_combine_limit",
        ("pg_settings_io_combine_limit_bytes",),
        "bytes",
        "Largest single read PostgreSQL 18 builds by combining adjacent blocks. The "
        "average read size below approaches it when combining works.",
        3,
    ),
    Stat(
        "track_io_timing",
        "Without track_io_timing PostgreSQL measures no read time: every latency "
        "panel stays empty. Turn it on (ALTER SYSTEM, reload).",
        [Q(series("pg_settings_track_io_timing"), "{{target}}")],
        "none",
        3,
        4,
        {"mappings": ON_OFF, "steps": ((None, "red"), (1, "green"))},
    ),
    Stat(
        "Settings awaiting restart",
        "Number of settings edited but not active until a restart "
        "(pg_settings_pending_restart). 0 is the normal state.",
        [
            Q(
                f"sum by (target) ({series('pg_settings_pending_restart')}) "
                f"or on (target) sum by (target) (0 * {series('pg_up')})",
                "{{target}}",
            )
        ],
        "none",
        4,
        4,
        {"steps": ((None, "green"), (1, "orange"))},
    ),
    setting(
        "io_max_concurrency",
        ("pg_settings_io_max_concurrency",),
        "none",
        "Most AIO handles one backend may have in flight (-1 resolved to its value, "
        "sized from shared_buffers). Caps the in-flight depth below.",
        4,
    ),
    setting(
        "shared_buffers",
        ("pg_settings_shared_buffers_bytes",),
        "bytes",
        "Buffer cache size: reads not found here go to the OS or the disk and are "
        "the reads timed on this dashboard.",
        4,
    ),
)


def panels(g: Grid) -> list[Item]:
    """Server and AIO settings."""
    return [g.row("Server and AIO settings"), *place_all(g, STATS), g.place(firing_alerts(), 12, 4)]

"""The comparison's row of what ran when: server version and io_method over time, and the AIO
settings as steps (their changes are also annotations on every graph)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import statetimeline
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm

from dashboards.figures import series
from dashboards.panels import DATASOURCE, Grid, Item, Q, graph, targets


def panels(g: Grid) -> list[Item]:
    """Version and io_method timeline, AIO settings over time."""
    return [
        g.row("What ran when"),
        g.place(
            statetimeline.Panel()
            .title("PostgreSQL version and io_method")
            .description(
                "Which server version (pg_server_info) and which io_method (pg_aio_io_method "
                "== 1) each target ran over time. A change of either is also an annotation on "
                "every graph, so before/after is visible on all of them."
            )
            .datasource(DATASOURCE)
            .targets(
                targets(
                    [
                        Q(series("pg_server_info"), "{{target}} PostgreSQL {{version}}"),
                        Q(
                            f"{series('pg_aio_io_method')} == 1",
                            "{{target}} io_method {{io_method}}",
                        ),
                    ]
                )
            )
            .mappings(
                [
                    dm.ValueMap(
                        options={"1": dm.ValueMappingResult(text="active", color="green", index=0)}
                    )
                ]
            )
            .show_value(common.VisibilityMode.NEVER),
            12,
            6,
        ),
        g.place(
            graph(
                "AIO settings over time",
                "io_workers (19: io_min_workers, io_max_workers), effective_io_concurrency, "
                "maintenance_io_concurrency and io_max_concurrency as steps. Their changes are "
                "annotated on every graph: a latency shift that lines up with one is the "
                "setting's effect.",
                [
                    Q(series(f"pg_settings_{name}"), f"{{{{target}}}} {name}")
                    for name in (
                        "io_workers",
                        "io_min_workers",
                        "io_max_workers",
                        "effective_io_concurrency",
                        "maintenance_io_concurrency",
                        "io_max_concurrency",
                    )
                ],
                "none",
                steps=True,
            ),
            12,
            6,
        ),
    ]

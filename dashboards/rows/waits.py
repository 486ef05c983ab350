"""The overview's row of sampled sessions, io workers and in-flight I/O: the rules' sampler
formulas (alerts/promql.py active_sessions, io_worker_*, in_flight_depth)."""

from __future__ import annotations

from alerts import promql

from dashboards.figures import BACKEND, IO_WAITS, NO_IO_WORKERS, NOW, OVER, QUEUE_WAITS, series
from dashboards.panels import Graph, Grid, Item, Q, place_all

# The io worker settings show only where io_method is worker.
WORKER = 'io_method="worker"'


# Each panel in the order it is placed: title, description, queries, unit, width, height,
# graph options, text shown without data.
GRAPHS = (
    Graph(
        "Active sessions by wait event",
        f"Average active sessions in each wait event {OVER} "
        ""
        "(as pg_aio_target:active_sessions, per wait, "
        "sampled from pg_stat_activity; CPU = running). "
        "IO/AioIoCompletion: waiting for an io worker or the kernel to finish a read; "
        "IO/DataFileRead in a client backend: a synchronous read; "
        "LWLock/AioWorkerSubmissionQueue: contention on the io worker queue; "
        "io_uring: IO/AioIoUringExecution waits for the kernel to complete a read, "
        "IO/AioIoUringSubmit hands reads over (cached ones complete there), "
        "LWLock/AioUringCompletion waits for another backend's ring.",
        [
            Q(
                f"sum by (target, wait_event_type, wait_event) "
                f"({promql.active_sessions(NOW, BACKEND).expr})",
                "{{target}} {{wait_event_type}} / {{wait_event}}",
            )
        ],
        "none",
        12,
        9,
        {"stacked": True},
    ),
    Graph(
        "Sessions waiting on I/O by backend type",
        f"Average sessions in IO wait events, on the io worker submission queue or on "
        f"another backend's io_uring ring {OVER}, per backend type. io workers in "
        "IO/DataFileRead do the reads that client backends wait for in "
        "IO/AioIoCompletion; with io_uring the backends wait themselves, in "
        "IO/AioIoUringExecution. IO waits staying high after raising io_workers mean "
        "the storage, not the pool, is the bottleneck.",
        [
            Q(
                "sum by (target, backend_type, wait_event) "
                f"({promql.active_sessions(NOW, *waits).expr})",
                "{{target}} {{backend_type}} {{wait_event}}",
            )
            for waits in (IO_WAITS, QUEUE_WAITS)
        ],
        "none",
        12,
        9,
        {"stacked": True},
    ),
    Graph(
        "io worker utilisation",
        f"Share of samples {OVER} in which io workers were not idle "
        "(as pg_aio:io_worker_utilization). Near 100% together with "
        "AioWorkerSubmissionQueue waits: raise io_workers (PostgreSQL 18). On 19 the "
        "pool grows by itself while they are busy: only a pool pinned at "
        "io_max_workers while reads queue needs io_max_workers raised: the second "
        "line, running / io_max_workers (as pg_aio:io_worker_pool_share), at 100% "
        "while the first is high is that. Low while clients wait on "
        "AioIoCompletion: the storage is slow, not the pool.",
        [
            Q(promql.io_worker_utilization(NOW).expr, "{{target}}"),
            Q(
                promql.io_worker_pool_share(NOW).expr,
                "{{target}} running / io_max_workers (PostgreSQL 19)",
            ),
        ],
        "percentunit",
        8,
        8,
        {"maximum": 1, "threshold": 0.9},
        no_value=NO_IO_WORKERS,
    ),
    Graph(
        "io workers: running vs io_workers / io_max_workers",
        "io worker processes seen in the last sample (pg_aio_io_workers) and the "
        "settings (dashed), which only matter with io_method=worker. PostgreSQL 18: "
        "io_workers; fewer running than configured right after a reload is normal, "
        "for long it is not. PostgreSQL 19 sizes the pool itself between "
        "io_min_workers and io_max_workers: the pool pinned at io_max_workers while "
        "reads queue (utilisation near 100% or submission queue waits) is the one to "
        "grow: raise io_max_workers, and io_min_workers for bursty loads.",
        [
            Q(series("pg_aio_io_workers"), "{{target}} running"),
            *(
                Q(
                    f"{series(f'pg_settings_{name}')} and ignoring (io_method)"
                    f" ({NOW.series('pg_aio_io_method', WORKER)} == 1)",
                    f"{{{{target}}}} {name}",
                )
                for name in ("io_workers", "io_max_workers", "io_min_workers")
            ),
        ],
        "none",
        8,
        8,
        {"dashed_refs": ("B", "C", "D"), "steps": True},
        no_value=NO_IO_WORKERS,
    ),
    Graph(
        "In-flight AIO depth",
        f"Average AIO handles in each state {OVER} ("
        "sampled from pg_aios), stacked; dashed: the most seen in one sample during "
        "the last poll interval (pg_aio_in_flight_max). Depth near io_max_concurrency "
        "x sessions means backends queue I/O faster than storage completes it. On fast "
        "storage handles complete between samples and depth stays near 0.",
        [
            Q(promql.in_flight_depth(NOW).expr, "{{target}} {{state}} {{operation}}"),
            Q(series("pg_aio_in_flight_max"), "{{target}} max {{operation}}"),
        ],
        "none",
        8,
        8,
        {"stacked": True, "dashed_refs": ("B",)},
    ),
)


def panels(g: Grid) -> list[Item]:
    """Sessions by wait event, io waits by backend type, io workers, in-flight depth."""
    return [g.row("Sessions waiting, io workers, in-flight I/O"), *place_all(g, GRAPHS)]

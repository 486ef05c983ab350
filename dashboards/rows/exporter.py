"""The overview's last row: the exporter's own health (poll and sample durations, errors,
overruns, stalls, the last successful poll)."""

from __future__ import annotations

from dashboards.figures import SELF
from dashboards.panels import Grid, Item, Q, graph, single


def p99(histogram: str, *by: str) -> str:
    """The 99th percentile of the exporter's `histogram` per target and `by`."""
    buckets = SELF.rate(f"{histogram}_bucket")
    return f"histogram_quantile(0.99, sum by ({', '.join(('target', *by, 'le'))}) ({buckets}))"


def panels(g: Grid) -> list[Item]:
    """Poll and sample duration, poll errors and overruns, time since the last poll."""
    return [
        g.row("Exporter"),
        g.place(
            graph(
                "Poll and sample duration (p99)",
                "99th percentile of the exporter's poll round trip per collector and of one "
                "sampler round trip. A poll near the poll interval, or a sample near the sample "
                "interval, means the server answers slowly: expect gaps and overruns.",
                [
                    Q(
                        p99("pg_aio_exporter_poll_duration_seconds", "collector"),
                        "{{target}} poll {{collector}}",
                    ),
                    Q(p99("pg_aio_exporter_sample_duration_seconds"), "{{target}} sample"),
                ],
                "s",
            ),
            9,
            7,
        ),
        g.place(
            graph(
                "Poll errors and sample overruns",
                "Failed polls per second by collector and kind (the runbook of "
                "PgAioPollsFailing says what each kind means), samples skipped because the "
                "previous one still ran (overruns: the server answers slowly) and samples "
                "skipped because the exporter woke late (stalls: it lacks CPU). All are 0 on a "
                "healthy target.",
                [
                    Q(
                        "sum by (target, collector, kind) "
                        f"({SELF.rate('pg_aio_exporter_poll_errors_total')})",
                        "{{target}} {{collector}} {{kind}}",
                    ),
                    Q(
                        SELF.rate("pg_aio_exporter_sample_overruns_total"),
                        "{{target}} sample overruns",
                    ),
                    Q(
                        SELF.rate("pg_aio_exporter_sample_stalls_total"),
                        "{{target}} sample stalls",
                    ),
                ],
                "reqps",
            ),
            9,
            7,
        ),
        g.place(
            single(
                "Since last successful poll",
                "Seconds since the exporter last polled every collector successfully. It "
                "should stay below two poll intervals.",
                [
                    Q(
                        "time() - "
                        + SELF.series("pg_aio_exporter_last_poll_success_timestamp_seconds"),
                        "{{target}}",
                    )
                ],
                "s",
                steps=((None, "green"), (90, "orange"), (300, "red")),
            ),
            6,
            7,
        ),
    ]

"""The alerting rules, by name (ALERTS): each alert's expression over the recording rules
(recording.py) or the exporter's series, its summary and description, and the condition that
docs/alerts.md lists, with the thresholds filled in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from alerts.promql import (
    CLIENT_BACKEND,
    Scope,
    buffer_writes,
    on_target,
    value_span,
)
from alerts.recording import (
    READS,
    REGIME_LABELS,
    WRITES,
    Side,
    guard_words,
    indent,
    interval_series,
    rec,
    regime_series,
    series,
    slower_than_page_cache,
    traffic_guard,
)
from pg_aio_exporter.collectors import settings as aio_settings

if TYPE_CHECKING:
    # For the annotations only: params.py checks the parameters against ALERTS.
    from alerts.params import Params


@dataclass(frozen=True)
class Alert:
    expr: str
    summary: str
    description: str
    condition: str  # for docs/alerts.md, with the thresholds filled in


def mostly_above(params: Params, name: str, what: str) -> str:
    """The intervals of `what` (read_latency or wal_sync_latency) were above the limit for at
    least min_share of the alert's window and in one of its recent_window at least: quick on
    an incident that collapses throughput, deaf to one slow interval, and over soon after the
    incident ends."""
    p = params["alerts"][name]
    above = interval_series(params, f"{what}_above_limit")
    return (
        f"avg_over_time({above}[{p['window']}]) >= {p['min_share']}\n"
        f"and\nmax_over_time({above}[{p['recent_window']}]) == 1"
    )


def share_words(params: Params, name: str) -> str:
    p = params["alerts"][name]
    return (
        f"in at least {p['min_share']:g} of the scrape intervals with traffic to judge of the "
        f"last {p['window']} (each interval counts the same, whatever its throughput) and in "
        f"one of the last {p['recent_window']}"
    )


def latency_vs_baseline(params: Params, side: Side) -> str:
    """Per-byte read (or write) latency divided by the target's own baseline (a ratio, 1 = as
    usual)."""
    regression = params["alerts"][side.regression]
    # Within the regime (major version and io_method): after an upgrade or a switch of
    # io_method, the series of the new regime starts with no past, so 18 is never held against
    # 17's wait per byte (regime_rules).
    per_byte = regime_series(params, side.what)
    baseline = (
        f"quantile_over_time({regression['baseline_quantile']}, "
        f"{per_byte}[{regression['baseline_window']}])"
    )
    return (
        f"max without ({', '.join(REGIME_LABELS)}) (\n"
        f"{indent(per_byte)}\n  /\n  ({baseline} > 0)\n)"
    )


def baseline_words(params: Params, side: Side) -> str:
    regression = params["alerts"][side.regression]
    quantile = regression["baseline_quantile"]
    what = "median" if quantile == 0.5 else f"{quantile} quantile"
    return (
        f"its own {what} over {regression['baseline_window']} at the same major version and"
        " io_method"
    )


def latency_regression(side: Side) -> Callable[[Params, Params], Alert]:
    """The regression alert of a side: its time per byte above factor x its own baseline."""

    def build(params: Params, p: Params) -> Alert:
        baseline = baseline_words(params, side)
        return Alert(
            expr=f"(\n{indent(latency_vs_baseline(params, side))}\n) > {p['factor']}\nand\n"
            + "\nand\n".join(side.guards(params)),
            summary=f"{side.what.capitalize()} latency per byte on {{{{ $labels.target }}}} is "
            "{{ $value | humanize }}x its usual level.",
            description=f"{side.figure} per byte over the last {params['alert_window']} is "
            f"{{{{ $value | humanize }}}} times {baseline} (threshold {p['factor']}x)"
            f"{side.cause}",
            condition=f"{side.measure} per byte ({params['alert_window']}) > {p['factor']} x "
            f"{baseline}, {side.guard_words(params)}",
        )

    return build


def class_words(params: Params, what: str) -> str:
    """The classes' values, for the descriptions and docs/alerts.md."""
    default = params["default_storage_class"]
    values = ", ".join(
        f"{name} {values[what]:g}" + (" (default)" if name == default else "")
        for name, values in params["storage_classes"].items()
    )
    return f"the storage class's {what} ({values})"


def read_latency_high(params: Params, p: Params) -> Alert:
    # Per operation against an allowance that grows with the read size: one 8 kB read and one
    # 1 MiB combined read are judged each by what healthy storage of the target's class needs.
    recent = p["recent_window"]
    return Alert(
        expr=f"max_over_time({interval_series(params, 'read_latency_seconds')}[{recent}])\n"
        f"and\n{mostly_above(params, 'PgAioReadLatencyHigh', 'read_latency')}",
        summary="Reads on {{ $labels.target }} wait up to {{ $value | humanizeDuration }} each.",
        description="Wait time per read operation was above what healthy storage of the "
        "target's storage class (pg_aio_storage_class_info; "
        f"{params['default_storage_class']} unless configured) needs for reads of its size "
        f"{share_words(params, 'PgAioReadLatencyHigh')}; up to {{{{ $value | "
        f"humanizeDuration }}}} per read in a scrape interval of the last {recent}: the volume "
        "is throttled or overloaded, or slower than its class.",
        condition=f"read wait per operation of a scrape interval > "
        f"{class_words(params, 'seconds_per_read')} + read size / "
        f"{class_words(params, 'bytes_per_second')}, "
        f"{share_words(params, 'PgAioReadLatencyHigh')}; an interval counts at "
        f">= {params['min_read_ops_per_second']} reads/s",
    )


VOLUME_LIMITS = {
    "read_ops_per_second": "pg_aio_storage_volume_max_operations_per_second",
    "read_bytes_per_second": "pg_aio_storage_volume_max_bytes_per_second",
}


def read_wait_share(params: Params) -> str:
    """Share of the sessions' active time (promql.ACTIVE) spent waiting on reads."""
    return (
        f"{rec(params, 'pg_aio_target:read_wait_sessions')}\n/\n"
        f"{rec(params, 'pg_aio_target:active_sessions')}"
    )


def slow_reads(params: Params, p: Params) -> str:
    """Reads slow for the storage class, slower than the target's own baseline, or at the
    volume's configured limits: any of them."""
    at_limit = [
        f"{rec(params, f'pg_aio_target:{rate}')}\n  >= {on_target('group_left ()')}\n"
        f"  {p['volume_limit_share']} * {series(params, limit)}"
        for rate, limit in VOLUME_LIMITS.items()
    ]
    return "\nor\n".join(
        [
            f"(\n{indent(latency_vs_baseline(params, READS))}\n) > {p['latency_factor']}",
            f"(\n{indent(mostly_above(params, 'PgAioReadLatencyHigh', 'read_latency'))}\n)",
            *at_limit,
        ]
    )


def storage_saturated(params: Params, p: Params) -> Alert:
    return Alert(
        expr=f"(\n{indent(read_wait_share(params))}\n) > {p['min_read_wait_share']}\n"
        f"and\n(\n{indent(slow_reads(params, p))}\n)\nand\n{traffic_guard(params)}",
        summary="Storage of {{ $labels.target }} is saturated: reads take "
        "{{ $value | humanizePercentage }} of the sessions' active time.",
        description="Sessions spent {{ $value | humanizePercentage }} of their active time "
        f"waiting on reads ({p['io_wait_events']}) over the last {params['alert_window']}, "
        "while the reads are slow for the target's storage class, slower per byte than "
        f"{p['latency_factor']}x {baseline_words(params, READS)}, or at the volume's configured "
        "limits: storage sets the pace.",
        condition=f"share of active time (io workers and sleeps excluded) waiting on "
        f"IO/{{{p['io_wait_events']}}} > {p['min_read_wait_share']}, and reads slow: wait "
        "per read above PgAioReadLatencyHigh's limit, or wait per byte > "
        f"{p['latency_factor']} x {baseline_words(params, READS)}, or reads/s or bytes/s >= "
        f"{p['volume_limit_share']} x the volume's configured limits; {guard_words(params)}",
    )


def indented(expr: str) -> str:
    """`expr`'s lines after the first two spaces further in (it goes inside parentheses)."""
    return expr.replace("\n", "\n  ")


def worker_pool_saturated(params: Params, p: Params) -> Alert:
    utilization = rec(params, "pg_aio:io_worker_utilization")
    # Busy, and I/Os waiting for a worker: one read stream keeps a pool as busy with nothing
    # queued, and more workers would not read it faster (docs/alerts.md).
    busy = (
        f"{utilization} > {p['max_utilization']}\n  and\n  "
        f"{rec(params, 'pg_aio:io_worker_queued_ios')} >= {p['min_queued_ios']}"
    )
    queueing = (
        f"{rec(params, 'pg_aio_target:submission_queue_sessions')}\n"
        f"  > {p['max_submission_queue_sessions']}"
    )
    # PostgreSQL 19 grows the pool by itself while work queues: a busy pool below
    # io_max_workers is one that is growing. Its signal is the pool pinned at the ceiling
    # while reads queue; the two PostgreSQL 18 signals stay for servers without io_max_workers.
    sized_by_hand = f"unless\n  {series(params, 'pg_settings_io_max_workers')}"
    pinned = (
        f"{rec(params, 'pg_aio:io_worker_pool_share')} >= {p['min_pool_share']}\n"
        f"  and\n  (\n    {indented(busy)}\n    or\n    {indented(queueing)}\n  )"
    )
    # One alert, several symptoms; the `signal` label tells them apart in the notification.
    return Alert(
        expr=f"label_replace(\n  {busy}\n  {sized_by_hand},\n"
        '  "signal", "utilization", "", ""\n)\nor\nlabel_replace(\n'
        f"  {queueing}\n  {sized_by_hand},\n"
        '  "signal", "submission_queue", "", ""\n)\nor\nlabel_replace(\n'
        f"  {pinned},\n"
        '  "signal", "pool_pinned", "", ""\n)',
        summary="The io worker pool of {{ $labels.target }} is saturated.",
        description='{{ if eq $labels.signal "utilization" }}io workers are busy '
        "{{ $value | humanizePercentage }} of the time while I/Os wait for a worker (at least "
        f"{p['min_queued_ios']} on average)"
        '{{ else if eq $labels.signal "pool_pinned" }}the pool is pinned at io_max_workers '
        "({{ $value | humanizePercentage }} of it running on average) while reads queue "
        f"(io workers busy above {p['max_utilization']} with I/Os waiting for one, or sessions "
        "waiting for the submission "
        "queue): raise io_max_workers"
        '{{ else }}{{ printf "%.2f" $value }} sessions on average wait for the io worker '
        "submission queue (LWLock AioWorkerSubmissionQueue){{ end }} over the last "
        f"{params['alert_window']}.",
        condition=f"PostgreSQL 18: io worker utilization > {p['max_utilization']} while >= "
        f"{p['min_queued_ios']} I/Os on average wait for a worker (pg_aios SUBMITTED beyond the "
        "busy workers), or average "
        f"sessions waiting on LWLock/AioWorkerSubmissionQueue > "
        f"{p['max_submission_queue_sessions']}; PostgreSQL 19 (io_max_workers): pool pinned at "
        f"io_max_workers (average running / io_max_workers >= {p['min_pool_share']}) while reads "
        "queue (either of those)",
    )


def wal_sync_latency_high(params: Params, p: Params) -> Alert:
    latency = interval_series(params, "wal_sync_latency_seconds")
    name = "PgAioWalSyncLatencyHigh"
    return Alert(
        expr=f"max_over_time({latency}[{p['recent_window']}])\n"
        f"and\n{mostly_above(params, name, 'wal_sync_latency')}",
        summary="WAL syncs on {{ $labels.target }} take up to {{ $value | humanizeDuration }} "
        "each.",
        description="Time per WAL sync was above what healthy storage of the target's storage "
        f"class takes {share_words(params, name)}; up to {{{{ $value | humanizeDuration }}}} "
        f"per sync in a scrape interval of the last {p['recent_window']}: every commit waits "
        "for one, so commits are that much slower. The volume's write latency or a write burst "
        "(checkpoint) holds them up.",
        condition=f"time per WAL sync of a scrape interval > "
        f"{class_words(params, 'seconds_per_sync')} s, {share_words(params, name)}; an "
        f"interval counts at >= {p['min_syncs_per_second']} syncs/s (needs track_wal_io_timing)",
    )


def backends_writing_buffers(params: Params, p: Params) -> Alert:
    share = rec(params, "pg_aio_target:backend_write_share")
    # The clients' own rate, from the same rows the share counts.
    scope = Scope(params["selector"], params["alert_window"])
    clients = buffer_writes(scope, CLIENT_BACKEND)
    return Alert(
        expr=f"{share} > {p['max_backend_share']}\nand\n{clients} >= "
        f"{p['min_backend_writes_per_second']}",
        summary="Client backends on {{ $labels.target }} write "
        "{{ $value | humanizePercentage }} of the dirty buffers themselves.",
        description="Over the last "
        f"{params['alert_window']} client backends did {{{{ $value | humanizePercentage }}}} "
        "of the shared buffer writes: they had to clean buffers before using them, because "
        "the background writer did not get ahead of them. Queries pay for those writes.",
        condition=f"client backends' share of shared buffer writes ({params['alert_window']}) > "
        f"{p['max_backend_share']}, at >= {p['min_backend_writes_per_second']} of their "
        "writes/s",
    )


def storage_saturated_by_writes(params: Params, p: Params) -> Alert:
    waiting = rec(params, "pg_aio_target:write_wait_sessions")
    slow_sync = (
        f"(\n{indent(mostly_above(params, 'PgAioWalSyncLatencyHigh', 'wal_sync_latency'), 4)}\n  )"
    )
    floor = params["alerts"]["PgAioWriteLatencyRegression"]["min_seconds_per_write"]
    # Without track_wal_io_timing (off by default) the time per WAL sync is known only from the
    # samples (wal_sync_sampled); where the WAL is timed its measured latency judges instead.
    min_syncs = params["alerts"]["PgAioWalSyncLatencyHigh"]["min_syncs_per_second"]
    # Time-weighted as the timed signal: after an incident that collapses the syncs (fsync
    # +10 ms: 10x fewer), a window's ratio of sums would be the healthy minutes' for minutes.
    sampled = (
        f"(\n{indent(mostly_above(params, 'PgAioWalSyncLatencyHigh', 'wal_sync_sampled'), 6)}"
        f"\n    )\n    unless {on_target()}\n"
        f"    {series(params, 'pg_settings_track_wal_io_timing')} == 1"
    )
    # One alert, three symptoms of slow writes; `signal` says which. The value is the sessions
    # waiting: the symptoms (x 0) lend their labels, the waiting sessions their value.
    return Alert(
        expr=f'(\n  label_replace({slow_sync}, "signal", "wal_sync", "", "")\n'
        f"  or\n  label_replace(\n    (\n{indent(latency_vs_baseline(params, WRITES), 6)}\n    )"
        f" > {p['latency_factor']}\n    and\n    {slower_than_page_cache(params)},\n"
        '    "signal", "write_latency", "", ""\n  )\n'
        f'  or\n  label_replace(\n    {sampled},\n    "signal", "wal_sync_sampled", "", ""\n  )\n'
        ") * 0\n"
        f"+ {on_target('group_left ()')}\n({waiting} > {p['min_write_wait_sessions']})",
        summary='Storage of {{ $labels.target }} is saturated by writes: {{ printf "%.1f" '
        "$value }} sessions waiting on writes.",
        description='On average {{ printf "%.1f" $value }} sessions wait on writes (IO/'
        f"{{{p['write_wait_events']}|{p['wal_sync_events']}|{p['wal_wait_events']}}}, "
        f"LWLock/{{{p['write_lock_events']}}}) over the last "
        f"{params['alert_window']}, while "
        '{{ if eq $labels.signal "wal_sync" }}WAL syncs take longer than '
        "the storage class's seconds_per_sync"
        '{{ else if eq $labels.signal "wal_sync_sampled" }}WAL syncs take longer than the '
        "storage class's seconds_per_sync by the samples (processes in IO/"
        f"{{{p['wal_sync_events']}}} / WAL syncs per second; track_wal_io_timing is off)"
        "{{ else }}write time per byte is above "
        f"{p['latency_factor']}x "
        f"{baseline_words(params, WRITES)}{{{{ end }}}}. Reads on the same volume slow down with"
        " them.",
        condition=f"average sessions waiting on writes > {p['min_write_wait_sessions']} and "
        f"(time per WAL sync > {class_words(params, 'seconds_per_sync')} s, or buffer write time"
        " per byte > "
        f"{p['latency_factor']} x {baseline_words(params, WRITES)} at > {floor} s per write, or"
        " with track_wal_io_timing off: processes sampled in "
        f"IO/{{{p['wal_sync_events']}}} / WAL syncs per second > the storage class's "
        f"seconds_per_sync {share_words(params, 'PgAioWalSyncLatencyHigh')}, an interval "
        f"counting at >= {min_syncs} syncs/s)",
    )


def track_io_timing_off(params: Params, p: Params) -> Alert:
    return Alert(
        expr=f"{series(params, 'pg_settings_track_io_timing')} == 0",
        summary="track_io_timing is off on {{ $labels.target }}: read latency is not measured.",
        description="With track_io_timing off PostgreSQL records no read time: every latency "
        "panel and alert of pg_aio_exporter is blind for this target.",
        condition="track_io_timing = off",
    )


def track_wal_io_timing_off(params: Params, p: Params) -> Alert:
    syncing = rec(params, "pg_aio_target:wal_syncs_per_second")
    return Alert(
        expr=f"{series(params, 'pg_settings_track_wal_io_timing')} == 0\n"
        f"and {on_target()}\n{syncing} > 0",
        summary="track_wal_io_timing is off on {{ $labels.target }}: WAL sync latency is not "
        "measured.",
        description="The server syncs WAL, but with track_wal_io_timing off (PostgreSQL's "
        "default) it records no WAL write or sync time: PgAioWalSyncLatencyHigh and the "
        "wal_sync signal of PgAioStorageSaturatedByWrites have no sample for this target, and "
        "the time per sync is only estimated from the samples (the wal_sync_sampled signal).",
        condition=f"track_wal_io_timing = off while WAL syncs/s ({params['alert_window']}) > 0",
    )


def setting_changed(params: Params, p: Params) -> Alert:
    window = p["window"]
    # The package's one list of AIO settings (collectors/settings.py), as the dashboards'.
    watched = [s for s in aio_settings.AIO_SETTINGS if s.watched]

    def changed(setting: aio_settings.Setting) -> str:
        metric = series(params, setting.metric)
        name = setting.name
        return (
            f"label_replace(\n  {metric} and ({value_span(metric, window)}) > 0,\n"
            f'  "setting", "{name}", "", ""\n)'
        )

    # The state set's active series carries the new io_method in its label.
    method = series(params, "pg_aio_io_method")
    io_method = (
        f"label_replace(\n  {method} == 1 and ({value_span(method, window)}) > 0,\n"
        '  "setting", "io_method", "", ""\n)'
    )
    return Alert(
        expr="\nor\n".join([io_method, *(changed(s) for s in watched)]),
        summary="{{ $labels.setting }} changed on {{ $labels.target }}.",
        description="{{ $labels.setting }} changed within the last "
        f"{window}; it is now "
        '{{ if eq $labels.setting "io_method" }}{{ $labels.io_method }}'
        "{{ else }}{{ $value }}{{ end }}. Compare read latency and throughput before and "
        "after the change.",
        condition=f"io_method or one of {', '.join(s.key for s in watched)} changed in the"
        f" last {window}",
    )


def pending_restart(params: Params, p: Params) -> Alert:
    return Alert(
        expr=f"{series(params, 'pg_settings_pending_restart')} == 1",
        summary="{{ $labels.name }} on {{ $labels.target }} waits for a restart.",
        description="{{ $labels.name }} was changed in the configuration but the running "
        "server still uses the old value; the next restart, planned or not, applies it.",
        condition="a setting edited but not yet applied (pg_settings.pending_restart)",
    )


def stats_reset(params: Params, p: Params) -> Alert:
    metric = series(params, "pg_stat_io_stats_reset_timestamp_seconds")
    return Alert(
        expr=f"({value_span(metric, p['window'])}) > 0",
        summary="pg_stat_io statistics of {{ $labels.target }} were reset.",
        description="pg_stat_io was reset (pg_stat_reset_shared('io') or crash recovery) "
        f"within the last {p['window']}. Rates and the shipped rules cope; tools reading the "
        "cumulative view directly lost their history.",
        condition=f"pg_stat_io stats_reset changed in the last {p['window']}",
    )


def target_down(params: Params, p: Params) -> Alert:
    return Alert(
        expr=f"{series(params, 'pg_up')} == 0",
        summary="pg_aio_exporter cannot reach {{ $labels.target }}.",
        description="The last polls of {{ $labels.target }} failed (pg_up 0); see "
        "pg_aio_exporter_poll_errors_total{kind} and the exporter log for why.",
        condition="pg_up == 0",
    )


def target_stale(params: Params, p: Params) -> Alert:
    # The timestamp is the exporter's own series, kept when a target's series age out: it
    # stays to be read when pg_up went absent (a hung worker) or froze at 1 (a dead render
    # task), where PgAioTargetDown cannot fire. Compared with itself `window` ago rather than
    # with time(): the same answer while scrapes go on, and no alert for a series younger
    # than the window (a new exporter).
    last = series(params, "pg_aio_exporter_last_poll_success_timestamp_seconds")
    unchanged = f"no fully successful poll in {p['window']}"
    return Alert(
        expr=f"{last} == {last} offset {p['window']}",
        summary="pg_aio_exporter has no current poll of {{ $labels.target }}.",
        description="{{ $labels.target }}: "
        + unchanged
        + ", whatever pg_up says: its series are frozen or gone (a wedged exporter: see its"
        " /healthz) or its polls keep failing.",
        condition=unchanged,
    )


def exporter_down(params: Params, p: Params) -> Alert:
    return Alert(
        expr=f"up{{{params['exporter_up_selector']}}} == 0",
        summary="Prometheus cannot scrape pg_aio_exporter at {{ $labels.instance }}.",
        description="Scrapes of {{ $labels.instance }} fail: no AIO metric and no other "
        "pg_aio alert works for the targets it serves.",
        condition=f"up{{{params['exporter_up_selector']}}} == 0",
    )


def polls_failing(params: Params, p: Params) -> Alert:
    # Connection failures make pg_up 0 and are PgAioTargetDown's: this one is for a collector
    # failing on a reachable server (missing privilege, timeout, query error).
    errors = series(params, "pg_aio_exporter_poll_errors_total", 'collector!="connection"')
    return Alert(
        expr=f"increase({errors}[{p['window']}]) > 0",
        summary="The {{ $labels.collector }} collector fails on {{ $labels.target }} "
        "({{ $labels.kind }}).",
        description="{{ $labels.collector }} polls of {{ $labels.target }} fail with "
        f"{{{{ $labels.kind }}}} errors ({{{{ $value | humanize }}}} in the last {p['window']}): "
        "its metrics are missing.",
        condition=f"a collector other than the connection fails in every {p['window']} window",
    )


def sampler_overrunning(params: Params, p: Params) -> Alert:
    overruns = f"rate({series(params, 'pg_aio_exporter_sample_overruns_total')}[{p['window']}])"
    samples = f"rate({series(params, 'pg_aio_sampler_samples_total')}[{p['window']}])"
    return Alert(
        expr=f"{overruns}\n/\n({overruns} + {samples})\n> {p['max_overrun_ratio']}",
        summary="The sampler of {{ $labels.target }} skips {{ $value | humanizePercentage }} "
        "of its samples.",
        description="Sampling pg_stat_activity and pg_aios takes longer than the sample "
        "interval: {{ $value | humanizePercentage }} of ticks were skipped over the last "
        f"{p['window']}. Wait-event and io worker figures get coarse.",
        condition=f"skipped samples / sample ticks ({p['window']}) > {p['max_overrun_ratio']}",
    )


ALERTS: dict[str, Callable[[Params, Params], Alert]] = {
    "PgAioReadLatencyRegression": latency_regression(READS),
    "PgAioReadLatencyHigh": read_latency_high,
    "PgAioStorageSaturated": storage_saturated,
    "PgAioWorkerPoolSaturated": worker_pool_saturated,
    "PgAioWalSyncLatencyHigh": wal_sync_latency_high,
    "PgAioWriteLatencyRegression": latency_regression(WRITES),
    "PgAioBackendsWritingBuffers": backends_writing_buffers,
    "PgAioStorageSaturatedByWrites": storage_saturated_by_writes,
    "PgAioTrackIoTimingOff": track_io_timing_off,
    "PgAioTrackWalIoTimingOff": track_wal_io_timing_off,
    "PgAioSettingChanged": setting_changed,
    "PgAioPendingRestart": pending_restart,
    "PgAioStatsReset": stats_reset,
    "PgAioTargetDown": target_down,
    "PgAioTargetStale": target_stale,
    "PgAioExporterDown": exporter_down,
    "PgAioPollsFailing": polls_failing,
    "PgAioSamplerOverrunning": sampler_overrunning,
}


def alerts(params: Params) -> dict[str, Alert]:
    return {name: build(params, params["alerts"][name]) for name, build in ALERTS.items()}

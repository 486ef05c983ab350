"""The write side's findings (what the write alerts make of the window) and the write sentence
of the storage verdict: the twin of reads.py's read checks, judging written.Writes with the
same shape (report/side.py) and the write side's own baseline settings; registry.py runs them
after the read checks, on the write figures `judged` gives. The write side's JSON, comparison
and text are in document.py, compare.py and text.py beside the read side's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pg_aio_exporter.report import units
from pg_aio_exporter.report.findings.context import Context, Finding, class_words
from pg_aio_exporter.report.findings.intervals import SlowIntervals, sync_intervals
from pg_aio_exporter.report.side import Regression, against, interval_json
from pg_aio_exporter.report.summary import Activity
from pg_aio_exporter.report.written import Writes
from pg_aio_exporter.thresholds import WriteThresholds
from pg_aio_exporter.vocabulary import CLIENT_BACKEND as CLIENT
from pg_aio_exporter.vocabulary import IO_WORKER


def write_wait_sessions(activity: Activity, t: WriteThresholds) -> dict[str, float]:
    """Average sessions (io workers aside) in each write wait: IO write events (the data
    files' and the WAL's) and the LWLock queue behind a WAL flush, keyed type/event."""
    return _sessions_in(activity, t.io_write_events, t.write_lock_events)


def _sessions_in(
    activity: Activity, io_events: tuple[str, ...], lock_events: tuple[str, ...]
) -> dict[str, float]:
    """Average sessions (io workers aside) in each of these waits: IO events `io_events` and
    LWLock waits `lock_events`, as this server names them (thresholds.yaml lists every
    version's names), keyed type/event."""
    server = activity.wait_events
    named = server.named(io_events, "IO") | server.named(lock_events, "LWLock")
    out: dict[str, float] = {}
    for key in activity.wait_samples:
        backend_type, wait_type, wait = key
        if backend_type != IO_WORKER and (wait_type, wait) in named:
            name = f"{wait_type}/{wait}"
            out[name] = out.get(name, 0.0) + activity.sessions(key)
    return out


# --- findings ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """The write figures of a window, as the findings read them."""

    writes: Writes
    t: WriteThresholds
    waits: dict[str, float]
    syncing: float  # average processes in a WAL sync (sampled), io workers aside

    @property
    def waiting(self) -> float:
        return sum(self.waits.values())

    def sampled_sync_latency(self) -> float | None:
        """Time per WAL sync from the samples where the WAL is not timed: the processes in a
        WAL sync over the syncs per second (Little's law; PgAioStorageSaturatedByWrites'
        wal_sync_sampled signal). Where the WAL is timed its measured latency judges."""
        wal = self.writes.wal
        if wal is None or self.writes.wal_timed or self.writes.wal_seconds <= 0:
            return None
        per_second = self.writes.wal_per_second(wal.syncs)
        if per_second < self.t.min_syncs_per_second:
            return None
        return self.syncing / per_second

    def sync_latency(self) -> float | None:
        """Time per WAL sync over the window when enough syncs were counted to judge it."""
        wal, figures = self.writes.wal, self.writes.wal_figures()
        if wal is None or figures is None or figures.sync_latency_seconds is None:
            return None
        if self.writes.wal_per_second(wal.syncs) < self.t.min_syncs_per_second:
            return None
        return figures.sync_latency_seconds

    def write_per_byte(self) -> float | None:
        """Write time per byte when enough writes were counted, and slow enough, to judge it:
        writes at page-cache speed are CPU time, whatever their ratio to a baseline."""
        write = self.writes.figures().get("write")
        if write is None or self.writes.per_second(self.writes.total.writes) < (
            self.t.min_write_ops_per_second
        ):
            return None
        if write.latency_seconds is None or write.latency_seconds <= self.t.min_seconds_per_write:
            return None
        return write.seconds_per_byte


def slow_syncs(ctx: Context, j: Judged) -> tuple[bool, SlowIntervals | None]:
    """WAL syncs above the storage class's seconds_per_sync as PgAioWalSyncLatencyHigh judges
    them: in at least min_share of the polls with syncs (findings/intervals.py); by the
    window's average only where the window has no per-poll figures. With the polls' share
    found, or None."""
    intervals = sync_intervals(ctx, j.t.max_seconds_per_sync, j.t.min_syncs_per_second)
    if intervals is not None:
        return intervals.share >= j.t.min_slow_sync_share, intervals
    latency = j.sync_latency()
    return latency is not None and latency > j.t.max_seconds_per_sync, None


def judged(ctx: Context) -> Judged | None:
    """None when the write side was not measured (no write counts, or thresholds without the
    write alerts): then no write check runs."""
    writes, t = ctx.summary.writes, ctx.thresholds.writes
    if writes is None or t is None:
        return None
    activity = ctx.summary.activity
    syncing = _sessions_in(activity, t.wal_sync_events, ())
    return Judged(writes, t, write_wait_sessions(activity, t), sum(syncing.values()))


def write_regression(ctx: Context, j: Judged) -> Regression | None:
    """Buffer write time per byte against the baseline's, when both were judged."""
    base = ctx.baseline.writes if ctx.baseline is not None else None
    if base is None:
        return None
    return against(
        j.write_per_byte(), base.seconds_per_byte(), j.writes.estimate(), base.estimate()
    )


def _checkpoint_advice(writes: Writes) -> str:
    advice = (
        "Spread the checkpointer's writes: checkpoint_completion_target = 0.9 and a max_wal_size"
        " large enough that checkpoints come from checkpoint_timeout, not from WAL volume"
        " (pg_stat_checkpointer.num_requested low). Write less WAL: wal_compression = lz4 (or"
        " zstd) shrinks the full page images written after each checkpoint"
    )
    if writes.wal is not None and writes.wal.fpi > 0 and writes.wal.records > 0:
        advice += (
            f" ({units.percent(writes.wal.fpi / writes.wal.records)} of this window's WAL"
            " records carried one)"
        )
    advice += "."
    done = writes.checkpoints
    if done is not None and done.requested > 0:
        advice += (
            f" {units.count(done.requested)} of the window's"
            f" {units.count(done.requested + done.timed)} checkpoints were requested, not timed:"
            " WAL reached max_wal_size (or a CHECKPOINT command ran); raise max_wal_size (e.g."
            " ALTER SYSTEM SET max_wal_size = '8GB'; SELECT pg_reload_conf())."
        )
    if writes.wal is not None and writes.wal.buffers_full > 0:
        advice += (
            f" wal_buffers filled up {units.count(writes.wal.buffers_full)} times in the"
            " window, forcing writes before commit: raise wal_buffers (e.g. 64MB; restart)."
        )
    return advice + (
        " Then the volume: check its write IOPS and throughput limits (cloud volumes throttle),"
        " other writers on it, or give WAL a volume of its own."
    )


def wal_sync_latency_high(ctx: Context, j: Judged) -> Finding | None:
    latency = j.sync_latency()
    slow, intervals = slow_syncs(ctx, j)
    if latency is None or not slow:
        return None
    wal = j.writes.wal
    assert wal is not None
    usual = ctx.thresholds.usual_for_syncs(latency)
    words = class_words(ctx.thresholds, latency, j.t.max_seconds_per_sync, usual)
    summary = f"WAL syncs take {units.ms(latency)} each: {words}. Every commit waits for one."
    evidence: dict[str, Any] = {
        "seconds_per_sync": latency,
        "max_seconds_per_sync": j.t.max_seconds_per_sync,
        "storage_class": ctx.thresholds.storage.name,
        "syncs_per_second": j.writes.wal_per_second(wal.syncs),
        "wal_bytes_per_second": j.writes.wal_per_second(wal.wal_bytes),
        "write_wait_sessions": j.waiting,
    }
    if intervals is not None:
        evidence |= intervals.evidence(j.t.min_slow_sync_share)
        # The average may be usual while the incident's polls are not: an incident that
        # collapses throughput is outweighed by the healthy syncs before it.
        summary = (
            f"WAL syncs took longer than {ctx.thresholds.storage.name} storage allows (up to"
            f" {units.ms(j.t.max_seconds_per_sync)}) in {intervals.words('syncs')};"
            f" {units.ms(latency)} each over the window ({words}). Every commit waits for one."
        )
    return Finding(
        "wal_sync_latency_high",
        ctx.severity("PgAioWalSyncLatencyHigh"),
        summary,
        evidence,
        _checkpoint_advice(j.writes),
    )


def write_latency_regression(ctx: Context, j: Judged) -> Finding | None:
    found = write_regression(ctx, j)
    if found is None or not found.regressed(j.t.baseline):
        return None
    return Finding(
        "write_latency_regression",
        ctx.severity("PgAioWriteLatencyRegression"),
        f"Buffer writes take {found.shown} longer per byte than in the baseline:"
        f" {units.per_mib(found.now)} against {units.per_mib(found.before)}.",
        {
            "seconds_per_byte": found.now,
            "baseline_seconds_per_byte": found.before,
            "ratio": found.ratio,
            "interval": interval_json(found.margin),
            "factor": j.t.regression_factor,
            "writes_per_second": j.writes.per_second(j.writes.total.writes),
        },
        "Writes land in the OS page cache: they slow down when the kernel throttles dirty"
        " pages or the volume is saturated. " + _checkpoint_advice(j.writes),
    )


def _bgwriter_advice(writes: Writes) -> str:
    done = writes.checkpoints
    stopped = (
        f"It stopped at bgwriter_lru_maxpages {units.count(done.maxwritten_clean)} times in the"
        " window (maxwritten_clean). "
        if done is not None and done.maxwritten_clean > 0
        else ""
    )
    return (
        stopped + "Let the background writer do more per round: bgwriter_lru_maxpages = 1000,"
        " bgwriter_lru_multiplier = 4, a shorter bgwriter_delay (reload, no restart). A"
        " shared_buffers too small for the working set makes every backend evict: raise it"
        " (restart)."
    )


def backends_writing_buffers(ctx: Context, j: Judged) -> Finding | None:
    share = j.writes.backend_share()
    by_type = j.writes.buffer_writes()
    clients = j.writes.per_second(by_type.get(CLIENT, 0.0))
    if share is None or share <= j.t.max_backend_share:
        return None
    if clients < j.t.min_backend_writes_per_second:
        return None
    return Finding(
        "backends_writing_buffers",
        ctx.severity("PgAioBackendsWritingBuffers"),
        f"Client backends wrote {units.percent(share)} of the shared buffers written"
        f" ({units.rate(clients)}/s): the background writer did not clean ahead of them.",
        {
            "backend_share": share,
            "max_backend_share": j.t.max_backend_share,
            "buffer_writes": [
                {"backend_type": k, "per_second": j.writes.per_second(v)}
                for k, v in sorted(by_type.items())
            ],
        },
        _bgwriter_advice(j.writes),
    )


def storage_saturated_by_writes(ctx: Context, j: Judged) -> Finding | None:
    if not ctx.sampled or j.waiting <= j.t.min_write_wait_sessions:
        return None
    signals: list[str] = []
    evidence: dict[str, Any] = {
        "write_wait_sessions": j.waiting,
        "min_write_wait_sessions": j.t.min_write_wait_sessions,
        "write_waits": [
            {"wait": name, "sessions": sessions}
            for name, sessions in sorted(j.waits.items(), key=lambda kv: -kv[1])
        ],
    }
    sync = j.sync_latency()
    if sync is not None and slow_syncs(ctx, j)[0]:
        signals.append(f"WAL syncs take {units.ms(sync)} each")
        evidence["seconds_per_sync"] = sync
    # Within the regime only, as the rules (baseline.py says why it left another out).
    found = write_regression(ctx, j) if ctx.other_regime() is None else None
    if found is not None and found.saturating(j.t.baseline):
        signals.append(f"buffer writes take {found.shown} the baseline's per MiB")
        evidence |= {"seconds_per_byte": found.now, "baseline_seconds_per_byte": found.before}
    sampled = j.sampled_sync_latency()
    if sampled is not None and sampled > j.t.max_seconds_per_sync:
        signals.append(
            f"WAL syncs take {units.ms(sampled)} each by the samples (track_wal_io_timing is"
            " off: the processes in a WAL sync over the syncs per second)"
        )
        evidence |= {"sampled_seconds_per_sync": sampled, "syncing_sessions": j.syncing}
    if not signals:
        return None
    top = max(j.waits, key=lambda name: j.waits[name])
    return Finding(
        "storage_saturated_by_writes",
        ctx.severity("PgAioStorageSaturatedByWrites"),
        f"Storage is saturated by writes: {units.sessions(j.waiting)} sessions wait on writes"
        f" on average (most in {top}), and {' and '.join(signals)}.",
        evidence,
        _checkpoint_advice(j.writes),
    )


def track_wal_io_timing_off(ctx: Context, j: Judged) -> Finding | None:
    wal = j.writes.wal
    if wal is None or j.writes.wal_timed or wal.syncs <= 0:
        return None
    return Finding(
        "track_wal_io_timing_off",
        ctx.severity("PgAioTrackWalIoTimingOff"),
        "track_wal_io_timing was off during the window: PostgreSQL timed no WAL write or sync,"
        f" so the {units.count(wal.syncs)} WAL syncs counted have no measured latency here, only"
        " one estimated from the sampled waits.",
        {"wal_syncs": wal.syncs, "wal_writes": wal.writes},
        "ALTER SYSTEM SET track_wal_io_timing = on; SELECT pg_reload_conf(); (track_io_timing"
        " does not time WAL). It reads the clock twice per WAL write and sync.",
    )


def storage_sentence(ctx: Context, found: Mapping[str, Finding], read_side: str) -> str:
    """The storage verdict with writes in it: `read_side` is what the reads alone say. When
    writes saturate the volume they lead, and slow reads are put down to them."""
    if "storage_saturated_by_writes" in found:
        text = found["storage_saturated_by_writes"].summary
        if "storage_saturated" in found or "read_latency_high" in found:
            text += (
                " Reads wait longer meanwhile, on the same volume: the writes are the cause, not"
                " the reads."
            )
        return text
    slow = [
        found[i].summary
        for i in ("wal_sync_latency_high", "write_latency_regression")
        if i in found
    ]
    if slow:
        return read_side + " Writes are slow: " + " ".join(slow)
    return read_side

"""Workload time: how long the work took, the figure that answers "faster or slower".

Three bases, the better first:
- statements (pg_stat_statements): execution time per call of each statement, compared at the
  baseline's statement mix. Statements are matched by normalized text, database and user
  (collectors/pg_stat_statements.py): queryid is not stable across major versions.
- active_time_per_transaction (PostgreSQL 14+): DB time counted by pg_stat_database
  (active_time: each client backend's time executing statements) per transaction, where its
  interval is the narrower of the two DB times';
- db_time_per_transaction (always there): DB time (client sessions doing work, on CPU
  included, sampled) per transaction counted by pg_stat_database.

Read wait (pg_stat_io, and each statement's shared_blk_read_time) explains where the time went;
under io_method worker and io_uring it is only the part of each read that did not overlap
other work, so it is no measure of speed across versions or io_methods (docs/report.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from pg_aio_exporter.collectors.pg_stat_statements import (
    NO_STATEMENTS,
    StatementCounters,
    StatementKey,
)
from pg_aio_exporter.report.margin import (
    STATS_LAG,
    Estimate,
    Ratio,
    batch_spread,
    flush_lag_rse,
    sampling_rse,
)
from pg_aio_exporter.vocabulary import BLOCK_BYTES, MIB

STATEMENTS = "statements"
DB_TIME = "db_time_per_transaction"
ACTIVE_TIME = "active_time_per_transaction"
LISTED = 5  # statements named in a finding or in the window's own list
KEPT = 200  # statements a saved report keeps (the most time first): enough for any mix
# A backend adds its transactions to pg_stat_database when it goes idle, at most once a second:
# at either end of the window the counts lag the samples by up to STATS_LAG, a uniform error
# whose difference between the two ends has sd sqrt(2/12) of it.
LAG_SD = STATS_LAG * (2 / 12) ** 0.5
OWN_SLACK = 2.0  # the report's own transactions, counted to within this many


@dataclass(frozen=True)
class StatementWindow:
    """One statement's counts over the window. `text` only for the statements a report lists
    (the rest are identified by fingerprint alone)."""

    fingerprint: str
    database: str
    user: str
    counters: StatementCounters
    text: str | None = None

    @property
    def key(self) -> StatementKey:
        return self.fingerprint, self.database, self.user

    @property
    def seconds_per_call(self) -> float:
        return self.counters.exec_seconds / self.counters.calls

    @property
    def read_share(self) -> float | None:
        """Share of the execution time waiting on shared block reads."""
        c = self.counters
        return c.read_seconds / c.exec_seconds if c.exec_seconds > 0 else None

    @property
    def read_mib_per_call(self) -> float:
        return self.counters.blocks_read * BLOCK_BYTES / MIB / self.counters.calls


@dataclass(frozen=True)
class Workload:
    """What the window's work was, for workload time."""

    seconds: float  # between the first and the last read of these counts
    statements: Mapping[StatementKey, StatementWindow] | None  # None: pg_stat_statements unread
    transactions: float | None  # pg_stat_database, the report's own left out
    blocks: float | None  # blocks accessed (read + hit)
    client_sessions: float | None  # DB time: average client backends doing work (sampled)
    statements_note: str | None = None  # why there are no statements, in words
    # Client sessions seen working, summed over the samples (the Poisson count of DB time),
    # and the average of each of up to 10 consecutive sub-windows (its spread); None: not kept
    # (schema 2).
    sampled_sessions: float | None = None
    session_batches: tuple[float, ...] | None = None
    # Seconds of the window left out because pg_stat_database's counts did not continue
    # (stats_reset or restart between two polls).
    uncounted_seconds: float = 0.0
    # Client backends connected, working or idle, averaged over the samples; None: not kept
    # (saved before it was).
    connected_sessions: float | None = None
    # Client backends idle inside a transaction (between its statements: the round trips and
    # the client's own work within it), averaged over the samples; None: not kept (saved
    # before it was).
    in_transaction_sessions: float | None = None
    # pg_stat_database's active_time (PostgreSQL 14+) over the spans counted, the report's own
    # estimated out: half the time its round trips took on its own clock (own_active_seconds),
    # its server time lying anywhere in that; None: not counted (before 14, or saved before it
    # was). active_batches: active time per transaction of consecutive sub-windows of at least
    # half a poll interval each (their spread).
    active_seconds: float | None = None
    own_active_seconds: float = 0.0
    active_batches: tuple[float, ...] | None = None

    @property
    def total(self) -> StatementCounters | None:
        if self.statements is None:
            return None
        return sum((s.counters for s in self.statements.values()), NO_STATEMENTS)

    @property
    def seconds_per_call(self) -> float | None:
        total = self.total
        return total.exec_seconds / total.calls if total is not None and total.calls else None

    @property
    def db_time_per_transaction(self) -> float | None:
        """None when not measured (no transaction counted, no sample); 0 when measured and
        no session was seen working."""
        if not self.transactions or self.client_sessions is None or self.seconds <= 0:
            return None
        return self.client_sessions * self.seconds / self.transactions

    @property
    def db_time(self) -> Estimate | None:
        """DB time per transaction with its relative error: the samples' (Poisson, and the
        spread of sub-windows), the counts' lag at the window's ends, the report's own
        transactions; infinite when no session was seen working."""
        value = self.db_time_per_transaction
        if value is None or self.transactions is None:
            return None
        sampling = sampling_rse(self.sampled_sessions, self.session_batches)
        if value == 0:
            return Estimate(value, float("inf"))
        return Estimate.of(value, sampling, LAG_SD / self.seconds, OWN_SLACK / self.transactions)

    @property
    def active_time(self) -> Estimate | None:
        """DB time per transaction counted by pg_stat_database (active_time), with its relative
        error: the spread of the sub-windows (Student's t for their number), the flush lag at
        the window's ends (flush_lag_rse), the last statement of each connected backend whose
        active time joins the view a flush after its transaction, the report's own active time
        (uniform over its round trips' time) and its own transactions. None without active
        time, or with too few sub-windows to tell a spread (windows under about four poll
        intervals, 40 s)."""
        if not self.transactions or not self.active_seconds or self.seconds <= 0:
            return None
        spread = batch_spread(self.active_batches)
        if spread is None or self.active_batches is None:
            return None
        return Estimate.of(
            self.active_seconds / self.transactions,
            spread,
            flush_lag_rse(self.active_batches, self.seconds),
            math.sqrt(2) * (self.connected_sessions or 0.0) / self.transactions,
            self.own_active_seconds / math.sqrt(12) / self.active_seconds,
            OWN_SLACK / self.transactions,
        )

    @property
    def connected_time(self) -> Estimate | None:
        """Time clients were connected per transaction, with the error of the counts' lag and
        the report's own transactions. Little's law: for clients that send the next
        transaction as soon as one ends (a closed loop, such as pgbench without -R), it is the
        client's own latency, which holds what the server cannot see (the round trip, the
        client's own work); for clients that wait between transactions (a fixed rate, a pool's
        idle connections) it is mostly that wait."""
        if not self.transactions or not self.connected_sessions or self.seconds <= 0:
            return None
        return Estimate.of(
            self.connected_sessions * self.seconds / self.transactions,
            LAG_SD / self.seconds,
            OWN_SLACK / self.transactions,
        )

    @property
    def busy_share(self) -> float | None:
        """The share of the time clients were connected that they were in a transaction,
        working or between its statements: near 1 for a closed loop, low for clients that
        mostly wait between transactions. A transaction of several statements (pgbench's
        TPC-B: seven round trips) is a closed loop though the server works a fraction of it:
        28% of the clients' time in a TPC-B run on this machine, the rest its round trips."""
        if self.client_sessions is None or not self.connected_sessions:
            return None
        within = self.client_sessions + (self.in_transaction_sessions or 0.0)
        return within / self.connected_sessions

    @property
    def nothing_ended(self) -> bool:
        """Sessions were seen working, yet no statement and no transaction of theirs was
        counted: statements that outlast the window (their counts come when they end)."""
        total = self.total
        return (
            bool(self.client_sessions)
            and not self.transactions
            and (total is None or total.calls == 0)
        )

    @property
    def transactions_per_second(self) -> float | None:
        if self.transactions is None or self.seconds <= 0:
            return None
        return self.transactions / self.seconds

    @property
    def statement_share(self) -> float | None:
        """The statements' execution time over DB time: how much of the time sessions worked
        pg_stat_statements accounts for. Low for sub-millisecond statements, whose parse, plan,
        commit and round trips (not execution time) take most of each transaction."""
        total = self.total
        if total is None or not self.client_sessions or self.seconds <= 0:
            return None
        return total.exec_seconds / (self.client_sessions * self.seconds)

    def listed(self, limit: int = LISTED) -> list[StatementWindow]:
        """The statements that took the most time."""
        if self.statements is None:
            return []
        ranked = sorted(self.statements.values(), key=lambda s: (-s.counters.exec_seconds, s.key))
        return ranked[:limit]


@dataclass(frozen=True)
class StatementChange:
    now: StatementWindow
    before: StatementWindow

    @property
    def ratio(self) -> float:
        before = self.before.seconds_per_call
        return self.now.seconds_per_call / before if before > 0 else float("inf")


@dataclass(frozen=True)
class WorkloadComparison:
    margin: Ratio  # now / baseline with its 90% interval; below 1 is faster
    basis: str  # STATEMENTS, ACTIVE_TIME or DB_TIME
    matched_statements: int
    before: float  # seconds per call at the baseline's mix, or DB time per transaction
    after: float
    # Read wait per call at the baseline's mix, before and after (statements basis only).
    read_before: float | None = None
    read_after: float | None = None
    changes: tuple[StatementChange, ...] = ()  # matched statements, the most slowed first
    # The share of the baseline's statement time the matched statements took (by statements);
    # by DB time, set only when the statements were refused for taking too little of it.
    matched_share: float | None = None
    seconds: float = 0.0  # the shorter window's: what a longer one is measured against
    # The lower of the two windows' shares of connected time the clients were seen working;
    # None: not known (a saved report without connected sessions).
    busy_share: float | None = None
    # When the clients mostly wait between transactions (clients_wait), `margin`'s interval is
    # the clients' (the bound on their latency) and this is the server's own time's ratio with
    # its own interval; None otherwise.
    server_margin: Ratio | None = None

    @property
    def time_ratio(self) -> float:
        return self.margin.value

    @property
    def interval(self) -> tuple[float, float]:
        return self.margin.interval

    @property
    def claim(self) -> str | None:
        """The direction claimed, faster or slower (margin.py, CLAIM_WIDTHS); None: none."""
        return "faster" if self.margin.faster else "slower" if self.margin.slower else None

    @property
    def clients_wait(self) -> bool:
        """The clients waited between transactions most of the time they were connected (a
        fixed rate, a pool, think time): what they spend outside the server (round trips, their
        own work and schedule) is not seen and may be most of their time, so no window decides
        faster or slower for them."""
        return self.busy_share is not None and self.busy_share < MIN_BUSY_SHARE

    @property
    def decisive_seconds(self) -> float | None:
        """How long both windows would need to be for an undecided answer to be decided;
        None when it is decided, or when no window would (clients_wait)."""
        if self.margin.decided or self.clients_wait:
            return None
        return self.margin.decisive_after(self.seconds)

    @property
    def read_wait_grew(self) -> bool | None:
        """Whether the added read wait per call explains at least half the added time: the
        slowdown is I/O (storage, io_method, io_workers); otherwise CPU or plan."""
        if self.read_before is None or self.read_after is None:
            return None
        added = self.after - self.before
        return added > 0 and (self.read_after - self.read_before) >= added / 2

    def slowed(self, limit: int = LISTED) -> list[StatementChange]:
        return [c for c in self.changes if c.ratio > 1][:limit]


def _pairs(before: Workload, after: Workload) -> list[StatementChange] | None:
    """The statements both windows ran, matched by normalized text, database and user; None
    when a window has no pg_stat_statements."""
    if before.statements is None or after.statements is None:
        return None
    return [
        StatementChange(now, before.statements[key])
        for key, now in after.statements.items()
        if key in before.statements
        and now.counters.calls > 0
        and before.statements[key].counters.calls > 0
    ]


def matched_share(before: Workload, after: Workload) -> float | None:
    """The share of the baseline's statement time that the statements both windows ran took;
    None without pg_stat_statements in both, or without statement time in the baseline."""
    pairs = _pairs(before, after)
    base_total = before.total
    if pairs is None or base_total is None or base_total.exec_seconds <= 0:
        return None
    return sum(p.before.counters.exec_seconds for p in pairs) / base_total.exec_seconds


def _by_statements(before: Workload, after: Workload) -> WorkloadComparison | None:
    pairs = _pairs(before, after)
    if not pairs:
        return None
    # Each statement's time per call now and then, weighted by its calls in the baseline.
    weight = {id(p): p.before.counters.calls for p in pairs}
    then = sum(weight[id(p)] * p.before.seconds_per_call for p in pairs)
    now = sum(weight[id(p)] * p.now.seconds_per_call for p in pairs)
    margin = Ratio.of(
        _mix_estimate(pairs, weight, now, lambda p: p.now),
        _mix_estimate(pairs, weight, then, lambda p: p.before),
    )
    if margin is None:
        return None
    read_then = sum(
        weight[id(p)] * p.before.counters.read_seconds / p.before.counters.calls for p in pairs
    )
    read_now = sum(
        weight[id(p)] * p.now.counters.read_seconds / p.now.counters.calls for p in pairs
    )
    calls = sum(p.before.counters.calls for p in pairs)
    return WorkloadComparison(
        margin=margin,
        basis=STATEMENTS,
        matched_statements=len(pairs),
        before=then / calls,
        after=now / calls,
        read_before=read_then / calls,
        read_after=read_now / calls,
        changes=tuple(sorted(pairs, key=lambda p: (-p.ratio, p.now.key))),
        matched_share=matched_share(before, after),
        seconds=min(before.seconds, after.seconds),
    )


def _mix_estimate(
    pairs: list[StatementChange],
    weight: dict[int, float],
    value: float,
    side: Callable[[StatementChange], StatementWindow],
) -> Estimate:
    """Time at the baseline's mix, sum over statements of weight x mean time per call, with
    its relative error from each statement's per-call variance over the window (stddev_exec_time
    of pg_stat_statements: variance / calls is the variance of its mean). A saved report
    without it (schema 2): each call's sd taken as its mean (as if exponential)."""
    variance = 0.0
    for p in pairs:
        counters = side(p).counters
        per_call = counters.call_variance
        if per_call is None:
            per_call = side(p).seconds_per_call ** 2
        variance += weight[id(p)] ** 2 * per_call / counters.calls
    return Estimate.of(value, variance**0.5 / value if value > 0 else 0.0)


# Below this share of DB time in either window, execution time leaves out most of the time the
# work took (parse, plan, commit, round trips): DB time per transaction judges instead.
MIN_STATEMENT_SHARE = 0.5
# From this share of their connected time working in the server (both windows), clients are
# taken to send each transaction as soon as the last one ended (a closed loop): their time
# connected per transaction is their own latency (Little's law), round trips and the client's
# own work included, which the server's time leaves out. Below it they mostly wait between
# transactions, and what they spend outside the server is not seen (bench/workload_margin.py:
# under `pgbench -R` the statements' time moved 0.7-1.5x between windows where pgbench's latency
# less its schedule lag moved 0.4-3.1x): the interval is then the bound Little's law gives.
MIN_BUSY_SHARE = 0.5


def _statements_cover(work: Workload) -> bool:
    share = work.statement_share
    return share is None or share >= MIN_STATEMENT_SHARE


def compare_workload(
    before: Workload | None, after: Workload | None, min_matched_share: float
) -> WorkloadComparison | None:
    """Now against the baseline, by statements when both windows have them, their execution
    time is most of DB time and the statements matched took at least `min_matched_share` of the
    baseline's statement time (thresholds.yaml), else by DB time per transaction; None when
    neither basis is there.
    What the server does not see of the clients' time: for a closed loop (clients busy in the
    server most of the time they are connected, both windows) the interval also reaches the
    ratio of time connected per transaction, the clients' own latency (Little's law), round
    trips and their own work included, which on a busy client host moved by several percent.
    Clients that mostly wait between transactions (a fixed rate, a pool, think time): their
    time outside the server is not seen at all; the interval holds 1 (no claim) and reaches
    the bound of their latency between the server's time and their time connected per
    transaction (_clients_bounds), and server_margin keeps the server's own."""
    compared = _compare(before, after, min_matched_share)
    if compared is None or before is None or after is None:
        return compared
    shares = (before.busy_share, after.busy_share)
    if shares[0] is None or shares[1] is None:
        return compared
    busy = min(shares[0], shares[1])
    margin = compared.margin
    if busy < MIN_BUSY_SHARE:
        waiting = margin.holding(Ratio(1.0, 0.0))
        bounds = _clients_bounds(before, after, compared.basis)
        if bounds is not None:
            low, high = waiting.interval
            waiting = replace(waiting, bounds=(min(low, bounds[0]), max(high, bounds[1])))
        return replace(compared, margin=waiting, busy_share=busy, server_margin=margin)
    loop = Ratio.of(after.connected_time, before.connected_time)
    margin = margin if loop is None else margin.holding(loop, own=True)
    return replace(compared, margin=margin, busy_share=busy)


def _server_time(work: Workload, basis: str) -> Estimate | None:
    """The server's time per transaction, a part of each client's latency: the statements'
    execution time (by statements) or DB time (counted or sampled), over the transactions
    counted."""
    if basis == ACTIVE_TIME:
        return work.active_time
    if basis != STATEMENTS:
        return work.db_time
    total = work.total
    if total is None or not work.transactions or total.exec_seconds <= 0 or work.seconds <= 0:
        return None
    return Estimate.of(
        total.exec_seconds / work.transactions,
        LAG_SD / work.seconds,
        OWN_SLACK / work.transactions,
    )


def _clients_bounds(before: Workload, after: Workload, basis: str) -> tuple[float, float] | None:
    """Where the ratio of the clients' latency can lie, for clients that mostly wait between
    transactions: each one's latency per transaction is at least the server's time for it and
    at most its time connected per transaction (Little's law: latency and the wait before the
    next transaction), so the ratio lies between S_after / C_before and C_after / S_before,
    each end widened by its figures' own 90% error. None when a figure is not measured (no
    connected sessions kept, no transaction counted)."""
    low = Ratio.of(_server_time(after, basis), before.connected_time)
    high = Ratio.of(after.connected_time, _server_time(before, basis))
    if low is None or high is None or math.isinf(low.log_sd) or math.isinf(high.log_sd):
        return None
    return low.interval[0], high.interval[1]


def _compare(
    before: Workload | None, after: Workload | None, min_matched_share: float
) -> WorkloadComparison | None:
    if before is None or after is None:
        return None
    by_statements = _by_statements(before, after)
    # Statements whose texts differ between the servers (a list of casts one version squashes
    # and the other does not) leave the trivial ones (SET, max(id)) to stand for the workload,
    # or none at all (a share of 0: no statement to compare by).
    share = matched_share(before, after)
    refused = share is not None and share < min_matched_share
    basis, then, now, margin = _db_time(before, after)
    if (
        by_statements is not None
        and not refused
        and (margin is None or (_statements_cover(before) and _statements_cover(after)))
    ):
        if margin is None:
            return by_statements
        # Execution time leaves out parse, plan, commit and the waits between statements; DB
        # time holds them. Where the two disagree, the interval reaches DB time's ratio too.
        return replace(by_statements, margin=by_statements.margin.holding(margin))
    if then is None or now is None or margin is None:
        return None
    return WorkloadComparison(
        margin,
        basis,
        0,
        then.value,
        now.value,
        matched_share=share if refused else None,
        seconds=min(before.seconds, after.seconds),
    )


def _db_time(
    before: Workload, after: Workload
) -> tuple[str, Estimate | None, Estimate | None, Ratio | None]:
    """DB time per transaction in both windows and their ratio: counted (active_time) where
    its interval is the narrower, else sampled; (basis, before, after, ratio)."""
    sampled = Ratio.of(after.db_time, before.db_time)
    counted = Ratio.of(after.active_time, before.active_time)
    if counted is not None and (sampled is None or counted.log_sd < sampled.log_sd):
        return ACTIVE_TIME, before.active_time, after.active_time, counted
    return DB_TIME, before.db_time, after.db_time, sampled

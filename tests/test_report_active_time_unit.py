"""DB time counted by pg_stat_database's active_time (issue 43 item 1), pure logic: the bound on
what the flush lag does at a window's ends, the report's own round trips taken out, and the
choice between counted and sampled DB time."""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

import pytest

from pg_aio_exporter.collectors.pg_stat_database import DatabaseWork
from pg_aio_exporter.report.margin import flush_lag_rse
from pg_aio_exporter.report.runner import WorkloadWindow
from pg_aio_exporter.report.workload import (
    ACTIVE_TIME,
    DB_TIME,
    Workload,
    compare_workload,
)

pytestmark = pytest.mark.unit
SECONDS = 40
PER_SECOND = 100.0  # transactions


def cumulative(per_second: list[float], t: float) -> float:
    """The count up to `t` seconds of a series of per-second counts, spread evenly in each."""
    whole = int(t)
    return sum(per_second[:whole]) + (t - whole) * per_second[whole]


def ratio(active: list[float], done: list[float], start: float, end: float) -> float:
    """Active time per transaction between `start` and `end` (seconds)."""
    return (cumulative(active, end) - cumulative(active, start)) / (
        cumulative(done, end) - cumulative(done, start)
    )


def test_the_flush_lag_bound_holds_a_simulated_lag() -> None:
    """A steady rate whose time per transaction varies second by second (sd 30%): each end of a
    40 s window read as it was up to a second earlier (uniform), as a busy backend's last
    flush leaves it, in both the active time and the transactions. flush_lag_rse, from the
    window's four 10 s sub-windows, holds the error 9 times in 10 at 90% (1.645 sd), and is not
    more than 3 times the errors' own sd (a bound that says something)."""
    rng = random.Random(43)
    errors, bounds = [], []
    for _ in range(2000):
        per_transaction = [max(0.05, rng.gauss(1.0, 0.3)) for _ in range(SECONDS + 2)]
        active = [PER_SECOND * r for r in per_transaction]
        done = [PER_SECOND] * (SECONDS + 2)
        start, end = 1.0, 1.0 + SECONDS

        true = ratio(active, done, start, end)
        seen = ratio(active, done, start - rng.random(), end - rng.random())
        errors.append(seen / true - 1)
        batches = [
            sum(active[1 + 10 * b : 11 + 10 * b]) / sum(done[1 + 10 * b : 11 + 10 * b])
            for b in range(4)
        ]
        bounds.append(flush_lag_rse(batches, SECONDS))
    inside = sum(abs(e) <= 1.645 * b for e, b in zip(errors, bounds, strict=True))
    assert inside >= 0.9 * len(errors)
    assert statistics.median(bounds) <= 3 * statistics.pstdev(errors)


def test_a_steady_window_has_no_flush_lag_error() -> None:
    """Every sub-window alike: the second missing at either end is like the window's."""
    assert flush_lag_rse([0.02] * 4, SECONDS) == 0.0
    assert flush_lag_rse([0.02], SECONDS) == 0.0  # one sub-window tells no spread


def work_at(active: float, transactions: float, at: float) -> tuple[DatabaseWork, float]:
    return DatabaseWork(transactions, 0.0, active, 1.0), at


def window(per_transaction: list[float], own_seconds: float = 0.0) -> Workload:
    """Polls at 0, 3, 13, ... (the worker's phase cuts the first interval short) and at the
    window's end, 40 s: 1000 transactions of the workload each 10 s, at the given active time
    per transaction, one round trip of the report's own per poll of `own_seconds`."""
    recorded = WorkloadWindow()
    polls = [0.0, 3.0, 13.0, 23.0, 33.0, 40.0]
    active = transactions = 0.0
    for i, at in enumerate(polls):
        if i:
            done = 100.0 * (at - polls[i - 1])
            transactions += done + 1  # and the poll's own round trip
            active += done * per_transaction[i - 1] + own_seconds / 2
        recorded.observe_databases(*work_at(active, transactions, at))
        recorded.observe_round_trip(1, at + 0.01, own_seconds)
    return recorded.workload(note=None)


def test_sub_windows_are_joined_to_half_a_poll_interval_and_the_own_time_left_out() -> None:
    """The 3 s first span joins the next, the 7 s last one stands: four sub-windows. The
    report's own round trips took 0.2 s each on its clock; half is in the active time here,
    half is taken out: the workload's active time per transaction is as it ran."""
    work = window([0.010, 0.010, 0.012, 0.011, 0.009], own_seconds=0.2)
    assert work.active_batches == pytest.approx((0.010, 0.012, 0.011, 0.009))
    assert work.transactions == pytest.approx(4000)
    # the round trips of the first 5 polls (the last returned after the window)
    assert work.own_active_seconds == pytest.approx(1.0)
    assert work.active_seconds == pytest.approx(
        300 * 0.010 + 1000 * (0.010 + 0.012 + 0.011) + 700 * 0.009
    )


def test_counted_db_time_is_the_basis_where_it_is_the_narrower() -> None:
    """A/A with a noisy sampled DB time (40 samples of about 3 sessions): the counted one, steady
    to within a few percent between sub-windows, is chosen; without active time (before 14, or a
    report saved before it) or with too few sub-windows to tell a spread, the sampled one is."""
    steady = window([0.010, 0.010, 0.0102, 0.0098, 0.010])
    one = replace(
        steady,
        client_sessions=2.8,
        connected_sessions=3.0,
        sampled_sessions=112.0,
        session_batches=(2.5, 3.0, 2.9, 2.8),
    )
    cmp = compare_workload(one, one, 0.5)
    assert cmp is not None and cmp.basis == ACTIVE_TIME
    assert cmp.margin.half_width < 0.05
    for other in (
        replace(one, active_seconds=None),
        replace(one, active_batches=(0.01, 0.01, 0.01)),
    ):
        cmp = compare_workload(other, other, 0.5)
        assert cmp is not None and cmp.basis == DB_TIME

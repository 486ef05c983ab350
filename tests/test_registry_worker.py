"""The worker runs whatever the registry lists: a view added in a test is polled from a real
PostgreSQL 18 and rendered, with no other edit."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from harness import Samples, labels, parse, wait_for
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config.targets import target_from_dsn
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.expose.exposition import Exposition
from pg_aio_exporter.expose.metricset import MetricSet
from pg_aio_exporter.expose.selfmetrics import SelfMetrics
from pg_aio_exporter.poll.worker import TargetWorker
from pg_aio_exporter.versions import PG10
from test_structure import AnswerRow, DummyCollector


@dataclass(frozen=True)
class Answer:
    """The toy view's snapshot type: what the report would read of it."""

    answer: float


class ToyView(DummyCollector):
    """A view the report reads too: the collector, plus its rows as one snapshot."""

    def snapshot(self, rows: list[AnswerRow]) -> Answer:
        return Answer(rows[0].answer)


class Listener:
    """A tap like the report's: what each poll collector handed it."""

    def __init__(self) -> None:
        self.snapshots: dict[str, object | None] = {}

    def polled(self, collector: str, snapshot: object | None, read_at: float) -> None:
        self.snapshots[collector] = snapshot

    def sampled(self, samples: int, totals: dict[str, Any], answered: list[str]) -> None:
        pass

    def failed(self, collector: str, kind: str, message: str) -> None:
        pass

    def round_trip(self, transactions: int, ended: float, seconds: float) -> None:
        pass


@dataclass(frozen=True)
class Misfit:
    """A row type that does not fit its view's SQL (whose one column is `answer`)."""

    question: int


class MisfitView:
    """A poll collector whose row type does not fit its SQL: a bug of this collector."""

    name = "misfit"
    since = PG10
    labels = ()
    row_type = Misfit

    def query(self, version_num: int) -> str | None:
        return "SELECT 41 + 1 AS answer"

    def collect(self, rows: list[Misfit], out: MetricSet) -> None:
        out.gauge("pg_misfit", "Never served.", rows[0].question)


class MisfitSampled(MisfitView):
    """The same bug in a sample collector."""

    name = "misfit_sampled"

    def observe(self, rows: list[Misfit], version_num: int) -> str | None:
        return None

    def roll_window(self, samples: int, seconds: float) -> None:
        pass

    def collect_counters(self, out: MetricSet) -> None:
        out.counter("pg_misfit_sampled", "Never served.", 1.0)

    def collect_gauges(self, out: MetricSet) -> None:
        pass

    def totals(self) -> dict[str, Any]:
        return {}


MISFITS = (MisfitView.name, MisfitSampled.name)


def test_worker_polls_a_registered_view(pg18: LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """One module and one registry line: the exporter serves the view's series, and a tap (the
    report's) receives its snapshot type, beside every other view's typed snapshot. Beside them,
    views whose row type does not fit their SQL (psycopg's class_row raises reading the rows):
    each is its own collector's internal error, and the round trip, pg_up and every other
    series stand, in a poll and in a sample alike."""
    monkeypatch.setitem(registry.POLL, ToyView.name, ToyView)
    monkeypatch.setitem(registry.POLL, MisfitView.name, MisfitView)
    monkeypatch.setitem(registry.SAMPLE, MisfitSampled.name, MisfitSampled)
    tap = Listener()

    async def one_poll() -> bytes:
        selfmetrics = SelfMetrics()
        exposition = Exposition(selfmetrics)
        target = target_from_dsn(pg18.dsn(), name="default")
        worker = TargetWorker(
            target,
            exposition,
            selfmetrics,
            poll_interval=30,
            sample_interval=1,
            timeout=5,
            tap=tap,
        )
        try:
            assert await worker.poll()
            assert await worker.sample()
        finally:
            await worker._disconnect()
        exposition.render()
        chunks: list[bytes] = []
        exposition.body.write(chunks.append)
        return b"".join(chunks)

    got = parse(asyncio.run(one_poll()).decode())
    assert got["pg_dummy_answer"] == {labels(target="default", dummy_label="x"): 42}
    assert got["pg_up"] == {labels(target="default"): 1}
    assert got["pg_aio_sampler_samples_total"] == {labels(target="default"): 1}
    assert "pg_misfit" not in got and "pg_misfit_sampled_total" not in got
    assert "pg_aio_io_worker_samples_total" in got, "the other sample collectors' series"
    poll_errors = got["pg_aio_exporter_poll_errors_total"]
    misfits = [labels(target="default", collector=c, kind="internal") for c in MISFITS]
    assert {k: v for k, v in poll_errors.items() if v} == dict.fromkeys(misfits, 1)
    assert tap.snapshots.pop("dummy") == Answer(42)
    # Every view the report reads hands it a domain object, never rows (pg_stat_statements is
    # not preloaded on this server: absent, so not polled).
    assert set(tap.snapshots) == set(registry.POLL) - {"dummy", "misfit", "pg_stat_statements"}
    made = {type(s).__name__ for s in tap.snapshots.values() if s is not None}
    assert made >= {"Snapshot", "WalSnapshot", "CheckpointerCounts", "ServerVersion"}
    assert made >= {"SettingsFacts", "DatabaseWork"}
    assert not any(isinstance(s, list | dict) for s in tap.snapshots.values())


def error_series(**worker_options: Any) -> dict[tuple[str, str], float]:
    """pg_aio_exporter_poll_errors_total of a new worker that never ran, by (collector, kind)."""
    selfmetrics = SelfMetrics()

    async def new_exposition() -> Exposition:
        return Exposition(selfmetrics)  # its asyncio.Event wants a running loop

    exposition = asyncio.run(new_exposition())
    target = target_from_dsn("host=db.invalid", name="default")  # never connected to
    TargetWorker(target, exposition, selfmetrics, poll_interval=30, timeout=5, **worker_options)
    errors = parse(b"".join(selfmetrics.render()).decode())["pg_aio_exporter_poll_errors_total"]
    assert all(dict(k)["target"] == "default" for k in errors)
    return {(dict(k)["collector"], dict(k)["kind"]): v for k, v in errors.items()}


STATEMENT_KINDS = ("timeout", "privilege", "query")


@pytest.mark.unit
def test_poll_errors_start_at_zero_for_every_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the first error, so that increase() and the panels see it when it comes."""
    monkeypatch.setitem(registry.POLL, DummyCollector.name, DummyCollector)
    errors = error_series(sample_interval=1)
    assert set(errors.values()) == {0}
    for collector in ["dummy", *registry.POLL, *registry.SAMPLE]:
        assert {(collector, kind) for kind in STATEMENT_KINDS} <= set(errors)
    assert {("connection", kind) for kind in ("connection", "auth", "timeout")} <= set(errors)
    assert {("poll", "internal"), ("sample", "internal"), ("worker", "internal")} <= set(errors)
    every = ["dummy", *registry.POLL, *registry.SAMPLE]
    assert {(collector, "internal") for collector in every} <= set(errors)


@pytest.mark.unit
def test_no_error_series_for_what_is_switched_off() -> None:
    errors = error_series(sample_interval=0, collectors={"pg_stat_io", "settings"})
    assert {collector for collector, _ in errors} == {
        "connection",
        "pg_stat_io",
        "settings",
        "poll",
        "worker",
    }


class BrokenCollector(DummyCollector):
    """A collector with a bug whose message quotes a secret."""

    def collect(self, rows: list[AnswerRow], out: MetricSet) -> None:
        raise RuntimeError(f"boom near password={SECRET}")


SECRET = "Bug-Leak-9876"


def test_a_bug_is_logged_with_its_traceback_and_no_secret(
    pg18: LocalServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(registry.POLL, BrokenCollector.name, BrokenCollector)

    async def guarded_poll() -> bool:
        selfmetrics = SelfMetrics()
        target = target_from_dsn(pg18.dsn(password=SECRET), name="default")
        worker = TargetWorker(
            target,
            Exposition(selfmetrics),
            selfmetrics,
            poll_interval=30,
            sample_interval=1,
            timeout=5,
        )
        try:
            return await worker._guarded(worker.poll)
        finally:
            await worker._disconnect()

    with caplog.at_level(logging.ERROR, logger="pg_aio_exporter"):
        assert asyncio.run(guarded_poll()), "the server was reached: the poll stands"
    (record,) = [r for r in caplog.records if r.getMessage() == "internal error"]
    assert record.__dict__["collector"] == "dummy"
    err = record.__dict__["err"]
    assert err.startswith("Traceback") and "RuntimeError: boom near password=" in err
    assert "in collect" in err, "the frame of the bug"
    assert SECRET not in err


class FailsOnItsSecondPoll(DummyCollector):
    """Collects once, then raises half-way through its second collect()."""

    def __init__(self) -> None:
        self.polls = 0

    def collect(self, rows: list[AnswerRow], out: MetricSet) -> None:
        self.polls += 1
        out.gauge("pg_dummy_polls", "Polls seen.", self.polls)
        if self.polls > 1:
            raise RuntimeError("a bug on the second poll")
        super().collect(rows, out)


def test_a_collector_that_raises_costs_only_its_own_series(
    pg18: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its series go (never the last poll's values), the other families are this poll's,
    pg_up is 1, and the error is counted under its name."""
    monkeypatch.setitem(registry.POLL, FailsOnItsSecondPoll.name, FailsOnItsSecondPoll)
    selfmetrics = SelfMetrics()

    async def two_polls() -> tuple[Samples, Samples]:
        exposition = Exposition(selfmetrics)
        target = target_from_dsn(pg18.dsn(), name="default")
        worker = TargetWorker(
            target, exposition, selfmetrics, poll_interval=30, sample_interval=0, timeout=5
        )

        def scrape() -> Samples:
            exposition.render()
            chunks: list[bytes] = []
            exposition.body.write(chunks.append)
            return parse(b"".join(chunks).decode())

        try:
            assert await worker._guarded(worker.poll)
            first = scrape()
            # A value only the second poll can read: this poll's settings, not the last one's.
            with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET maintenance_io_concurrency = 77")
                conn.execute("SELECT pg_reload_conf()")
            try:
                wait_for(lambda: _setting(pg18, "maintenance_io_concurrency") == "77", 5, "reload")
                assert await worker._guarded(worker.poll)
            finally:
                with psycopg.connect(pg18.dsn(), autocommit=True) as conn:
                    conn.execute("ALTER SYSTEM RESET maintenance_io_concurrency")
                    conn.execute("SELECT pg_reload_conf()")
            return first, scrape()
        finally:
            await worker._disconnect()

    first, second = asyncio.run(two_polls())
    default = labels(target="default")
    assert first["pg_dummy_polls"] == {default: 1}
    assert "pg_dummy_polls" not in second and "pg_dummy_answer" not in second
    assert second["pg_up"] == {default: 1}
    assert second["pg_settings_maintenance_io_concurrency"] == {default: 77}
    others = {name for name in first if name.startswith("pg_") and "dummy" not in name}
    assert others - set(second) == set()
    errors = second["pg_aio_exporter_poll_errors_total"]
    assert errors[labels(target="default", collector="dummy", kind="internal")] == 1
    assert errors[labels(target="default", collector="poll", kind="internal")] == 0
    success = second["pg_aio_exporter_last_poll_success_timestamp_seconds"][default]
    assert success == first["pg_aio_exporter_last_poll_success_timestamp_seconds"][default]


def _setting(server: LocalServer, name: str) -> str:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT setting FROM pg_settings WHERE name = %s", [name]).fetchone()
    assert row is not None
    return str(row[0])

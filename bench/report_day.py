"""The report's cost over a long window: `report --duration 24h --sample-interval 1s` replayed
from recorded rows (tests/fixtures/rows, as tests/recorded.py reads them) through the report's
own tap (runner.Recorder) and summary (runner.summarise, judged as the command judges it), on a
clock of its own: a day in seconds of CPU.

Each second is a sample of the recorded activity and pg_aios rows, in turn; every POLL_EVERY
seconds a poll of the recorded pg_stat_io, WAL, checkpointer, pg_stat_database and
pg_stat_statements rows, their counters grown along the line from the recording's first poll to
its second (so nothing looks like a reset). Each sample and poll is a round trip of one
transaction, as the worker tells its tap.

Two runs, so that tracemalloc's own cost is in neither figure of the other: the first gives the
CPU (time.process_time) of the replay and of the summary, and the process's peak RSS; the
second the peak of Python's allocations over the whole window, replay and summary.

Usage: PYTHONPATH=.:tests python bench/report_day.py [--duration 24h] [--sample-interval 1s]
Prints a markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from typing import Any

from common import machine

import recorded
from pg_aio_exporter import thresholds
from pg_aio_exporter.collectors import registry
from pg_aio_exporter.collectors.base import Snapshots
from pg_aio_exporter.config.targets import parse_duration
from pg_aio_exporter.poll.sampler import Sampler
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.runner import POLL_EVERY, Recorder, summarise

MAJOR = "18"
MB = 1e6


class Clock:
    """Epoch seconds, moved by the replay: the window ends now."""

    def __init__(self, duration: float) -> None:
        self.now = time.time() - duration

    def __call__(self) -> float:
        return self.now


class Grown:
    """A poll's views moved `step` times by what changed from the recorded first poll to the
    second: counters grow, what stayed (names, start times, resets) stays."""

    def __init__(self, first: dict[str, Any], second: dict[str, Any]) -> None:
        self.views = {
            name: [
                (row, self.changed(row, other))
                for row, other in zip(rows, second[name], strict=True)
            ]
            for name, rows in first.items()
        }

    @staticmethod
    def changed(row: dict[str, Any], other: dict[str, Any]) -> dict[str, tuple[float, float]]:
        return {
            k: (v, other[k] - v)
            for k, v in row.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and other[k] != v
        }

    def at(self, step: int) -> dict[str, list[dict[str, Any]]]:
        return {
            name: [
                {**row, **{k: type(v)(v + step * d) for k, (v, d) in changed.items()}}
                for row, changed in rows
            ]
            for name, rows in self.views.items()
        }


def halved(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v / 2 if isinstance(v, float) else v for k, v in row.items()}


def polls() -> tuple[dict[str, Any], dict[str, Any]]:
    """The recorded first and second poll, every view the report reads (the workload's views
    were recorded apart). The second poll's statements are more than the first's: they grow
    from half their counts instead."""
    rows, workload = recorded.load(MAJOR), recorded.workload(MAJOR)
    first, second = (dict(p) for p in rows["polls"])
    for views, read in zip((first, second), workload["polls"], strict=True):
        views["pg_stat_database"] = read["pg_stat_database"]
    statements = workload["polls"][1]["per_statement"]
    first["pg_stat_statements"] = [halved(row) for row in statements]
    second["pg_stat_statements"] = statements
    return first, second


def replay(duration: float, every: float) -> tuple[Recorder, float]:
    """The window's recorder after `duration` seconds sampled every `every`: (the recorder,
    the epoch it started at)."""
    version = recorded.load(MAJOR)["server_version_num"]
    samples = recorded.load(MAJOR)["samples"]
    first, second = polls()
    grown = Grown(first, second)
    collectors = [
        c
        for c in registry.report_collectors()
        if isinstance(c, Snapshots) and c.query(version) is not None and c.name in first
    ]
    clock = Clock(duration)
    recorder = Recorder(duration, clock)
    sampler = Sampler()

    def poll(step: int) -> None:
        views = grown.at(step)
        for collector in collectors:
            snapshot = collector.snapshot(recorded.typed(collector.row_type, views[collector.name]))
            recorder.polled(collector.name, snapshot, clock())
        recorder.round_trip(1, clock(), 0.001)

    poll(0)
    recorder.start()
    started = clock()
    taken = 0
    next_poll = POLL_EVERY
    while taken * every < duration:
        taken += 1
        clock.now = started + taken * every
        sample = samples[taken % len(samples)]
        read = [(c, recorded.typed(c.row_type, sample[c.name])) for c in sampler.collectors]
        sampler.observe(read, version)
        totals = {k: v for c in sampler.collectors for k, v in c.totals().items()}
        recorder.sampled(sampler.samples, totals, [c.name for c in sampler.collectors])
        recorder.round_trip(1, clock(), 0.001)
        if taken * every >= next_poll:
            poll(int(next_poll / POLL_EVERY))
            next_poll += POLL_EVERY
    return recorder, started


def summary_of(recorder: Recorder, started: float, every: float) -> None:
    assert recorder.server is not None
    summary = summarise(recorder, recorder.server, "recorded", started, every)
    judge(summary, thresholds.load(), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", default="24h")
    parser.add_argument("--sample-interval", default="1s")
    args = parser.parse_args()
    duration = parse_duration(args.duration, what="--duration")
    every = parse_duration(args.sample_interval, what="--sample-interval")

    cpu = time.process_time()
    recorder, started = replay(duration, every)
    replayed = time.process_time() - cpu
    cpu = time.process_time()
    summary_of(recorder, started, every)
    summarised = time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    samples = recorder.samples
    del recorder

    tracemalloc.start()
    recorder, started = replay(duration, every)
    summary_of(recorder, started, every)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    polls_made = int(duration / POLL_EVERY)
    print(
        f"{machine()}; report --duration {args.duration} --sample-interval {args.sample_interval}"
    )
    print(f"replayed: {samples} samples, {polls_made} polls (one every {POLL_EVERY:g} s)\n")
    print("| summary CPU | replay CPU (the window's taps) | Python allocations, peak | peak RSS |")
    print("|---|---|---|---|")
    print(f"| {summarised:.2f} s | {replayed:.1f} s | {peak / MB:.1f} MB | {rss:.0f} MiB |")


if __name__ == "__main__":
    main()

"""Helpers for the fault-injection tests: what "the exporter is fine" means, measured from
outside (scrape latency, threads, fds, counters), and a throwaway TLS CA."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from contract import own_counters
from cpu import Stopwatch, assert_median_within, scrape_path
from harness import Exporter, Labels, Samples, labels

TARGET = labels(target="default")
ERRORS = "pg_aio_exporter_poll_errors_total"
# PostgreSQL's own counters may legitimately go back (a reset, a crash); the exporter's never.
_OWN = own_counters()
_HISTOGRAM_SUFFIXES = ("_count", "_sum", "_bucket")


def _own(sample_name: str) -> bool:
    if sample_name in _OWN:
        return True
    return any(
        sample_name.endswith(s) and sample_name.removesuffix(s) in _OWN for s in _HISTOGRAM_SUFFIXES
    )


def assert_fast(exp: Exporter, n: int = 9) -> float:
    """The median wall time of n plain /metrics requests is under 50 ms plus what waiting for a
    CPU (the exporter's, this client's) can add to it; returns it, in seconds."""
    clock = Stopwatch(scrape_path(exp.proc.pid))
    for _ in range(n):
        status, _ = clock.get(exp.url + "/metrics", tls=exp.tls)
        assert status == 200
    assert_median_within(clock.timings, 0.05)
    return statistics.median(t.seconds for t in clock.timings)


def errors(samples: Samples, collector: str = "connection", kind: str = "connection") -> float:
    key = labels(target="default", collector=collector, kind=kind)
    return samples.get(ERRORS, {}).get(key, 0.0)


def pg_up(exp: Exporter) -> float | None:
    return exp.scrape().get("pg_up", {}).get(TARGET)


def threads(exp: Exporter) -> int:
    return len(os.listdir(f"/proc/{exp.proc.pid}/task"))


def fds(exp: Exporter) -> int:
    return len(os.listdir(f"/proc/{exp.proc.pid}/fd"))


@dataclass
class Watch:
    """Scrapes through one exporter, asserting at each that it is alive and that none of its
    own counters went backwards since the previous scrape."""

    exp: Exporter
    seen: dict[tuple[str, Labels], float] = field(default_factory=dict)
    scrapes: int = 0
    last: Samples = field(default_factory=dict)  # the last scrape's

    def scrape(self) -> Samples:
        assert self.exp.proc.poll() is None, f"exporter died: {self.exp.logs()[-2000:]}"
        samples = self.exp.scrape()
        for name, series in samples.items():
            if not _own(name):
                continue
            for key, value in series.items():
                before = self.seen.get((name, key))
                assert before is None or value >= before, f"{name}{dict(key)}: {before} -> {value}"
                self.seen[(name, key)] = value
        self.scrapes += 1
        self.last = samples
        return samples

    def until(self, check: Callable[[Samples], bool], timeout: float, what: str) -> float:
        """Scrape until check(samples) is true; seconds it took."""
        started = time.monotonic()
        while True:
            samples = self.scrape()
            if check(samples):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.05)


def up_is(value: float) -> Callable[[Samples], bool]:
    return lambda samples: samples.get("pg_up", {}).get(TARGET) == value

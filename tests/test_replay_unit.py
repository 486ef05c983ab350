"""The fleet bench's replay (tests/replay.py): one recorded exposition served as many targets
must tell them apart by name and keep their counters counting, or the rules it feeds would
see one target, or none with traffic."""

from __future__ import annotations

import pytest

from replay import PLACEHOLDER, recorded_series, render, samples

pytestmark = pytest.mark.unit

FIRST = """\
# HELP pg_stat_io_reads_total Reads.
# TYPE pg_stat_io_reads_total counter
pg_stat_io_reads_total{backend_type="client backend",target="default"} 100.0
pg_stat_io_reads_created{backend_type="client backend",target="default"} 1.7e9
# TYPE pg_aio_in_flight gauge
pg_aio_in_flight{target="default"} 3.0
# TYPE pg_aio_poll_duration_seconds histogram
pg_aio_poll_duration_seconds_bucket{le="+Inf",target="default"} 10.0
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.002
go_gc_duration_seconds_count 40
"""
# 20 s later: the counters moved, the gauge and the quantile changed, one series is new.
SECOND = (
    FIRST.replace("} 100.0", "} 160.0")
    .replace("} 3.0", "} 5.0")
    .replace('"+Inf",target="default"} 10.0', '"+Inf",target="default"} 30.0')
    .replace("} 0.002", "} 0.004")
    .replace("_count 40", "_count 80")
    + 'pg_stat_io_writes_total{backend_type="checkpointer",target="default"} 7 1764300000000\n'
)


def test_counters_advance_at_their_recorded_rate_and_gauges_hold() -> None:
    comments, series = recorded_series(FIRST, SECOND, seconds=20)
    body = render(comments, series, elapsed=10).replace(PLACEHOLDER, "t0042")
    got = dict(samples(body))
    assert got == {
        'pg_stat_io_reads_total{backend_type="client backend",target="t0042"}': 190.0,
        'pg_stat_io_reads_created{backend_type="client backend",target="t0042"}': 1.7e9,
        'pg_aio_in_flight{target="t0042"}': 5.0,
        'pg_aio_poll_duration_seconds_bucket{le="+Inf",target="t0042"}': 40.0,
        'go_gc_duration_seconds{quantile="0.5"}': 0.004,
        "go_gc_duration_seconds_count": 100.0,
        # Recorded once: no rate; its timestamp dropped (the replay's scrape time is now).
        'pg_stat_io_writes_total{backend_type="checkpointer",target="t0042"}': 7.0,
    }
    assert "# TYPE pg_aio_in_flight gauge" in body.splitlines()


def test_a_counter_that_went_back_between_the_recordings_holds() -> None:
    # A reset (pg_stat_reset_shared) between the recordings: no negative rate.
    _, series = recorded_series(SECOND, FIRST, seconds=20)
    reads = next(s for s in series if s.key.startswith("pg_stat_io_reads_total"))
    assert reads.rate == 0.0

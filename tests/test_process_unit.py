"""The daemon's own exposition helpers against prometheus_client, which it no longer imports:
sample values as its floatToGoString writes them, process_* as its ProcessCollector does."""

from __future__ import annotations

import math
import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from pg_aio_exporter.expose import process
from pg_aio_exporter.expose.metricset import number

pytestmark = pytest.mark.unit


@given(st.floats(max_value=1e10, exclude_max=True) | st.just(math.nan))
def test_a_value_below_1e10_is_written_as_prometheus_client_writes_it(value: float) -> None:
    assert number(value) == floatToGoString(value)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (999999.0, "999999.0"),
        (0.5, "0.5"),
        (-1234567.0, "-1234567.0"),
        (1e10, "1e+10"),  # prometheus_client: 1e+010; Go, hence Prometheus: 1e+10
        (12345678901.0, "1.2345678901e+10"),
        (1.5e16, "1.5e+16"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
    ],
)
def test_values_take_go_s_exponent_from_1e06(value: float, written: str) -> None:
    assert number(value) == written
    assert float(written) == value


def families(text: str) -> dict[str, tuple[str, str, float]]:
    """name -> (type, help, value) of a text of one-sample families."""
    return {
        f.name: (f.type, f.documentation, f.samples[0].value)
        for f in text_string_to_metric_families(text)
    }


def test_process_families_are_the_client_library_s() -> None:
    """Same names, types, help texts and order as ProcessCollector's, and values that agree:
    the same start time and file descriptor limit, memory and CPU within what the two reads
    apart may move."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    theirs_text = generate_latest(registry).decode()
    ours_text = process.render().decode()
    theirs, ours = families(theirs_text), families(ours_text)
    assert list(ours) == list(theirs)
    assert {n: f[:2] for n, f in ours.items()} == {n: f[:2] for n, f in theirs.items()}
    for name in ("process_start_time_seconds", "process_max_fds"):
        assert ours[name][2] == pytest.approx(theirs[name][2], abs=0.01), name
    for name in ("process_virtual_memory_bytes", "process_resident_memory_bytes"):
        assert ours[name][2] == pytest.approx(theirs[name][2], rel=0.05), name
    # The parser names a counter's family without its _total.
    assert 0 <= ours["process_cpu_seconds"][2] - theirs["process_cpu_seconds"][2] < 1
    assert abs(ours["process_open_fds"][2] - theirs["process_open_fds"][2]) <= 2
    assert ours["process_start_time_seconds"][2] < time.time()


def test_process_cpu_counts_this_process_work() -> None:
    before = process.values()[3]
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    assert process.values()[3] - before >= 0.25


def test_open_fds_count_this_process_files() -> None:
    before = process.values()[4]
    with open(os.devnull) as _a, open(os.devnull) as _b:
        assert process.values()[4] == before + 2

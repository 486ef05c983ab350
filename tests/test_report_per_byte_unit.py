"""Intervals on read wait and buffer write time per byte against the baseline (issue 43 item
5), pure logic: the sub-windows' ratio estimator, its coverage on simulated windows, the claim
rule on a regression, and the interval in the verdict, the text, the page and the JSON."""

from __future__ import annotations

import json
import math
import random
import statistics

import jsonschema
import pytest

from pg_aio_exporter.report import document, page, reload, text
from pg_aio_exporter.report.margin import Estimate, Ratio, join_short, ratio_batches, ratio_rse
from pg_aio_exporter.report.outcome import judge
from pg_aio_exporter.report.side import Batches, Regression
from pg_aio_exporter.thresholds import BaselineSettings
from test_report_unit import BULK, KB, PG17, T, reads, summary

pytestmark = pytest.mark.unit
SUB_WINDOWS = 12  # a 2-minute window polled every 10 s
SECONDS = 10.0 * SUB_WINDOWS


def test_sub_windows_join_to_the_least_length() -> None:
    """The worker's phase cuts the first poll interval short (3 s) and the window's end the last
    (2 s): each joins its neighbour, as active time's sub-windows do."""
    joined = join_short([[1.0, 3.0], [4.0, 10.0], [5.0, 10.0], [1.0, 2.0]], 5.0)
    assert joined == [[5.0, 13.0], [6.0, 12.0]]
    assert join_short([[1.0, 10.0]], 5.0) == [[1.0, 10.0]]


def test_the_linearised_sub_windows_weigh_by_bytes() -> None:
    """Three sub-windows of 1000 MB at 1 ms per MB and one of 1 MB at 10 ms: the window's
    ratio is (3 + 0.01) / 3001; each sub-window's own ratio would spread 1 to 10 ms, as if the
    single MB counted like the thousands."""
    parts = [(1.0, 1000.0), (1.0, 1000.0), (1.0, 1000.0), (0.01, 1.0)]
    batches = ratio_batches(parts)
    assert batches is not None
    assert statistics.mean(batches) == pytest.approx(3.01 / 3001)
    naive = [n / d for n, d in parts]
    assert statistics.stdev(batches) < statistics.stdev(naive) / 5
    assert ratio_batches([(0.0, 0.0)] * 4) is None  # no bytes: no ratio


def test_too_few_sub_windows_give_no_interval() -> None:
    assert ratio_rse([(1.0, 1000.0, 10.0)] * 3, 30.0) is None
    steady = ratio_rse([(1.0, 1000.0, 10.0)] * 4, 40.0)
    assert steady == 0.0  # no spread: the 1% floor (Estimate.of) bounds it


def window(rng: random.Random, per_mb: float) -> Estimate:
    """A simulated 2-minute window of 12 sub-windows: reads in bursts (the load moves: 20 to
    200 reads of a MB per sub-window), each read's wait lognormal with sd 1 in the log (mean 1)
    times `per_mb`, and a slow spell in a third of the sub-windows (storage hiccups, 1.5x): the
    window's read wait per MB with its error."""
    parts = []
    for _ in range(SUB_WINDOWS):
        mb = rng.randint(20, 200)
        spell = 1.5 if rng.random() < 1 / 3 else 1.0
        waits = sum(rng.lognormvariate(-0.5, 1.0) for _ in range(mb)) * per_mb * spell
        parts.append((waits, float(mb), 10.0))
    value = sum(p[0] for p in parts) / sum(p[1] for p in parts)
    rse = ratio_rse(parts, SECONDS)
    assert rse is not None
    return Estimate.of(value, rse)


def test_the_interval_holds_the_true_ratio_nine_times_in_ten() -> None:
    """400 A/A pairs of simulated windows: the 90% interval of their ratio holds 1 in at least
    88% (the spread is what the sub-windows show, no better), and it is not wider than needed:
    its median half-width at most 2.5 times what the pairs' own spread of log ratios gives at
    90%."""
    rng = random.Random(5)
    inside, widths, logs = 0, [], []
    for _ in range(400):
        before = window(rng, 1.0)
        after = window(rng, 1.0)
        ratio = Ratio.of(after, before)
        assert ratio is not None
        low, high = ratio.interval
        inside += low <= 1 <= high
        widths.append(ratio.half_width)
        logs.append(math.log(ratio.value))
    assert inside >= 0.88 * 400
    assert statistics.median(widths) <= 2.5 * 1.645 * statistics.pstdev(logs)


def test_a_doubled_wait_is_claimed_slower_and_an_equal_one_is_not() -> None:
    """Reads twice as slow per MB: slower claimed in nearly every pair (the interval's half-width
    some ±15-25%). A/A: slower or faster claimed in at most 1 pair of 10."""
    rng = random.Random(7)
    doubled = claimed = 0
    for _ in range(100):
        before = window(rng, 1.0)
        after = window(rng, 2.0)
        same = window(rng, 1.0)
        slower, aa = Ratio.of(after, before), Ratio.of(same, before)
        assert slower is not None and aa is not None
        doubled += slower.slower
        claimed += aa.decided
    assert doubled >= 95
    assert claimed <= 10


def test_a_regression_inside_its_interval_is_not_claimed() -> None:
    """3.1x the baseline's wait per byte, above the regression factor (3): a regression with no
    interval (as before, a baseline saved without sub-windows) and with a narrow one; not with
    an interval reaching below 1 (nor a saturation signal)."""
    settings = BaselineSettings(regression_factor=3.0, latency_factor=2.0)
    bare = Regression(3.1, 1.0, 3.1)
    assert bare.regressed(settings) and bare.saturating(settings)
    narrow = Regression(3.1, 1.0, 3.1, Ratio(3.1, 0.1))
    assert narrow.regressed(settings) and narrow.shown == "3.10x (2.63-3.65x)"
    wide = Regression(3.1, 1.0, 3.1, Ratio(3.1, 0.8))
    assert wide.margin is not None and wide.margin.interval[0] < 1
    assert not wide.regressed(settings) and not wide.saturating(settings)
    assert wide.undecided == "about the same (0.83-11.56x)"
    assert not Regression(0.5, 1.0, 0.5, Ratio(0.5, 0.8)).faster


def sub_windows(read_seconds: float, read_bytes: float, spread: float) -> Batches:
    """12 sub-windows of 10 s summing to the window's read time and bytes, their time per byte
    alternately `spread` above and below the window's."""
    bytes_each = read_bytes / SUB_WINDOWS
    return tuple(
        (read_seconds / SUB_WINDOWS * (1 + spread * (-1) ** i), bytes_each, 10.0)
        for i in range(SUB_WINDOWS)
    )


def compared(spread: float) -> tuple[str, dict[str, object], str, str]:
    """17 reading 8 kB at 1 ms, 18 at 3.1 ms (above the regression factor, 3), both over 2
    minutes with sub-windows `spread` apart: the verdict on reads, the JSON, the text and the
    page."""
    before_rows = {BULK: reads(2_000, 8 * KB, 1.0)}
    after_rows = {BULK: reads(2_000, 8 * KB, 3.1)}
    baseline = summary(
        before_rows,
        SECONDS,
        facts=PG17,
        read_batches=sub_windows(2.0, 2_000 * 8 * KB, spread),
    )
    now = summary(after_rows, SECONDS, read_batches=sub_windows(6.2, 2_000 * 8 * KB, spread))
    report = judge(now, T, baseline)
    doc = json.loads(document.dumps(report, T))
    jsonschema.validate(doc, json.loads(document.SCHEMA_FILE.read_text()))
    assert reload.from_json(doc).read_batches == now.read_batches
    html = page.render_report(doc, None)
    return report.verdict.reads, doc, text.render(report, T), html


def test_the_interval_is_in_the_verdict_the_json_the_text_and_the_page() -> None:
    """Sub-windows 10% apart: the log ratio's sd is the two windows' (each 10% / sqrt(12)
    widened by t, 1.833 / 1.645, with the flush lag's 0.39%) together:
    3.10x, 90% interval 2.85-3.37x, and the regression is claimed."""
    reads_verdict, doc, rendered, html = compared(0.10)
    sd = 0.10 * math.sqrt(12 / 11)  # the sub-windows' relative sd
    # t for 9 degrees of freedom (the table's last) over the normal's; the flush lag: 1 s of
    # 120 at each end, a second's sd sd x sqrt(10 s per sub-window).
    lag = math.sqrt(2) / SECONDS * sd * math.sqrt(10)
    one = math.hypot(sd / math.sqrt(12) * 1.833 / 1.645, lag)
    spread = math.exp(1.645 * math.hypot(one, one))
    low, high = 3.1 / spread, 3.1 * spread
    shown = f"3.10x ({low:.2f}-{high:.2f}x)"
    assert f"{shown} slower per MiB: a read wait regression." in reads_verdict
    figure = doc["comparison"]["rows"][0]["figures"]["seconds_per_byte"]  # type: ignore[index]
    assert figure["interval"] == pytest.approx([low, high], rel=0.01)
    finding = next(f for f in doc["findings"] if f["id"] == "read_latency_regression")  # type: ignore[attr-defined]
    assert finding["evidence"]["interval"] == pytest.approx([low, high], rel=0.01)
    assert shown in rendered and f"{low:.2f}-{high:.2f}x" in html


def test_a_ratio_whose_interval_holds_one_is_not_claimed() -> None:
    """Sub-windows 200% apart (a bursty load): the same 3.1x spans 1, so no regression is
    found and the verdict claims no direction."""
    reads_verdict, doc, _, _ = compared(2.0)
    assert "no direction claimed" in reads_verdict and "regression" not in reads_verdict
    assert "read_latency_regression" not in {f["id"] for f in doc["findings"]}  # type: ignore[attr-defined]

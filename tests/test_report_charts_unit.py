"""The page's charts draw whatever text the server holds (pure logic, matplotlib's svg backend):
a statement's text or a window's label is drawn as it is, never parsed as mathtext or TeX."""

from __future__ import annotations

import pytest

from pg_aio_exporter.report.charts import Column, charts

pytestmark = pytest.mark.unit

# Dollar signs pair up as mathtext ("$1 ^ $" is a superscript of nothing: matplotlib raises
# when it draws), and a backslash starts a TeX command: every chart is drawn after the whole
# window was measured.
TEXTS = ["SELECT $1 ^ $2", r"SELECT '\frac{' || $1 || '$'", "SELECT $$ $x_{$$"]


def test_statement_texts_and_labels_are_drawn_as_they_are() -> None:
    statements = [
        {"fingerprint": f"{i:016x}", "text": text, "calls": 3, "exec_seconds": 1.5 + i}
        for i, text in enumerate(TEXTS)
    ]
    label = "now ($1 ^ $2)"
    drawn = charts([Column(label, {})], [(label, {"workload": {"statements": statements}})])
    page = "".join(chart.svg for chart in drawn)
    # Drawn as text (svg.fonttype none), each statement's first 24 characters: $ and ^ kept.
    assert "SELECT $1 ^ $2" in page
    assert "SELECT $$ $x_{$$" in page

"""`report --format html` and `compare --format html` made from a real server under a real
scanning workload, opened in real headless Chromium with its network cut off, and checked by
the Nu HTML checker.

Four pages: healthy storage; slowed reads (the read-delay shim); a report against a baseline
(the healthy one); and a 3-way compare of the three saved reports. Three 10 s reports in all.
Screenshots at 1280 and 390 px wide go to tests/browser.py's ARTEFACTS directory.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import psycopg
import pytest
from selenium import webdriver

from browser import ARTEFACTS, chromium, screenshot, vnu
from harness import scanning
from pg_aio_exporter.demo.server import LocalServer
from pg_aio_exporter.demo.workload import ROWS_PER_MB, create_table
from pg_aio_exporter.report.document import SCHEMA_FILE
from pg_aio_exporter.report.series import MAX_POINTS
from slowread import SlowReads

TABLES = ("t0", "t1", "t2")
TABLE_MB = 12
SLOW_US = 15_000
CHARTS = 5  # wait events, throughput, read size, io workers, statements
MAX_BYTES = 1_000_000


def pg_aio(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


class Page:
    def __init__(self, name: str, path: Path, doc: dict[str, Any], docs: dict[str, Any]):
        self.name, self.path, self.doc = name, path, doc
        self.docs = docs  # label prefix ("baseline:", "A:", ...) -> that window's document


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Page]]:
    out = tmp_path_factory.mktemp("html")
    server = LocalServer.create(
        settings={
            "shared_buffers": "16MB",
            "track_io_timing": "on",
            "io_method": "worker",
            "io_workers": "3",
            "shared_preload_libraries": "pg_stat_statements",
        }
    )
    shim = SlowReads(server)
    server.start()
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        for table in TABLES:
            create_table(server.dsn(), TABLE_MB, table)

        def report(name: str, delay_us: int, *args: str) -> Page:
            saved = out / f"{name}.json"
            shim.set_delay(delay_us)
            try:
                with scanning(server.dsn(), TABLES, rows=2 * ROWS_PER_MB, settle=1):
                    result = pg_aio(
                        "report", "--dsn", server.dsn(), "--duration", "10s",
                        "--save", str(saved), "--format", "html", *args,
                    )  # fmt: skip
            finally:
                shim.set_delay(0)
            page = out / f"{name}.html"
            page.write_text(result.stdout)
            doc = json.loads(saved.read_text())
            return Page(name, page, doc, {"": doc})

        healthy = report("healthy", 0)
        slowed = report("slowed", SLOW_US)
        against = report(
            "baseline", SLOW_US // 3, "--baseline", str(healthy.path.with_suffix(".json"))
        )
        against.docs["baseline:"] = healthy.doc
        saved = [str(p.path.with_suffix(".json")) for p in (healthy, slowed, against)]
        compared = out / "compare.html"
        compared.write_text(pg_aio("compare", *saved, "--format", "html").stdout)
        table = json.loads(pg_aio("compare", *saved, "--format", "json").stdout)
        three = Page(
            "compare",
            compared,
            table,
            {"A:": healthy.doc, "B:": slowed.doc, "C:": against.doc},
        )
        yield {p.name: p for p in (healthy, slowed, against, three)}
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    with chromium() as driver:
        yield driver


NAMES = ("healthy", "slowed", "baseline", "compare")


def test_saved_reports_carry_bounded_series(pages: dict[str, Page]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    for name in ("healthy", "slowed", "baseline"):
        doc = pages[name].doc
        jsonschema.validate(doc, schema)
        series = doc["series"]
        polls, samples = series["polls"], series["samples"]
        assert 1 <= len(polls["at_seconds"]) <= MAX_POINTS, name
        assert 5 <= len(samples["at_seconds"]) <= MAX_POINTS, name
        assert max(polls["read_bytes_per_second"]) > 0, name
        assert any(max(w["sessions"]) > 0 for w in samples["wait_events"]), name
        assert (
            polls["io_combine_limit_bytes"] == doc["server"]["settings"]["io_combine_limit_bytes"]
        )
    # The slowed window's reads waited longer per MiB than the healthy one's, in the series too.
    slow = pages["slowed"].doc["series"]["polls"]["read_seconds_per_byte"]
    fast = pages["healthy"].doc["series"]["polls"]["read_seconds_per_byte"]
    assert max(v for v in slow if v) > max(v for v in fast if v)


@pytest.mark.parametrize("name", NAMES)
def test_page_is_self_contained_and_small(pages: dict[str, Page], name: str) -> None:
    text = pages[name].path.read_text()
    assert len(text.encode()) < MAX_BYTES
    for needle in ("<script", "<link", " src=", "@import", "<iframe", "<object"):
        assert needle not in text, needle
    # The only URLs are XML namespace names, which nothing fetches.
    urls = set(re.findall(r"https?://[^\"'\s)]*", text))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls


def resolve(page: Page, path: str) -> Any:
    prefix, sep, rest = path.partition(":") if ":" in path else ("", "", path)
    node: Any = page.docs[prefix + sep] if sep else page.doc
    for part in rest.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


JS_FACTS = """
const out = {resources: performance.getEntriesByType('resource').length, charts: []};
for (const fig of document.querySelectorAll('figure')) {
  const svg = fig.querySelector('svg');
  const drawn = [...fig.querySelectorAll('svg [id*="-data-"]')].filter(g => {
    const b = g.getBBox(); return b.width > 0 && b.height > 0 && g.querySelector('path, use');
  }).length;
  out.charts.push({label: svg && svg.getAttribute('aria-label'),
    role: svg && svg.getAttribute('role'),
    drawn: drawn, rows: fig.querySelectorAll('details table tbody tr').length,
    width: svg ? svg.getBoundingClientRect().width : 0});
}
out.values = [...document.querySelectorAll('[data-json]')].map(e => [e.dataset.json,
  e.hasAttribute('data-value') ? e.dataset.value : null, e.textContent]);
out.series = [...document.querySelectorAll('span[data-series]')].map(e => [e.dataset.series,
  e.dataset.value]);
function lum(c) {
  const v = c.match(/[\\d.]+/g).slice(0, 3).map(x => { x = x / 255;
    return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
}
out.contrast = [];
for (const e of document.querySelectorAll('body *')) {
  if (e.closest('svg')) continue;
  const own = [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  if (!own) continue;
  const ratio = (1.05) / (lum(getComputedStyle(e).color) + 0.05);
  out.contrast.push([e.tagName, ratio]);
}
return out;
"""


@pytest.mark.parametrize("name", NAMES)
def test_page_in_chromium(pages: dict[str, Page], browser: webdriver.Chrome, name: str) -> None:
    page = pages[name]
    # selenium (4.51) leaves ChromiumDriver.get_log unannotated: its two calls are ignored.
    browser.get_log("browser")  # type: ignore[no-untyped-call]  # what an earlier page logged
    browser.get(page.path.as_uri())
    facts = browser.execute_script(JS_FACTS)
    # Loads from the file alone, with the network off, and logs nothing.
    assert facts["resources"] == 0
    logged = browser.get_log("browser")  # type: ignore[no-untyped-call]
    errors = [e for e in logged if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    # Every chart drew data, and says in words and numbers what it draws.
    assert len(facts["charts"]) == CHARTS, facts["charts"]
    for chart in facts["charts"]:
        assert chart["role"] == "img" and chart["label"], chart
        assert chart["drawn"] >= 1, chart
        assert chart["rows"] >= 1, chart
        assert chart["width"] > 300, chart
    # The numbers in the page are the JSON's.
    checked = 0
    for path, value, text in facts["values"]:
        expected = resolve(page, path)
        if value is not None:
            assert value == ("" if expected is None else repr(float(expected))), path
        else:
            assert " ".join(text.split()).endswith(" ".join(str(expected).split())) or (
                str(expected) in text
            ), (path, text, expected)
        checked += 1
    assert checked >= (7 * 3 if name == "compare" else 4 + 6), checked
    for path, value in facts["series"]:
        expected = resolve(page, path)
        assert value == ("" if expected is None else repr(float(expected))), path
    assert len(facts["series"]) > 10
    # Text is dark enough on the white page (WCAG AA: 4.5:1).
    low = [(tag, round(r, 2)) for tag, r in facts["contrast"] if r < 4.5]
    assert low == [], low
    # Laptop and phone: at 390 px nothing is wider than the screen (tables scroll in place).
    for width in (1280, 390):
        wide = screenshot(browser, width, ARTEFACTS / "report_html" / f"{name}-{width}.png")
        assert wide <= width, (width, wide)
    # Printed: the print stylesheet applies (the tables' toggles go) and a PDF comes out.
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        hidden = browser.execute_script(
            "return [...document.querySelectorAll('details > summary')]"
            ".every(e => getComputedStyle(e).display === 'none')"
        )
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert hidden
    pdf = base64.b64decode(browser.execute_cdp_cmd("Page.printToPDF", {})["data"])
    assert pdf.startswith(b"%PDF") and re.search(rb"/Type\s*/Page[^s]", pdf)
    (ARTEFACTS / "report_html" / f"{name}.pdf").write_bytes(pdf)


def test_pages_validate(pages: dict[str, Page]) -> None:
    messages = vnu(*(pages[n].path for n in NAMES))
    assert [m for m in messages if m["type"] in ("error", "non-document-error")] == []
    assert [m for m in messages if m.get("subType") == "warning"] == []


@pytest.mark.unit
def test_the_daemon_never_loads_the_charting_library() -> None:
    # What the exporter imports to serve /metrics, and what `report` imports until a page is
    # made: neither matplotlib nor the page module (the daemon's RSS, docs/performance.md).
    probe = (
        "import sys, pg_aio_exporter.cli, pg_aio_exporter.app;"
        "print(sorted(m for m in sys.modules if m.startswith(('matplotlib', 'numpy'))"
        " or m == 'pg_aio_exporter.report.page'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_an_older_saved_report_still_compares_on_a_page(
    pages: dict[str, Page], tmp_path: Path
) -> None:
    # A schema 2 report (no series) beside a schema 3 one: the page is made; only the newer
    # window has lines.
    old = {k: v for k, v in pages["healthy"].doc.items() if k != "series"} | {"schema": 2}
    (tmp_path / "old.json").write_text(json.dumps(old))
    new = str(pages["slowed"].path.with_suffix(".json"))
    text = pg_aio("compare", str(tmp_path / "old.json"), new, "--format", "html").stdout
    assert 'data-series="B:series.polls.read_bytes_per_second.0"' in text
    assert 'data-series="A:' not in text

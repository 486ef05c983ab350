"""A real browser and a real HTML checker for the report's page (tests/test_report_html.py).

Chromium: Debian's `chromium` and `chromium-driver` (scripts/system-deps.sh), headless, driven
by selenium, with a fresh profile and the network cut off through the DevTools protocol.
The Nu HTML checker: npm's `vnu-jar`, installed once per machine into ~/.cache/pg_aio_exporter/
(as pgbins installs PostgreSQL 16/17), run on the installed Java.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from pgbins import CACHE, npm_install

VNU_VERSION = "26.9.27"
VNU_HOME = CACHE.parent / f"vnu-jar-{VNU_VERSION}"
VNU_JAR = VNU_HOME / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Screenshots and pages the tests leave for people to look at; never committed.
ARTEFACTS = Path(
    os.environ.get("PG_AIO_ARTEFACTS", Path(tempfile.gettempdir(), "pg_aio_exporter-artefacts"))
)


def chromium_flags(profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",  # as root
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ]


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """Headless Chromium with its network off (every request fails) and its console logged."""
    profile = Path(tempfile.mkdtemp(prefix="pg-aio-chromium-"))
    options = webdriver.ChromeOptions()
    for flag in chromium_flags(profile):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: webdriver.Chrome, width: int, path: Path, height: int | None = None) -> int:
    """The page at `width` CSS pixels wide, whole or its top `height` pixels, into `path`;
    returns the page's scroll width."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    whole = int(driver.execute_script("return document.documentElement.scrollHeight"))
    height = whole if height is None else min(height, whole)
    scroll_width = int(driver.execute_script("return document.documentElement.scrollWidth"))
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        },
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return scroll_width


def vnu(*pages: Path) -> list[dict[str, Any]]:
    """The Nu HTML checker's errors and warnings for `pages`."""
    if not VNU_JAR.exists():
        npm_install(f"vnu-jar@{VNU_VERSION}", VNU_HOME, VNU_JAR)
    result = subprocess.run(
        ["java", "-jar", str(VNU_JAR), "--format", "json", "--exit-zero-always", *map(str, pages)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    messages: list[dict[str, Any]] = json.loads(result.stderr)["messages"]
    return messages

"""Recorded /metrics expositions served again as a fleet: /KIND?target=NAME answers the second
of two recordings of KIND with our `target` label set to NAME and every counter advancing at
its rate between the two recordings (histograms and summaries too), so that rate() over the
replay sees the recorded traffic. Gauges hold their recorded value. bench/fleet.py scrapes
1,000 targets of it."""

from __future__ import annotations

import re
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pg_aio_exporter.demo.server import free_port

PLACEHOLDER = "\x00"  # where a target's name goes in a rendered exposition
OUR_TARGET = re.compile(r'target="[^"]*"')
ADVANCING = ("counter", "histogram", "summary")


@dataclass(frozen=True)
class Series:
    key: str  # the sample line up to its value, a target label's value as PLACEHOLDER
    value: float  # at the second recording
    rate: float  # per second between the recordings; 0 for gauges


def _families(text: str) -> dict[str, str]:
    return {
        words[2]: words[3]
        for words in (line.split() for line in text.splitlines() if line.startswith("# TYPE "))
    }


def samples(text: str) -> Iterator[tuple[str, float]]:
    """(sample line up to its value, value) of an exposition, timestamps dropped."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        cut = line.rindex("}") + 1 if "}" in line else line.index(" ")
        yield line[:cut], float(line[cut:].split()[0])


def _family_type(name: str, families: dict[str, str]) -> str:
    for suffix in ("", "_total", "_bucket", "_count", "_sum", "_created"):
        if suffix and name.endswith(suffix) and name[: -len(suffix)] in families:
            return families[name[: -len(suffix)]]
        if not suffix and name in families:
            return families[name]
    return "untyped"


def recorded_series(first: str, second: str, seconds: float) -> tuple[list[str], list[Series]]:
    """The comment lines and series of `second`, counters with their rate since `first`."""
    families = _families(second)
    before = dict(samples(first))
    series = []
    for key, value in samples(second):
        name = key.split("{", 1)[0]
        advances = (
            _family_type(name, families) in ADVANCING
            and not name.endswith("_created")
            and "quantile=" not in key
        )
        rate = max(0.0, (value - before[key]) / seconds) if advances and key in before else 0.0
        series.append(Series(OUR_TARGET.sub(f'target="{PLACEHOLDER}"', key), value, rate))
    comments = [line for line in second.splitlines() if line.startswith("#")]
    return comments, series


def render(comments: Sequence[str], series: Sequence[Series], elapsed: float) -> str:
    """The exposition `elapsed` seconds after the second recording, PLACEHOLDER for the target."""
    lines = [*comments, *(f"{s.key} {s.value + s.rate * elapsed!r}" for s in series)]
    return "\n".join(lines) + "\n"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A scraper that gave up (its scrape timeout) is the engine's to count, as `up` 0."""


class Replay:
    """Serves /KIND?target=NAME for each of `kinds` from `recordings`: KIND-1.prom and
    KIND-2.prom, the seconds between them in `gap`. A body is rendered once a second at most,
    and only the name differs between targets: 1,000 targets every 30 s are 33 requests/s."""

    def __init__(self, recordings: Path, kinds: Iterable[str]) -> None:
        self.started = time.monotonic()
        gap = float((recordings / "gap").read_text())
        self.kinds = {
            kind: recorded_series(
                (recordings / f"{kind}-1.prom").read_text(),
                (recordings / f"{kind}-2.prom").read_text(),
                gap,
            )
            for kind in kinds
        }
        self._cache: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                target = urllib.parse.parse_qs(url.query).get("target", [""])[0]
                kind = url.path.strip("/")
                if kind not in replay.kinds:
                    self.send_error(404)
                    return
                body = replay.body(kind).replace(PLACEHOLDER, target).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", free_port()), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def body(self, kind: str) -> str:
        second = int(time.monotonic() - self.started)
        with self._lock:
            if (kind, second) not in self._cache:
                self._cache = {k: v for k, v in self._cache.items() if k[1] == second}
                self._cache[kind, second] = render(*self.kinds[kind], second)
            return self._cache[kind, second]

    def series(self, kind: str) -> int:
        return len(self.kinds[kind][1])

    def stop(self) -> None:
        self.server.shutdown()

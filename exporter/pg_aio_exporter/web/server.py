"""HTTP: /metrics from memory, a landing page, and /healthz. Never touches PostgreSQL."""

from __future__ import annotations

import html
import logging
import re
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from pg_aio_exporter import __version__
from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.config.targets import Target
from pg_aio_exporter.config.webconfig import WebConfig
from pg_aio_exporter.expose.exposition import Exposition

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# RFC 9110 12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
_QVALUE = re.compile(r"(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)")
_GZIP = frozenset({"gzip", "x-gzip"})  # RFC 9110 8.4.1.3: x-gzip is gzip
RELOAD_PATH = "/-/reload"
# A reload request carries no body worth reading; one this large is refused unread.
MAX_POST_BODY = 64 * 1024
# What a reload answers: whether it was applied, and the one line that says what it did or why not.
Reload = Callable[[], tuple[bool, str]]

log = logging.getLogger("pg_aio_exporter")


def _weights(header: str) -> dict[str, float]:
    """Accept-Encoding (RFC 9110 12.5.3) -> {coding: weight}; a weight that does not parse
    accepts nothing, so a garbled entry never turns compression on."""
    weights = {}
    for element in header.split(","):
        coding, _, params = element.partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        weight = 1.0
        if params:
            name, _, qvalue = params.strip().partition("=")
            qvalue = qvalue.strip()
            fine = name.strip().lower() == "q" and _QVALUE.fullmatch(qvalue)
            weight = float(qvalue) if fine else 0.0
        weights[coding] = weight
    return weights


def wants_gzip(header: str | None) -> bool:
    """Whether to gzip a response for this Accept-Encoding: gzip (or `*`) acceptable, and not
    weighted below identity. Without the header, plain text, as Prometheus' own servers do."""
    if header is None:
        return False
    weights = _weights(header)
    named = [weights[c] for c in _GZIP if c in weights]
    gzip = max(named) if named else weights.get("*", 0.0)
    return gzip > 0 and gzip >= weights.get("identity", 0.0)


def parse_listen_address(address: str, flag: str = "--web.listen-address") -> tuple[str, int]:
    """':9188', '127.0.0.1:9188', '[::1]:9188' -> (host, port); '' host = all interfaces."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"invalid {flag} {address!r}: use [host]:port")
    return host.strip("[]"), int(port)


def landing_page(targets: Sequence[Target], metrics_path: str) -> bytes:
    rows = "".join(f"<li>{html.escape(t.name)}: {html.escape(t.address)}</li>" for t in targets)
    return (
        "<!doctype html><html><head><title>pg_aio_exporter</title></head><body>"
        f"<h1>pg_aio_exporter {__version__}</h1>"
        "<p>PostgreSQL asynchronous I/O exporter.</p>"
        f'<p><a href="{html.escape(metrics_path)}">Metrics</a> · <a href="/healthz">Health</a></p>'
        f"<h2>Targets</h2><ul>{rows}</ul></body></html>"
    ).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    exposition: Exposition
    metrics_path: str
    landing: bytes
    web: WebConfig
    reload: Reload | None

    def get_request(self) -> tuple[socket.socket, Any]:
        # TLS per connection with the web config of the moment, so that a reload may change
        # certificates, or turn TLS on or off. The handshake happens on first read, in the
        # request's own thread: a slow client must not hold up the accept loop.
        conn, address = self.socket.accept()
        tls = self.web.tls
        if tls is not None:
            conn = tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, address

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        # A client that hangs up, or speaks plain HTTP to the TLS port: its problem, not ours.
        # socketserver would print a traceback to stderr, outside the log format.
        exc = sys.exc_info()[1]
        log.debug("request failed", extra={"client": client_address[0], "err": str(exc)})


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = 30  # a client that stalls (or a TLS handshake that never ends) frees its thread

    def handle(self) -> None:
        sans = self.server.web.allowed_sans
        if sans and not self._client_allowed(sans):
            return  # hung up on, as the toolkit ends the handshake
        super().handle()

    def _client_allowed(self, sans: frozenset[str]) -> bool:
        """The client certificate (verified: client_allowed_sans needs it) names one of
        `sans` among its Subject Alternative Names (DNS, IP, e-mail or URI)."""
        connection = self.connection
        if not isinstance(connection, ssl.SSLSocket):
            return False  # accepted as plain HTTP just before a reload asked for certificates
        connection.do_handshake()
        cert = connection.getpeercert() or {}
        entries: Any = cert.get("subjectAltName", ())  # ((type, value), ...)
        names = {str(value) for _, value in entries}
        if names & sans:
            return True
        log.debug(
            "client certificate refused: no allowed SAN",
            extra={"client": self.client_address[0], "sans": ",".join(sorted(names))},
        )
        return False

    def do_HEAD(self) -> None:
        self.do_GET()  # the same status and headers; no body is written

    def _refused(self, path: str) -> bool:
        """Answers 429 or 401 when the web config's rate limit or basic auth refuses the
        request; /healthz stays open for liveness probes."""
        auth = self.server.web.auth
        limit = self.server.web.rate_limit
        if limit is not None and not limit.allow():
            self._send(429, "text/plain; charset=utf-8", b"too many requests\n")
        elif (
            auth is not None
            and path != "/healthz"
            and not auth.check(self.headers["Authorization"])
        ):
            self._send(
                401,
                "text/plain; charset=utf-8",
                b"unauthorized\n",
                extra={"WWW-Authenticate": 'Basic realm="pg_aio_exporter"'},
            )
        else:
            return False
        return True

    def do_POST(self) -> None:
        """POST /-/reload: the config file and the web config read again and applied (app.py),
        as Prometheus' own /-/reload; 200, or 500 with the one line that says why not."""
        # Reloads are rare: the connection ends with the answer, so that a body not read (too
        # large, or chunked) is never taken for the next request.
        self.close_connection = True
        length = self.headers["Content-Length"] or "0"
        if not length.isdigit() or int(length) > MAX_POST_BODY:
            self._send(413, "text/plain; charset=utf-8", b"request body too large\n")
            return
        self.rfile.read(int(length))
        path = urlsplit(self.path).path
        if self._refused(path):
            return
        reload = self.server.reload
        if path != RELOAD_PATH or reload is None:
            self._send(405, "text/plain; charset=utf-8", b"method not allowed\n", extra=_GET)
            return
        applied, line = reload()
        self._send(200 if applied else 500, "text/plain; charset=utf-8", f"{line}\n".encode())

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if self._refused(path):
            return
        if path == RELOAD_PATH and self.server.reload is not None:
            self._send(405, "text/plain; charset=utf-8", b"use POST\n", extra={"Allow": "POST"})
        elif path == self.server.metrics_path:
            body = self.server.exposition.body
            vary = {"Vary": "Accept-Encoding"}  # RFC 9110 12.5.5: for caches between us
            if wants_gzip(self.headers["Accept-Encoding"]):
                self._send(200, CONTENT_TYPE, body.gzipped, encoding="gzip", extra=vary)
            else:
                self._start(200, CONTENT_TYPE, body.length, extra=vary)
                if self.command != "HEAD":
                    body.write(self.wfile.write)
        elif path == "/":
            self._send(200, "text/html; charset=utf-8", self.server.landing)
        elif path == "/healthz":
            self._health()
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _health(self) -> None:
        """200 "ok" while /metrics is current; 503 once the render task stopped renewing it
        (stale_after: a few poll intervals), so that a liveness probe restarts the process."""
        stale = self.server.exposition.stale_for()
        if stale is None:
            self._send(200, "text/plain; charset=utf-8", b"ok\n")
        else:
            message = f"stale: /metrics last rendered {stale:.0f}s ago\n"
            self._send(503, "text/plain; charset=utf-8", message.encode())

    def _send(
        self,
        status: int,
        content_type: str,
        body: bytes,
        encoding: str = "",
        extra: dict[str, str] | None = None,
    ) -> None:
        self._start(status, content_type, len(body), encoding, extra)
        if self.command != "HEAD":
            self.wfile.write(body)

    def _start(
        self,
        status: int,
        content_type: str,
        length: int,
        encoding: str = "",
        extra: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        if encoding:
            self.send_header("Content-Encoding", encoding)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        for name, value in self.server.web.headers:
            self.send_header(name, value)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass  # access logs would be one line per scrape


class _HealthHandler(_Handler):
    """The health listener's: /healthz and nothing else. It stays plain HTTP and open when the
    web config puts /metrics behind TLS, client certificates or basic auth, which probes
    (Docker's HEALTHCHECK, the kubelet) cannot provide."""

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/healthz":
            self._health()
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")


_GET = {"Allow": "GET, HEAD"}


def _start(address: tuple[str, int], handler: type[_Handler]) -> _Server:
    server_class = _Server6 if ":" in address[0] else _Server
    return server_class(address, handler)


def serve(
    address: tuple[str, int],
    exposition: Exposition,
    targets: Sequence[Target],
    metrics_path: str,
    web: WebConfig,
    *,
    reload: Reload | None = None,
) -> ThreadingHTTPServer:
    """Bind and serve in a background thread; raises OSError when the port is taken.
    `reload`: what POST /-/reload runs (None: 405, as for any other path)."""
    server = _start(address, _Handler)
    server.exposition = exposition
    server.metrics_path = metrics_path
    server.reload = reload
    reconfigure(server, targets, web)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


def reconfigure(server: ThreadingHTTPServer, targets: Sequence[Target], web: WebConfig) -> None:
    """A reload's targets (the landing page) and web config (TLS from the next connection;
    basic auth, headers and rate limit from the next request)."""
    assert isinstance(server, _Server)
    server.landing = landing_page(targets, server.metrics_path)
    server.web = web


def serve_health(address: tuple[str, int], exposition: Exposition) -> ThreadingHTTPServer:
    """The plain /healthz listener, in a background thread; OSError when the port is taken."""
    server = _start(address, _HealthHandler)
    server.exposition = exposition  # whose age /healthz answers
    server.reload = None
    server.web = WebConfig()  # plain, open, no extra headers: for probes
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server

"""/metrics protection with --web.config.file: basic auth (bcrypt) and TLS, incl. client certs."""

from __future__ import annotations

import base64
import gzip
import http.client
import socket
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from certs import Certs
from cpu import Stopwatch, assert_median_within, scrape_path
from deploy_files import final_stage, health_port, one, run
from harness import Exporter, labels, wait_for
from pg_aio_exporter.demo.server import LocalServer, free_port
from pg_aio_exporter.web.server import wants_gzip

PASSWORD = "Scr4pe-Secret-77"


def web_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def authed(pg18: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exporter]:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    config = web_config(tmp_path_factory.mktemp("web"), f"basic_auth_users:\n  prom: '{hashed}'\n")
    exp = Exporter("--dsn", pg18.dsn(), "--web.config.file", config, "--poll-interval", "1s")
    yield exp
    exp.stop()


def basic(user: str, password: str) -> str:
    """The Authorization header's value for these credentials."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def status(
    url: str, user: str | None = None, password: str = "", context: ssl.SSLContext | None = None
) -> int:
    request = urllib.request.Request(url)  # noqa: S310
    if user is not None:
        request.add_header("Authorization", basic(user, password))
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as resp:  # noqa: S310
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize(
    ("path", "user", "password", "expected"),
    [
        ("/metrics", None, "", 401),
        ("/metrics", "prom", "wrong", 401),
        ("/metrics", "nobody", PASSWORD, 401),
        ("/", None, "", 401),
        ("/metrics", "prom", PASSWORD, 200),
        ("/", "prom", PASSWORD, 200),
        ("/healthz", None, "", 200),  # liveness probes carry no credentials
    ],
)
def test_basic_auth(
    authed: Exporter, path: str, user: str | None, password: str, expected: int
) -> None:
    assert status(authed.url + path, user, password) == expected


@pytest.mark.timing
def test_basic_auth_cost_is_paid_once(authed: Exporter) -> None:
    status(authed.url + "/metrics", "prom", PASSWORD)
    clock = Stopwatch(scrape_path(authed.proc.pid))
    for _ in range(10):
        code, _ = clock.get(authed.url + "/metrics", {"Authorization": basic("prom", PASSWORD)})
        assert code == 200
    # One bcrypt check takes ~0.2 s of CPU: scrapes within 50 ms, less what this client and
    # the exporter's HTTP threads waited for a CPU, mean it ran once.
    assert_median_within(clock.timings, 0.05)
    assert PASSWORD not in authed.logs()


def fetch(
    exp: Exporter, method: str, path: str, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request with the `prom` credentials: status, headers (lower-case names), raw body."""
    conn = http.client.HTTPConnection("127.0.0.1", exp.port, timeout=5)
    try:
        conn.request(method, path, headers={"Authorization": basic("prom", PASSWORD), **headers})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/metrics", "/", "/healthz"])
def test_head_answers_like_get_without_a_body(authed: Exporter, path: str) -> None:
    status_, headers, body = fetch(authed, "HEAD", path)
    assert status_ == 200
    assert body == b""
    get_status, get_headers, get_body = fetch(authed, "GET", path)
    assert get_status == 200 and get_body
    assert headers["content-type"] == get_headers["content-type"]
    if path != "/metrics":  # the metrics body changes between the two requests
        assert headers["content-length"] == get_headers["content-length"]


@pytest.mark.parametrize(
    ("accept", "gzipped"),
    [
        (None, False),
        ("gzip", True),
        ("gzip;q=0", False),
        ("GZIP ; Q=0.000, deflate", False),
        ("deflate, br", False),
        ("*", True),
        ("*;q=0.5, gzip;q=0", False),
        ("identity;q=0.9, gzip;q=0.5", False),
        ("br;q=1.0, x-gzip;q=0.3", True),
        ("", False),
    ],
)
def test_gzip_as_accept_encoding_says(authed: Exporter, accept: str | None, gzipped: bool) -> None:
    headers = {} if accept is None else {"Accept-Encoding": accept}
    status_, got, body = fetch(authed, "GET", "/metrics", **headers)
    assert status_ == 200
    assert got.get("content-encoding") == ("gzip" if gzipped else None)
    assert got["vary"] == "Accept-Encoding"
    text = (gzip.decompress(body) if gzipped else body).decode()
    assert "pg_aio_exporter_build_info" in text
    assert int(got["content-length"]) == len(body)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, False),  # no header: the client said nothing about codings; send plain text
        ("", False),  # an empty list: only identity
        ("gzip", True),
        ("x-gzip", True),  # RFC 9110 8.4.1.3: equivalent to gzip
        ("deflate, gzip;q=1.0, br", True),
        ("gzip;q=0", False),
        ("gzip;q=0.0", False),
        ("gzip; q=0.001", True),
        ("gzip;q=0, *", False),  # the explicit entry wins over the wildcard
        ("*", True),
        ("*;q=0", False),
        ("identity;q=1, gzip;q=0.8", False),  # the client prefers plain text
        ("identity;q=0.5, gzip;q=0.5", True),  # a tie: ours to choose
        ("identity;q=0", False),  # no gzip offered either: plain is all we have
        ("gzip;q=abc", False),  # an unreadable weight accepts nothing
        ("gzip;q=2", False),  # outside 0..1
        ("gzipx, xgzip", False),
        ("deflate;q=0.5,gzip", True),
    ],
)
def test_accept_encoding_parsing(header: str | None, expected: bool) -> None:
    assert wants_gzip(header) is expected


def client_context(certs: Certs, with_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if with_cert:
        context.load_cert_chain(*certs.pair("client"))
    return context


@pytest.mark.timing
def test_tls(pg18: LocalServer, certs: Certs, tmp_path: Path) -> None:
    cert, key = certs.pair("server")
    config = web_config(tmp_path, f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    exp = Exporter(
        "--dsn",
        pg18.dsn(),
        "--web.config.file",
        config,
        "--poll-interval",
        "1s",
        "--log.level",
        "debug",
        tls=client_context(certs),
    )
    try:
        assert exp.wait_poll()["pg_up"][labels(target="default")] == 1
        # A client that connects and never handshakes must not block the others.
        with socket.create_connection(("127.0.0.1", exp.port)):
            clock = Stopwatch(scrape_path(exp.proc.pid))
            clock.get(exp.url + "/metrics", tls=exp.tls)
            (scraped,) = clock.timings
            assert scraped.own < 0.5, str(scraped)
        with pytest.raises(OSError):  # plain HTTP to the TLS port: the server hangs up
            urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=5)

        # The handler thread logs after hanging up.
        def failure_logged() -> str | None:
            text = exp.logs()
            return text if 'msg="request failed"' in text else None

        log = wait_for(failure_logged, 5, "the failure logged")
        assert "Traceback" not in log, log
        assert all(line.startswith("ts=") for line in log.splitlines()), log
        assert log.count('msg="request failed"') == 1, log  # in the log format, at debug
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(exp.url + "/metrics", timeout=5)  # noqa: S310 (system CAs)
    finally:
        exp.stop()


def test_client_certificates(pg18: LocalServer, certs: Certs, tmp_path: Path) -> None:
    cert, key = certs.pair("server")
    config = web_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certs.ca}\n",
    )
    exp = Exporter(
        "--dsn", pg18.dsn(), "--web.config.file", config, tls=client_context(certs, with_cert=True)
    )
    try:
        assert exp.get("/metrics")[0] == 200
        with pytest.raises(OSError):  # refused during or right after the handshake
            status(exp.url + "/metrics", context=client_context(certs))
    finally:
        exp.stop()


def test_health_listener_answers_probes_while_metrics_need_tls_and_a_client_cert(
    pg18: LocalServer, certs: Certs, tmp_path: Path
) -> None:
    """--web.health-listen-address: plain /healthz for Docker's HEALTHCHECK and the kubelet,
    which cannot present the client certificate the metrics port demands."""
    cert, key = certs.pair("server")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    config = web_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certs.ca}\n"
        f"basic_auth_users:\n  prom: '{hashed}'\n",
    )
    health = free_port()
    exp = Exporter(
        "--dsn",
        pg18.dsn(),
        "--web.config.file",
        config,
        "--web.health-listen-address",
        f"127.0.0.1:{health}",
        tls=client_context(certs, with_cert=True),
    )
    plain = f"http://127.0.0.1:{health}"
    try:
        with urllib.request.urlopen(plain + "/healthz", timeout=5) as resp:  # noqa: S310
            assert (resp.status, resp.read()) == (200, b"ok\n")
        # Nothing else is served there: the metrics stay behind TLS, certificate and password.
        for path in ("/metrics", "/"):
            assert status(plain + path) == 404
        assert status(exp.url + "/metrics", "prom", PASSWORD, exp.tls) == 200
        # The image's HEALTHCHECK, pointed at this listener, passes; at the TLS port it cannot.
        probe = one(final_stage(), "HEALTHCHECK").exec_form()
        image_health = f"127.0.0.1:{health_port(one(final_stage(), 'CMD').exec_form())}/"
        assert image_health in " ".join(probe)
        for port, code in ((health, 0), (exp.port, 1)):
            argv = [a.replace(image_health, f"127.0.0.1:{port}/") for a in probe]
            result = run(*argv, env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
            assert result.returncode == code, (port, result.stderr)
        assert f"health_address=127.0.0.1:{health}" in exp.logs()
    finally:
        exp.stop()

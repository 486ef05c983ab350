"""The exporter-toolkit's web config, every key (its docs/web-configuration.md): one file serves
Debian's prometheus-postgres-exporter and ours, and what Python's ssl can honour is honoured."""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.request
from pathlib import Path

import pytest

from certs import Certs
from harness import Exporter
from pg_aio_exporter.config.webconfig import RateLimit
from pg_aio_exporter.demo.server import LocalServer
from postgres_exporter import PostgresExporter

# Go's names -> OpenSSL's, as the handshake reports them.
CIPHERS = {
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
}
HEADERS = {
    "X-Frame-Options": "deny",
    "X-Content-Type-Options": "nosniff",
    "Strict-Transport-Security": "max-age=31536000",
    "Content-Security-Policy": "default-src 'self'",
    "X-XSS-Protection": "1; mode=block",
}


def shared_file(certs: Certs, directory: Path, tls_extra: str = "") -> str:
    """A web config such as a host running node_exporter and postgres_exporter has: every key
    Debian's postgres_exporter (0.11, exporter-toolkit 0.7) knows."""
    cert, key = certs.pair("server")
    suites = "".join(f"    - {name}\n" for name in CIPHERS)
    headers = "".join(f'    {name}: "{value}"\n' for name, value in HEADERS.items())
    path = directory / "web.yml"
    text = (
        "tls_server_config:\n"
        f"  cert_file: {cert}\n"
        f"  key_file: {key}\n"
        "  client_auth_type: NoClientCert\n"
        "  min_version: TLS12\n"
        "  max_version: TLS12\n"
        "  cipher_suites:\n"
        f"{suites}"
        "  prefer_server_cipher_suites: true\n"
        "  curve_preferences: [CurveP384]\n"
        f"{tls_extra}"
        "http_server_config:\n"
        "  http2: true\n"
        "  headers:\n"
        f"{headers}"
    )
    if "client_allowed_sans" in tls_extra:
        text = text.replace("NoClientCert", "RequireAndVerifyClientCert")
    path.write_text(text)
    return str(path)


def client(certs: Certs, *, with_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if with_cert:
        context.load_cert_chain(*certs.pair("client"))
    return context


def handshake(port: int, context: ssl.SSLContext) -> tuple[str, str, int]:
    """(TLS version, cipher, bits) that a client with `context` agrees with the server."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        cipher = tls.cipher()
        assert cipher is not None
        return cipher[1], cipher[0], cipher[2]


def test_one_file_serves_postgres_exporter_and_ours(
    pg18: LocalServer, certs: Certs, tmp_path: Path
) -> None:
    config = shared_file(certs, tmp_path)
    theirs = PostgresExporter(pg18, web_config=config, tls=client(certs))
    try:
        ours = Exporter("--dsn", pg18.dsn(), "--web.config.file", config, tls=client(certs))
        try:
            body, headers = theirs.get("/metrics")
            assert b"\npg_up 1" in body
            assert {name: headers[name] for name in HEADERS} == HEADERS
            status, _ = ours.get("/metrics")
            assert status == 200
            # max_version TLS12, a cipher suite from the list: ours takes the first (server
            # preference); Go ignores the order since 1.17 and ranks them itself.
            version, cipher, _ = handshake(theirs.port, client(certs))
            assert version == "TLSv1.2" and cipher in CIPHERS.values()
            first = next(iter(CIPHERS.values()))
            assert handshake(ours.port, client(certs))[:2] == ("TLSv1.2", first)
            with urllib.request.urlopen(ours.url + "/metrics", context=client(certs)) as resp:  # noqa: S310
                assert {name: resp.headers[name] for name in HEADERS} == HEADERS
            warnings = [line for line in ours.logs().splitlines() if "level=warn" in line]
            assert len(warnings) == 1 and "http2" in warnings[0], warnings
        finally:
            ours.stop()
    finally:
        theirs.stop()


def test_cipher_suites_and_curves_refuse_what_they_leave_out(
    pg18: LocalServer, certs: Certs, tmp_path: Path
) -> None:
    ours = Exporter(
        "--dsn", pg18.dsn(), "--web.config.file", shared_file(certs, tmp_path), tls=client(certs)
    )
    try:
        outside = client(certs)
        outside.set_ciphers("ECDHE-RSA-CHACHA20-POLY1305")  # not in cipher_suites
        with pytest.raises(ssl.SSLError):
            handshake(ours.port, outside)
        other_curve = client(certs)
        other_curve.set_ecdh_curve("X25519")  # curve_preferences: [CurveP384]
        with pytest.raises(ssl.SSLError):
            handshake(ours.port, other_curve)
        newer = client(certs)
        newer.minimum_version = ssl.TLSVersion.TLSv1_3  # above max_version
        with pytest.raises(ssl.SSLError):
            handshake(ours.port, newer)
    finally:
        ours.stop()


def test_client_allowed_sans(pg18: LocalServer, certs: Certs, tmp_path: Path) -> None:
    """The suite's client certificate names localhost and 127.0.0.1; the stranger's, from the
    same CA, elsewhere.example."""
    config = shared_file(
        certs,
        tmp_path,
        tls_extra=f"  client_ca_file: {certs.ca}\n  client_allowed_sans: [127.0.0.1]\n",
    )
    ours = Exporter(
        "--dsn", pg18.dsn(), "--web.config.file", config, tls=client(certs, with_cert=True)
    )
    try:
        assert ours.get("/metrics")[0] == 200
        stranger = client(certs)
        stranger.load_cert_chain(*certs.pair("stranger"))
        with pytest.raises((OSError, http.client.HTTPException)):
            urllib.request.urlopen(ours.url + "/metrics", timeout=5, context=stranger)  # noqa: S310
    finally:
        ours.stop()


@pytest.mark.unit
def test_rate_limit_is_a_token_bucket() -> None:
    now = [1000.0]  # the bucket's clock, moved by hand: no wall clock, no sleep
    limit = RateLimit(interval=0.2, burst=3, clock=lambda: now[0])
    assert [limit.allow() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.25  # one token and a quarter
    assert [limit.allow() for _ in range(2)] == [True, False]
    now[0] += 0.14  # 0.05 + 0.14 = 0.19 s: still less than one token
    assert not limit.allow()
    now[0] += 0.02
    assert limit.allow()
    now[0] += 60  # a long pause refills up to the burst, no more
    assert [limit.allow() for _ in range(4)] == [True, True, True, False]

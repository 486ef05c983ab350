"""--web.config.file: TLS, basic auth and response headers of the exporter's own endpoints.

The file format is Prometheus' exporter-toolkit's (docs/web-configuration.md there), every key
of it, so one file can serve node_exporter, postgres_exporter and this exporter:

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key           # (or cert: / key: / client_ca: with the PEM inline)
      client_auth_type: RequireAndVerifyClientCert   # optional, with client_ca_file
      client_ca_file: ca.crt
      client_allowed_sans: [scraper.example]         # the client certificate's SAN must match
      min_version: TLS12             # TLS10..TLS13
      max_version: TLS13
      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # Go's names, TLS <= 1.2
      prefer_server_cipher_suites: true
      curve_preferences: [X25519]
    http_server_config:
      http2: true                    # HTTP/1.1 only here: one warning line at start
      headers: {X-Content-Type-Options: nosniff}
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')
    rate_limit: {interval: 100ms, burst: 10}

What Python's ssl module cannot do is said in one warning line at start (`warnings`), never an
exit: HTTP/2, and a curve_preferences list of more than one curve (ssl sets one curve; with
several, OpenSSL's default groups, which hold all of Go's, are kept).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pg_aio_exporter.config import ConfigError, key_list, read_yaml
from pg_aio_exporter.config.targets import parse_duration

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Go's RequireAnyClientCert (a certificate required, never verified) has no ssl equivalent.
_UNVERIFIED = "RequireAnyClientCert"
_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's names (crypto/tls CipherSuites()) -> OpenSSL's. Go applies the list to TLS 1.2 and
# below only; its TLS 1.3 suites are accepted and, as in Go, not configurable.
_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
_TLS13_CIPHERS = {
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
}
# Go's crypto/tls CurveID names -> OpenSSL's.
_CURVES = {
    "CurveP256": "prime256v1",
    "CurveP384": "secp384r1",
    "CurveP521": "secp521r1",
    "X25519": "X25519",
}
_TLS_KEYS = {
    "cert",
    "key",
    "client_ca",
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "client_allowed_sans",
    "min_version",
    "max_version",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
}
# The response headers the toolkit lets a file set, with the values it allows (None: any).
_HEADERS: dict[str, tuple[str, ...] | None] = {
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
_TOP_KEYS = {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"}
# $2b$, the cost in two digits, $, 22 characters of salt and 31 of hash: bcrypt refuses
# anything else, on every request, if it is not refused here.
_BCRYPT = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}")
# bcrypt is deliberately slow (docs/security.md): remember the credentials that passed so that
# a Prometheus scraping every 15 s pays it once, not per scrape.
_CACHE_LIMIT = 64


@dataclass
class BasicAuth:
    users: dict[str, bytes]
    _passed: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            if key in self._passed:
                return True
        import bcrypt  # noqa: PLC0415 (only deployments with basic auth pay for the import)

        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            if len(self._passed) >= _CACHE_LIMIT:
                self._passed.clear()
            self._passed.add(key)
        return True


@dataclass
class RateLimit:
    """The toolkit's token bucket: one request per `interval` on average, `burst` at once."""

    interval: float
    burst: int
    clock: Callable[[], float] = time.monotonic  # seconds; a test gives its own
    _tokens: float = 0.0
    _at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._tokens, self._at = float(self.burst), self.clock()

    def allow(self) -> bool:
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) / self.interval)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


@dataclass(frozen=True)
class WebConfig:
    tls: ssl.SSLContext | None = None
    auth: BasicAuth | None = None
    headers: tuple[tuple[str, str], ...] = ()  # added to every response
    allowed_sans: frozenset[str] = frozenset()  # a client certificate must carry one
    rate_limit: RateLimit | None = None
    warnings: tuple[str, ...] = ()  # what the file asks and Python's ssl cannot do


def _file(spec: dict[Any, Any], key: str, base: Path, path: str) -> Path | None:
    name = spec.get(key)
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: tls_server_config.{key} must be a file path")
    return base / name


def _choice(
    spec: dict[Any, Any], key: str, choices: dict[str, Any], default: str, path: str
) -> Any:
    value = spec.get(key, default)
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{path}: {key} must be one of {', '.join(choices)}")
    return choices[value]


def _strings(spec: dict[Any, Any], key: str, path: str, allowed: Any = None) -> list[str]:
    """A list of strings (each in `allowed`, when given); [] when the key is absent."""
    values = spec.get(key) or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{path}: tls_server_config.{key} must be a list of names")
    unknown = {v for v in values if allowed is not None and v not in allowed}
    if unknown:
        raise ConfigError(f"{path}: unknown tls_server_config.{key} {key_list(unknown)}")
    return values


def _pem(spec: dict[Any, Any], inline: str, file_key: str, base: Path, path: str) -> Any:
    """`cert_file` or the inline `cert` (PEM text), never both: a Path, a str or None."""
    text = spec.get(inline)
    if text is None:
        return _file(spec, file_key, base, path)
    if file_key in spec:
        raise ConfigError(f"{path}: tls_server_config has both {inline} and {file_key}")
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{path}: tls_server_config.{inline} must be PEM text")
    return text


def _load_pair(context: ssl.SSLContext, cert: Any, key: Any) -> None:
    """load_cert_chain reads files only: inline PEM goes through a private temporary file."""
    with tempfile.TemporaryDirectory() as tmp:
        files: list[Path] = []
        for name, value in (("cert.pem", cert), ("key.pem", key)):
            if isinstance(value, str):
                (Path(tmp) / name).write_text(value)
            files.append(Path(tmp) / name if isinstance(value, str) else value)
        context.load_cert_chain(files[0], files[1])


def _client_auth(
    spec: dict[Any, Any], context: ssl.SSLContext, *, has_ca: bool, path: str
) -> frozenset[str]:
    """Sets who may connect; returns the client SANs allowed (empty: any)."""
    if spec.get("client_auth_type") == _UNVERIFIED:
        raise ConfigError(
            f"{path}: client_auth_type {_UNVERIFIED} (a certificate never verified) is not"
            " supported: use RequireAndVerifyClientCert with client_ca_file"
        )
    context.verify_mode = _choice(spec, "client_auth_type", _CLIENT_AUTH, "NoClientCert", path)
    if not has_ca and context.verify_mode != ssl.CERT_NONE:
        raise ConfigError(
            f"{path}: client_auth_type {spec['client_auth_type']} needs client_ca_file"
        )
    sans = frozenset(_strings(spec, "client_allowed_sans", path))
    if sans and context.verify_mode != ssl.CERT_REQUIRED:
        raise ConfigError(
            f"{path}: client_allowed_sans needs client_auth_type RequireAndVerifyClientCert"
        )
    return sans


def _ciphers_and_curves(
    spec: dict[Any, Any], context: ssl.SSLContext, path: str
) -> tuple[list[str], list[str]]:
    """Sets the cipher order and curves; returns the cipher suites asked for, and warnings."""
    suites = _strings(spec, "cipher_suites", path, allowed=_CIPHERS.keys() | _TLS13_CIPHERS)
    prefer = spec.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise ConfigError(
            f"{path}: tls_server_config.prefer_server_cipher_suites must be true or false"
        )
    if prefer:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    curves = _strings(spec, "curve_preferences", path, allowed=_CURVES)
    warnings = []
    if len(curves) == 1:
        context.set_ecdh_curve(_CURVES[curves[0]])
    elif curves:
        warnings.append(
            "web config: curve_preferences lists several curves; Python's ssl sets one only,"
            " so OpenSSL's default curves (X25519, P-256, P-384, P-521 among them) are offered"
        )
    return suites, warnings


def _tls_context(
    spec: Any, base: Path, path: str
) -> tuple[ssl.SSLContext, frozenset[str], list[str]]:
    """The server context, the client SANs allowed, and warnings."""
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: tls_server_config must be a mapping")
    unknown = set(spec) - _TLS_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown tls_server_config key(s) {key_list(unknown)}")
    cert = _pem(spec, "cert", "cert_file", base, path)
    key = _pem(spec, "key", "key_file", base, path)
    if cert is None or key is None:
        raise ConfigError(f"{path}: tls_server_config needs cert_file and key_file")
    client_ca = _pem(spec, "client_ca", "client_ca_file", base, path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _choice(spec, "min_version", _TLS_VERSIONS, "TLS12", path)
    context.maximum_version = _choice(spec, "max_version", _TLS_VERSIONS, "TLS13", path)
    if context.minimum_version > context.maximum_version:
        raise ConfigError(f"{path}: tls_server_config.min_version is above max_version")
    sans = _client_auth(spec, context, has_ca=client_ca is not None, path=path)
    suites, warnings = _ciphers_and_curves(spec, context, path)
    try:
        ciphers = [_CIPHERS[suite] for suite in suites if suite in _CIPHERS]
        if ciphers:
            context.set_ciphers(":".join(dict.fromkeys(ciphers)))
        _load_pair(context, cert, key)
        if isinstance(client_ca, str):
            context.load_verify_locations(cadata=client_ca)
        elif client_ca is not None:
            context.load_verify_locations(client_ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{path}: cannot load TLS files: {exc.strerror or exc}") from None
    return context, sans, warnings


def _http_server(spec: Any, path: str) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """The response headers, and a warning for HTTP/2."""
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: http_server_config must be a mapping")
    unknown = set(spec) - {"http2", "headers"}
    if unknown:
        raise ConfigError(f"{path}: unknown http_server_config key(s) {key_list(unknown)}")
    http2 = spec.get("http2", True)
    if not isinstance(http2, bool):
        raise ConfigError(f"{path}: http_server_config.http2 must be true or false")
    warnings = []
    if spec.get("http2") is True:
        warnings.append("web config: http2 is not supported here: HTTP/1.1 is served")
    headers = spec.get("headers") or {}
    if not isinstance(headers, dict):
        raise ConfigError(f"{path}: http_server_config.headers must be a mapping")
    for name, value in headers.items():
        if name not in _HEADERS:
            raise ConfigError(f"{path}: HTTP header {key_list({name})} can not be configured")
        allowed = _HEADERS[name]
        if not isinstance(value, str) or (allowed and value not in allowed):
            expected = f"one of {', '.join(allowed)}" if allowed else "a string"
            raise ConfigError(f"{path}: http_server_config.headers.{name} must be {expected}")
    # A blank value leaves the header unset, as in the toolkit.
    return tuple((name, value) for name, value in headers.items() if value), warnings


def _rate_limit(spec: Any, path: str) -> RateLimit | None:
    if not isinstance(spec, dict) or set(spec) - {"interval", "burst"}:
        raise ConfigError(f"{path}: rate_limit must be a mapping of interval and burst")
    interval, burst = spec.get("interval", 0), spec.get("burst", 0)
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 0:
        raise ConfigError(f"{path}: rate_limit.burst must be a whole number")
    if interval in (0, "0", "0s"):
        return None  # the toolkit's "0 disables the limiter"
    if not isinstance(interval, str):
        raise ConfigError(f"{path}: rate_limit.interval must be a duration, e.g. 100ms")
    return RateLimit(parse_duration(interval, what=f"{path}: rate_limit.interval"), burst)


def _basic_auth(users: Any, path: str) -> BasicAuth:
    if not isinstance(users, dict) or not users:
        raise ConfigError(f"{path}: basic_auth_users must map user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not _BCRYPT.fullmatch(hashed):
            raise ConfigError(f"{path}: basic_auth_users.{key_list({user})} is not a bcrypt hash")
    return BasicAuth({str(u): h.encode() for u, h in users.items()})


def load_web_config(path: str) -> WebConfig:
    document = read_yaml(path, "web config file")
    if document is None:
        return WebConfig()
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a mapping")
    unknown = set(document) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {key_list(unknown)}")
    base = Path(path).resolve().parent
    tls, sans, warnings = None, frozenset[str](), list[str]()
    if document.get("tls_server_config") is not None:
        tls, sans, warnings = _tls_context(document["tls_server_config"], base, path)
    headers: tuple[tuple[str, str], ...] = ()
    if document.get("http_server_config") is not None:
        headers, http_warnings = _http_server(document["http_server_config"], path)
        warnings += http_warnings
    users = document.get("basic_auth_users")
    limit = document.get("rate_limit")
    return WebConfig(
        tls=tls,
        auth=None if users is None else _basic_auth(users, path),
        headers=headers,
        allowed_sans=sans,
        rate_limit=None if limit is None else _rate_limit(limit, path),
        warnings=tuple(warnings),
    )

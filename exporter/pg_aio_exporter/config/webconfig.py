"""--web.config.file: TLS and basic auth for the exporter's own endpoints.

The file format follows Prometheus' exporter-toolkit, so one file can serve node_exporter,
postgres_exporter and this exporter:

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # optional, with client_ca_file
      client_ca_file: ca.crt
      min_version: TLS12             # optional: TLS12 or TLS13
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pg_aio_exporter.config import ConfigError, key_list, read_yaml

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"}
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


@dataclass(frozen=True)
class WebConfig:
    tls: ssl.SSLContext | None = None
    auth: BasicAuth | None = None


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


def _tls_context(spec: Any, base: Path, path: str) -> ssl.SSLContext:
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: tls_server_config must be a mapping")
    unknown = set(spec) - _TLS_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown tls_server_config key(s) {key_list(unknown)}")
    cert, key = _file(spec, "cert_file", base, path), _file(spec, "key_file", base, path)
    if cert is None or key is None:
        raise ConfigError(f"{path}: tls_server_config needs cert_file and key_file")
    client_ca = _file(spec, "client_ca_file", base, path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _choice(spec, "min_version", _TLS_VERSIONS, "TLS12", path)
    context.verify_mode = _choice(spec, "client_auth_type", _CLIENT_AUTH, "NoClientCert", path)
    if client_ca is None and context.verify_mode != ssl.CERT_NONE:
        raise ConfigError(
            f"{path}: client_auth_type {spec['client_auth_type']} needs client_ca_file"
        )
    try:
        context.load_cert_chain(cert, key)
        if client_ca is not None:
            context.load_verify_locations(client_ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{path}: cannot load TLS files: {exc.strerror or exc}") from None
    return context


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
    unknown = set(document) - {"tls_server_config", "basic_auth_users"}
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {key_list(unknown)}")
    base = Path(path).resolve().parent
    tls = document.get("tls_server_config")
    users = document.get("basic_auth_users")
    return WebConfig(
        tls=None if tls is None else _tls_context(tls, base, path),
        auth=None if users is None else _basic_auth(users, path),
    )

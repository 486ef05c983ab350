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
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pg_aio_exporter.config import ConfigError

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"}
# bcrypt is deliberately slow (~0.5 s at cost 10 here): remember the credentials that passed so
# that a Prometheus scraping every 15 s pays it once, not per scrape.
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


def _tls_context(spec: Any, base: Path, path: str) -> ssl.SSLContext:
    if not isinstance(spec, dict) or not spec.get("cert_file") or not spec.get("key_file"):
        raise ConfigError(f"{path}: tls_server_config needs cert_file and key_file")
    unknown = set(spec) - _TLS_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown tls_server_config key(s) {', '.join(sorted(unknown))}")
    min_version = spec.get("min_version", "TLS12")
    if min_version not in _TLS_VERSIONS:
        raise ConfigError(f"{path}: min_version must be TLS12 or TLS13")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _TLS_VERSIONS[min_version]
    try:
        context.load_cert_chain(base / spec["cert_file"], base / spec["key_file"])
        auth_type = spec.get("client_auth_type", "NoClientCert")
        if auth_type not in _CLIENT_AUTH:
            raise ConfigError(f"{path}: unknown client_auth_type {auth_type!r}")
        context.verify_mode = _CLIENT_AUTH[auth_type]
        if spec.get("client_ca_file"):
            context.load_verify_locations(base / spec["client_ca_file"])
        elif context.verify_mode != ssl.CERT_NONE:
            raise ConfigError(f"{path}: client_auth_type {auth_type} needs client_ca_file")
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{path}: cannot load TLS files: {exc.strerror or exc}") from None
    return context


def _basic_auth(users: Any, path: str) -> BasicAuth:
    if not isinstance(users, dict) or not users:
        raise ConfigError(f"{path}: basic_auth_users must map user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise ConfigError(f"{path}: basic_auth_users.{user} is not a bcrypt hash")
    return BasicAuth({str(u): h.encode() for u, h in users.items()})


def load_web_config(path: str) -> WebConfig:
    import yaml  # noqa: PLC0415 (PyYAML costs 1 MB of RSS: only when a file is read)

    try:
        document = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read web config file {path}: {exc.strerror}") from None
    except yaml.YAMLError:
        raise ConfigError(f"web config file {path} is not valid YAML") from None
    if document is None:
        return WebConfig()
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a mapping")
    unknown = set(document) - {"tls_server_config", "basic_auth_users"}
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    base = Path(path).resolve().parent
    tls = document.get("tls_server_config")
    users = document.get("basic_auth_users")
    return WebConfig(
        tls=None if tls is None else _tls_context(tls, base, path),
        auth=None if users is None else _basic_auth(users, path),
    )

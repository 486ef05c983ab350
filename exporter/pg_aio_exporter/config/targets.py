"""Configuration: command-line DSN or a YAML file -> a validated list of targets.

Everything here fails with ConfigError, whose message is one line that never contains a
password: the CLI turns it into exit code 2.
"""

from __future__ import annotations

import glob
import ipaddress
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pg_aio_exporter.collectors import registry
from pg_aio_exporter.config import ConfigError, key_list, libpq, read_yaml
from pg_aio_exporter.expose.selfmetrics import LABELS as SELF_METRIC_LABELS
from pg_aio_exporter.redact import scrub
from pg_aio_exporter.thresholds import storage_class_names
from pg_aio_exporter.vocabulary import DURATION_UNITS

APPLICATION_NAME = "pg_aio_exporter"

# Labels the exporter itself puts on series; extra labels from the config must not shadow them.
RESERVED_LABELS = frozenset({"target", *registry.labels(), *SELF_METRIC_LABELS})
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
# A name of server_address's shape, host[:port][/dbname]; the host may be a socket directory.
_ADDRESS_RE = re.compile(r"^(?P<host>.+?)(:[0-9]+)?(/[^/]*)?$")


DEFAULT_PASSWORD_COMMAND_TIMEOUT = 10.0


@dataclass(frozen=True)
class PasswordSource:
    """Where a target's password comes from at every (re)connect, so that a rotated password
    (Vault, a 15-minute IAM token) needs no restart: a file's content, or what a command prints.
    """

    file: str | None = None
    command: tuple[str, ...] = ()
    timeout: float = DEFAULT_PASSWORD_COMMAND_TIMEOUT


@dataclass(frozen=True)
class Storage:
    """What a target's data sits on: its storage class (thresholds.yaml storage_classes; None:
    the default class) and, when the user knows them, the volume's own limits."""

    storage_class: str | None = None
    iops: float | None = None  # the volume's IOPS limit (gp3: 3,000 unless provisioned)
    bytes_per_second: float | None = None  # its throughput limit (gp3: 125 MiB/s)


@dataclass(frozen=True)
class Target:
    """One monitored PostgreSQL server."""

    name: str
    conninfo: str = field(repr=False)  # may hold a password: never log or print it
    labels: dict[str, str] = field(default_factory=dict)
    password: PasswordSource | None = field(default=None, repr=False)  # argv may hold a token
    storage: Storage = field(default_factory=Storage)

    @property
    def address(self) -> str:
        """host:port/dbname, safe to log."""
        return server_address(self.conninfo)

    @property
    def dsn_password(self) -> str | None:
        value = conninfo_to_dict(self.conninfo).get("password")
        return str(value) if value else None


def parse_duration(text: str, *, what: str) -> float:
    """Go-style durations ("30s", "1m30s", "500ms") or plain seconds -> seconds."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_RE.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ConfigError(f"invalid {what} {text!r}: use e.g. 30s, 1m, 500ms") from None
        seconds = sum(float(n) * DURATION_UNITS[u] for n, u in parts)
    # float() accepts "nan" and "inf", and 400 digits overflow to inf: a timeout of either
    # fails only later, in the worker (int(nan * 1000)), on every poll.
    if not math.isfinite(seconds):
        raise ConfigError(f"invalid {what} {text!r}: must be a finite duration")
    if seconds <= 0:
        raise ConfigError(f"invalid {what} {text!r}: must be positive")
    return seconds


def normalize_dsn(dsn: str) -> str:
    """Validate a DSN (key=value or URI) and add the exporter's connection defaults."""
    dsn = dsn.strip()
    if not dsn:
        raise ConfigError("empty DSN")
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        # libpq quotes the offending fragment, which may be the password: scrub it.
        message = str(exc).strip().splitlines()[0]
        raise ConfigError(f"invalid DSN: {scrub(message, dsn)}") from None
    refused = libpq.refusal(params)
    if refused is not None:
        raise ConfigError(f"invalid DSN: {scrub(refused, dsn)}")
    extra: dict[str, Any] = {}
    if "application_name" not in params:
        extra["application_name"] = APPLICATION_NAME
    if "connect_timeout" not in params:
        extra["connect_timeout"] = 5
    return make_conninfo(dsn, **extra)


def server_address(conninfo: str) -> str:
    """host:port/dbname of the server a DSN reaches, never its password: the DSN's values, else
    libpq's defaults (PGHOST, PGPORT, PGDATABASE from the environment, dbname = the user)."""
    params = conninfo_to_dict(conninfo)
    defaults = {
        o.keyword.decode(): o.val.decode() for o in pq.Conninfo.get_defaults() if o.val is not None
    }

    def get(key: str) -> str:
        return str(params.get(key) or defaults.get(key) or "")

    host = get("host") or get("hostaddr") or "localhost"
    # A quoted value may hold any text, "password=..." too: scrubbed like any other output.
    return scrub(f"{host}:{get('port') or 5432}/{get('dbname') or get('user')}", conninfo)


def local_only(name: str) -> bool:
    """Whether a target name is only an address every machine has for itself (localhost, a
    loopback address, a Unix socket directory): the default name of every sidecar, which
    reaches its server as localhost, so it names no server of a fleet."""
    match = _ADDRESS_RE.match(name.strip())
    host = match["host"].strip("[]") if match else ""
    if host == "localhost" or host.startswith(("/", "@")):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def target_from_dsn(
    dsn: str, *, name: str | None = None, labels: Any = None, storage: Storage | None = None
) -> Target:
    """The one target of --dsn. Unnamed, it is called after the server it reaches, which keeps
    exporters apart that reach their servers by name (one Deployment per server), not sidecars:
    each reaches its own as localhost (local_only)."""
    conninfo = normalize_dsn(dsn)
    name = server_address(conninfo) if name is None else name
    if not name.strip():
        raise ConfigError("invalid --target-name: empty")
    return Target(
        name=name, conninfo=conninfo, labels=_labels(labels, name), storage=storage or Storage()
    )


STORAGE_KEYS = ("storage_class", "volume_iops", "volume_bytes_per_second")


def storage_of(values: dict[str, Any], where: str) -> Storage:
    """`storage_class`, `volume_iops` and `volume_bytes_per_second` (a config file's target
    keys, or the flags of a --dsn target), checked."""
    name = values.get("storage_class")
    if name is not None and name not in (known := storage_class_names()):
        raise ConfigError(f"{where}: storage_class {name!r} is not one of {', '.join(known)}")
    limits: dict[str, float | None] = {}
    for key in STORAGE_KEYS[1:]:
        value = values.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ConfigError(f"{where}: {key} must be a positive number")
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(f"{where}: {key} must be a positive number") from None
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{where}: {key} must be a positive number")
        limits[key] = value
    return Storage(name, limits["volume_iops"], limits["volume_bytes_per_second"])


def _read_secret_file(path: Any, *, what: str, target: str) -> str:
    if not isinstance(path, str) or not path:
        raise ConfigError(f"target {target!r}: {what} must be a file path")
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"target {target!r}: cannot read {what} {path}: {exc.strerror}") from None


def _password_source(item: dict[Any, Any], target: str) -> PasswordSource | None:
    if "password_file" in item and "password_command" in item:
        raise ConfigError(f"target {target!r}: give at most one of password_file, password_command")
    if "password_command_timeout" in item and "password_command" not in item:
        raise ConfigError(f"target {target!r}: password_command_timeout without password_command")
    if "password_file" in item:
        # Read once now, so that a wrong path is a configuration error; again at every connect.
        _read_secret_file(item["password_file"], what="password_file", target=target)
        return PasswordSource(file=item["password_file"])
    if "password_command" not in item:
        return None
    argv = item["password_command"]
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) and a for a in argv)):
        raise ConfigError(f"target {target!r}: password_command must be a list of strings (argv)")
    if shutil.which(argv[0]) is None:
        raise ConfigError(f"target {target!r}: password_command {argv[0]!r} not found")
    timeout = DEFAULT_PASSWORD_COMMAND_TIMEOUT
    if "password_command_timeout" in item:
        timeout = parse_duration(
            str(item["password_command_timeout"]),
            what=f"password_command_timeout of target {target!r}",
        )
    return PasswordSource(command=tuple(argv), timeout=timeout)


def _target_from_mapping(item: Any, index: int) -> Target:
    if not isinstance(item, dict):
        raise ConfigError(f"targets[{index}] must be a mapping with name and dsn")
    unknown = set(item) - {
        "name",
        "dsn",
        "dsn_file",
        "password_file",
        "password_command",
        "password_command_timeout",
        "labels",
        *STORAGE_KEYS,
    }
    if unknown:
        raise ConfigError(f"targets[{index}]: unknown key(s) {key_list(unknown)}")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"targets[{index}]: name is required")
    if ("dsn" in item) == ("dsn_file" in item):
        raise ConfigError(f"target {name!r}: give exactly one of dsn or dsn_file")
    if "dsn" in item:
        dsn = item["dsn"]
        if not isinstance(dsn, str):
            raise ConfigError(f"target {name!r}: dsn must be a string")
    else:
        dsn = _read_secret_file(item["dsn_file"], what="dsn_file", target=name)
    try:
        conninfo = normalize_dsn(dsn)
    except ConfigError as exc:
        raise ConfigError(f"target {name!r}: {exc}") from None
    return Target(
        name=name,
        conninfo=conninfo,
        labels=_labels(item.get("labels"), name),
        password=_password_source(item, name),
        storage=storage_of(item, f"target {name!r}"),
    )


def _labels(labels: Any, target: str) -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise ConfigError(f"target {target!r}: labels must be a mapping")
    for key, value in labels.items():
        if not isinstance(key, str) or not _LABEL_RE.match(key) or key.startswith("__"):
            raise ConfigError(f"target {target!r}: invalid label name {key!r}")
        if key in RESERVED_LABELS:
            raise ConfigError(f"target {target!r}: label {key!r} is reserved by the exporter")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(f"target {target!r}: label {key!r} must be a string")
    return {k: str(v) for k, v in sorted(labels.items())}


# A file_sd_configs entry: the files, and what every target they list shares.
FILE_SD_KEYS = frozenset(
    {"files", "dsn", "password_file", "password_command", "password_command_timeout"}
) | frozenset(STORAGE_KEYS)
FILE_SD_EXTENSIONS = (".json", ".yml", ".yaml")  # as Prometheus' file_sd


def _address(address: Any, where: str) -> dict[str, str]:
    """A file_sd target, host:port ([v6]:port) or a host alone -> libpq's host and port."""
    if not isinstance(address, str) or not address or not address.isprintable() or " " in address:
        raise ConfigError(f"{where}: targets must be host:port strings")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or (":" in host and not host.startswith("[")):
        return {"host": address.strip("[]")}
    return {"host": host.strip("[]"), "port": port}


def _file_sd_file(path: str, spec: dict[Any, Any], dsn: str, where: str) -> list[Target]:
    """One file_sd file: [{targets: [host:port, ...], labels: {...}}, ...]; its labels whose
    names start with __ (Prometheus' meta labels) are left out."""
    groups = read_yaml(path, "file_sd file")
    if groups is None:
        return []  # written empty, as SD tooling does with nothing to list
    where = f"{where}: file_sd file {path}"
    if not isinstance(groups, list):
        raise ConfigError(f"{where}: expected a list of {{targets, labels}}")
    targets = []
    for group in groups:
        if (
            not isinstance(group, dict)
            or set(group) - {"targets", "labels"}
            or not isinstance(group.get("targets"), list)
            or not isinstance(group.get("labels") or {}, dict)
        ):
            raise ConfigError(f"{where}: each entry is a mapping of targets and labels")
        labels = {
            k: v for k, v in (group.get("labels") or {}).items() if not str(k).startswith("__")
        }
        for address in group["targets"]:
            try:
                conninfo = normalize_dsn(make_conninfo(dsn, **_address(address, where)))
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            name = server_address(conninfo)
            targets.append(
                Target(
                    name=name,
                    conninfo=conninfo,
                    labels=_labels(labels, name),
                    password=_password_source(spec, name),
                    storage=storage_of(spec, where),
                )
            )
    return targets


def _file_sd_targets(specs: Any, config: str) -> list[Target]:
    """file_sd_configs: [{files: [patterns], dsn?, password_file?, password_command?,
    storage_class?, ...}]. Each address the files list is a target on the entry's DSN (its host
    and port replaced), named host:port/dbname as a --dsn target is; the patterns are globs
    relative to the config file, and a pattern matching no file lists no target."""
    if not isinstance(specs, list):
        raise ConfigError(f"config file {config}: file_sd_configs must be a list")
    base = Path(config).resolve().parent
    targets = []
    for index, spec in enumerate(specs):
        where = f"config file {config}: file_sd_configs[{index}]"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where} must be a mapping with files")
        unknown = set(spec) - FILE_SD_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {key_list(unknown)}")
        patterns = spec.get("files")
        if not isinstance(patterns, list) or not all(
            isinstance(p, str) and p.endswith(FILE_SD_EXTENSIONS) for p in patterns
        ):
            raise ConfigError(f"{where}: files must be a list of *.json, *.yml or *.yaml patterns")
        dsn = spec.get("dsn", "")
        if not isinstance(dsn, str):
            raise ConfigError(f"{where}: dsn must be a string")
        try:
            dsn = normalize_dsn(dsn) if dsn.strip() else ""
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        for pattern in patterns:
            for path in sorted(glob.glob(str(base / pattern))):
                targets += _file_sd_file(path, spec, dsn, where)
    return targets


def load_config(path: str) -> list[Target]:
    """Read a YAML file: {targets: [{name, dsn | dsn_file, password_file?, labels?,
    storage_class?, volume_iops?, volume_bytes_per_second?}, ...], file_sd_configs?: [...]}.
    With file_sd_configs, no target at all is allowed: the files may list some later."""
    document = read_yaml(path, "config file")
    discovered = isinstance(document, dict) and "file_sd_configs" in document
    if not isinstance(document, dict) or not isinstance(
        document.get("targets", [] if discovered else None), list
    ):
        raise ConfigError(f"config file {path}: expected a mapping with a 'targets' list")
    unknown = set(document) - {"targets", "file_sd_configs"}
    if unknown:
        raise ConfigError(f"config file {path}: unknown key(s) {key_list(unknown)}")
    targets = [_target_from_mapping(item, i) for i, item in enumerate(document.get("targets", []))]
    if discovered:
        targets += _file_sd_targets(document["file_sd_configs"], path)
    elif not targets:
        raise ConfigError(f"config file {path}: no targets")
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"config file {path}: duplicate target name(s) {', '.join(duplicates)}")
    return targets


@dataclass(frozen=True)
class TargetChanges:
    """What a reload does to the running targets, by name: `changed` holds the new versions
    (a worker restarted); the names in `unchanged` keep their worker, connection and counters."""

    added: list[Target]
    removed: list[Target]
    changed: list[Target]
    unchanged: list[str]


def diff_targets(old: list[Target], new: list[Target]) -> TargetChanges:
    """Targets are told apart by name; a target whose DSN, password source, labels or storage
    differ is changed (its series and connection are the old settings')."""
    before = {t.name: t for t in old}
    after = {t.name: t for t in new}
    return TargetChanges(
        added=[t for t in new if t.name not in before],
        removed=[t for t in old if t.name not in after],
        changed=[t for t in new if t.name in before and before[t.name] != t],
        unchanged=[t.name for t in new if before.get(t.name) == t],
    )

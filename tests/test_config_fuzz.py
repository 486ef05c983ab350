"""Property-based tests of the configuration, web configuration and DSN parsers: any input
either loads or fails with a ConfigError whose message is one line and holds none of the
input's passwords. Anything else (a traceback) is a bug: the CLI turns ConfigError, and only
it, into exit code 2."""

from __future__ import annotations

import math
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import bcrypt
import psycopg
import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, reject, settings
from hypothesis import strategies as st

from certs import Certs
from harness import assert_one_line
from pg_aio_exporter.config import ConfigError, libpq
from pg_aio_exporter.config.targets import (
    Target,
    load_config,
    normalize_dsn,
    parse_duration,
    target_from_dsn,
)
from pg_aio_exporter.config.webconfig import load_web_config
from pg_aio_exporter.demo.server import free_port

pytestmark = pytest.mark.unit

# The profile sets how many examples (tests/conftest.py: 200, or 25 at the lowest versions).
BOUNDED = settings(deadline=None)
# Passwords are drawn from characters that need no quoting in either DSN form, so that the
# string the user typed is exactly the one that must not come back.
SECRETS = st.text(string.ascii_letters + string.digits + "-_.~", min_size=8, max_size=16).map(
    lambda s: "Pw" + s
)
KEYWORDS = ["host", "hostaddr", "port", "dbname", "user", "sslmode", "connect_timeout", "options"]
KEYS = st.sampled_from(KEYWORDS) | st.text(min_size=1, max_size=8)
VALUES = st.text(max_size=12) | st.sampled_from(["'", "\\", "=", "''", "' '", "5432", "x y"])


@st.composite
def dsns(draw: st.DrawFn) -> tuple[str, str]:
    """(a key=value or URI DSN, often malformed, holding a password; that password)."""
    secret = draw(SECRETS)
    junk = draw(st.lists(st.tuples(KEYS, VALUES), max_size=4))
    if draw(st.booleans()):
        spelled = draw(st.sampled_from(["password={}", "password='{}'", "password = {}"]))
        pieces = [f"{k}={v}" for k, v in junk]
        pieces.insert(draw(st.integers(0, len(pieces))), spelled.format(secret))
        return draw(st.sampled_from([" ", "  ", "\t"])).join(pieces), secret
    user = draw(st.text(string.ascii_letters, max_size=6))
    host = draw(VALUES)
    query = "&".join(f"{k}={v}" for k, v in junk)
    if draw(st.booleans()):
        return f"postgresql://{user}:{secret}@{host}/db?{query}", secret
    return f"postgresql://{user}@{host}/db?{query}&password={secret}", secret


def assert_clean(exc: ConfigError, *secrets: str) -> str:
    message = str(exc)
    assert message, "an empty message tells the user nothing"
    assert "\n" not in message and "\r" not in message, message
    for secret in secrets:
        assert secret not in message, message
    return message


@BOUNDED
@given(dsns())
@example(("password='Pwunterminated host=x", "Pwunterminated"))
@example(("postgresql://u:Pwsecret99@h:notaport/db", "Pwsecret99"))
@example(("host=a port=Pwsecret99 password=Pwsecret99", "Pwsecret99"))
@example(("host=' password=Pw00000000 host='", "Pw00000000"))  # found by the fuzz: a quoted host
def test_normalize_dsn_loads_or_fails_cleanly(case: tuple[str, str]) -> None:
    dsn, secret = case
    try:
        conninfo = normalize_dsn(dsn)
    except ConfigError as exc:
        assert_clean(exc, secret)
    else:
        assert "application_name" in conninfo
        assert secret not in repr(Target(name="t", conninfo=conninfo))
        # An unnamed --dsn target is named after its server: host, port, dbname only.
        assert secret not in target_from_dsn(dsn).name


# -- values libpq checks only when it connects: libpq itself is the oracle --------------------

LIBPQ_KEYWORDS = ["port", *libpq.CHOICES, *libpq.INTEGERS]
LIBPQ_VALUES = (
    st.sampled_from([v for allowed in libpq.CHOICES.values() for v in allowed])
    | st.sampled_from(["", " ", "REQUIRE", "Disable", "tlsv1.2", "1,2", ","])
    | st.from_regex(r"\A[ \t]?[+-]?[0-9]{1,11}[ \t]?\Z")
    | st.sampled_from(["0x10", "1e3", "2.5", "65535", "65536", "0", "-1", "2147483648"])
    | st.text(string.ascii_letters + string.digits + "-.,", max_size=8)
)
LIBPQ_KNOWS = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
# Nothing may answer there, so that every attempt fails: a socket in a directory that does not
# exist, or a closed port on loopback (libpq sets keepalive options on TCP sockets only).
NOWHERE_SOCKET = "/nonexistent/pg_aio_exporter-test"
# Failures that are not libpq's verdict on the string: nothing listens, the kernel refuses a
# socket option (keepalives_idle above 32767 on Linux), or gssencmode=require finds no Kerberos
# ticket (kinit may get one later). The exporter does not second-guess these.
UNREACHABLE = ("No such file or directory", "Connection refused", "setsockopt(", "credential")


def libpq_refuses(conninfo: str) -> str | None:
    """libpq's own verdict on a connection string: why it refused it, or None if it only
    failed to reach a server."""
    conn = psycopg.pq.PGconn.connect(conninfo.encode())
    try:
        assert conn.status == psycopg.pq.ConnStatus.BAD, "nothing may answer there"
        message = conn.error_message.decode()
        return None if any(m in message for m in UNREACHABLE) else message
    finally:
        conn.finish()


@BOUNDED
@given(st.sampled_from(LIBPQ_KEYWORDS), LIBPQ_VALUES)
@example("port", "99999")
@example("port", "5432,")
@example("port", " +5432 ")
@example("sslmode", "bogus")
@example("ssl_min_protocol_version", "")
@example("keepalives_idle", "99999999999")
@example("sslnegotiation", "direct")
@example("ssl_max_protocol_version", "tlsv1")
def test_refused_at_start_exactly_when_libpq_refuses(keyword: str, value: str) -> None:
    assume(keyword in LIBPQ_KNOWS)  # sslnegotiation is new in libpq 17
    tcp = f"host=127.0.0.1 port={free_port()}"
    base = f"host={NOWHERE_SOCKET}" if keyword == "port" else tcp
    conninfo = psycopg.conninfo.make_conninfo(base, **{keyword: value})
    refused = libpq_refuses(conninfo)
    try:
        normalize_dsn(conninfo)
    except ConfigError as exc:
        assert refused, f"libpq accepts {keyword}={value!r}, the exporter says: {exc}"
    else:
        assert not refused or libpq_versions_differ(keyword, value), (
            f"libpq refuses {keyword}={value!r} ({refused}), the exporter not"
        )


def libpq_versions_differ(keyword: str, value: str) -> bool:
    """Integers libpq 16 (measured with psycopg-binary 3.2.1) and 18 judge differently, which
    the exporter leaves to libpq: empty (16: unset), with blanks around (18 takes them),
    beyond a C int (16 takes it)."""
    if keyword not in libpq.INTEGERS:
        return False
    digits = value.strip()
    beyond = digits.lstrip("+-").isdigit() and not -(2**31) <= int(digits) < 2**31
    return not digits or digits != value or beyond


@pytest.mark.parametrize(
    "conninfo",
    [
        f"host={NOWHERE_SOCKET} sslnegotiation=direct sslmode=require",
        f"host={NOWHERE_SOCKET} sslnegotiation=direct sslmode=allow",
        f"host={NOWHERE_SOCKET} sslrootcert=system",
        f"host={NOWHERE_SOCKET} sslrootcert=system sslmode=require",
        f"host={NOWHERE_SOCKET} sslrootcert=system sslmode=verify-full",
        f"host={NOWHERE_SOCKET} ssl_min_protocol_version=TLSv1.3 ssl_max_protocol_version=tlsv1.2",
        f"host={NOWHERE_SOCKET} ssl_min_protocol_version= ssl_max_protocol_version=TLSv1",
        f"host={NOWHERE_SOCKET},{NOWHERE_SOCKET} port=1,2,3",
        f"host={NOWHERE_SOCKET},{NOWHERE_SOCKET} port=1,2",
        f"host={NOWHERE_SOCKET} hostaddr=127.0.0.1,127.0.0.2",
        f"host={NOWHERE_SOCKET},{NOWHERE_SOCKET} port=5432",
    ],
)
def test_combinations_as_libpq_judges_them(conninfo: str) -> None:
    refused = libpq_refuses(conninfo)
    try:
        normalize_dsn(conninfo)
    except ConfigError as exc:
        assert refused, f"libpq accepts {conninfo!r}, the exporter says: {exc}"
    else:
        assert not refused, f"libpq refuses {conninfo!r} ({refused}), the exporter not"


@BOUNDED
@given(st.text(max_size=20) | st.from_regex(r"\A[0-9.]{0,6}(ms|s|m|h|d|us)?\Z"))
@example("nan")
@example("inf")
@example("1" * 400)
@example("1" * 400 + "s")
@example("-0")
@example("1m30s")
def test_parse_duration_is_finite_positive_or_fails_cleanly(text: str) -> None:
    try:
        seconds = parse_duration(text, what="--timeout")
    except ConfigError as exc:
        assert_clean(exc)
    else:
        assert math.isfinite(seconds) and seconds > 0, seconds


def test_parse_duration_rejects_non_finite() -> None:
    # Regression: float() took these, and int(timeout * 1000) failed in the worker on every poll.
    for text in ("nan", "inf", "-inf", "1" * 400):
        with pytest.raises(ConfigError, match="finite"):
            parse_duration(text, what="--timeout")


# YAML-able junk: what a hand-written config may hold where a string is expected.
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
JUNK = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def configs(draw: st.DrawFn, directory: Path) -> tuple[str, list[str]]:
    """(the text of a config file, the passwords it refers to)."""
    secrets: list[str] = []
    targets = []
    for index in range(draw(st.integers(0, 3))):
        item: dict[object, object] = {}
        if draw(st.booleans()):
            item["name"] = draw(st.sampled_from(["a", "b", ""]) | JUNK)
        dsn, secret = draw(dsns())
        secrets.append(secret)
        where = draw(st.sampled_from(["dsn", "dsn_file", "both", "neither", "junk"]))
        if where in ("dsn", "both"):
            item["dsn"] = dsn
        if where in ("dsn_file", "both"):
            path = directory / f"dsn{index}"
            path.write_text(dsn)
            item["dsn_file"] = str(path)
        if where == "junk":
            item["dsn"] = draw(JUNK)
        if draw(st.booleans()):
            secret = draw(SECRETS)
            secrets.append(secret)
            path = directory / f"pw{index}"
            path.write_text(secret + "\n")
            item["password_file"] = draw(st.sampled_from([str(path), str(directory / "nope")]))
        if draw(st.booleans()):
            item["labels"] = draw(
                st.dictionaries(st.sampled_from(["env", "target", "__x", "0a"]) | SCALARS, JUNK)
                | JUNK
            )
        if draw(st.booleans()):
            item[draw(st.text(max_size=5) | st.integers())] = draw(JUNK)
        targets.append(item if draw(st.integers(0, 9)) else draw(JUNK))
    document: object = {"targets": targets}
    if draw(st.integers(0, 9)) == 0:
        document = draw(JUNK)
    elif draw(st.integers(0, 9)) == 0:
        document = {"targets": targets, draw(st.text(max_size=5) | st.integers()): 1}
    text = yaml.safe_dump(document, allow_unicode=True)
    if draw(st.integers(0, 4)) == 0:
        # A stray character somewhere: broken YAML as well as valid YAML of another shape.
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(list(":-[]{}'\"#&*!|>%@`\t\n"))) + text[at:]
    return text, secrets


def check_config(text: str | bytes, secrets: list[str], directory: Path) -> ConfigError | None:
    path = directory / "config.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    try:
        targets = load_config(str(path))
    except ConfigError as exc:
        assert_clean(exc, *secrets)
        return exc
    assert targets and len({t.name for t in targets}) == len(targets)
    for target in targets:
        assert not any(s in repr(target) or s in target.address for s in secrets)
    return None


@BOUNDED
@given(st.data())
def test_load_config_loads_or_fails_cleanly(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        text, secrets = data.draw(configs(directory))
        check_config(text, secrets, directory)


@BOUNDED
@given(st.binary(max_size=200) | st.text(max_size=200))
@example(b"\xff\xfe targets: []")
@example("[" * 5000)
@example("targets:\n  - {name: a, dsn: 'host=x', 1: x, zz: y}\n")
@example("targets: [{name: a, dsn: 'host=x'}, {name: a, dsn: 'host=y'}]")
def test_load_config_survives_arbitrary_files(content: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_config(content, [], Path(tmp))


def test_unknown_keys_of_mixed_types_are_reported() -> None:
    # Regression: sorted() of {1, "zz"} raised TypeError, a traceback instead of exit code 2.
    with tempfile.TemporaryDirectory() as tmp:
        text = "targets:\n  - {name: a, dsn: 'host=x', 1: x, zz: y}\n"
        exc = check_config(text, [], Path(tmp))
    assert exc is not None and "unknown key(s) 1, zz" in str(exc)


def assert_exits_2_with(exc: ConfigError, *args: str) -> None:
    """The real command line with `args` prints exactly the parser's error line and exits 2."""
    result = subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert assert_one_line(result, 2) == f"pg-aio-exporter: error: {exc}"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data())
def test_cli_exits_2_with_one_line(data: st.DataObject) -> None:
    """The real command line on a few generated bad files: exit 2, the same one line."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        text, secrets = data.draw(configs(directory))
        exc = check_config(text, secrets, directory)
        if exc is None:
            reject()  # a good file would start the exporter
        assert_exits_2_with(exc, "--config", str(directory / "config.yaml"))


# -- --web.config.file ---------------------------------------------------------------------


# Cost 4: the fastest bcrypt allows, so that a hash that loads costs nothing to check.
HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
TLS_KEYS = ["cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"]
TLS_KEYS += ["max_version", "cipher_suites", "curve_preferences", "client_allowed_sans", "cert"]
TLS_KEYS += ["prefer_server_cipher_suites"]
TLS_WORDS = [
    "TLS12",
    "TLS13",
    "TLS10",
    "NoClientCert",
    "RequestClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
    "missing.crt",
    "",
]


@st.composite
def web_configs(draw: st.DrawFn, certs: Certs) -> str:
    """The text of a web config file: the toolkit's keys with real, missing and junk values."""
    cert, key = certs.pair("server")
    values = st.sampled_from([str(cert), str(key), str(certs.ca), cert.name, *TLS_WORDS]) | JUNK
    tls = {
        name: draw(values)
        for name in draw(st.lists(st.sampled_from([*TLS_KEYS, "tls_junk"]), unique=True))
    }
    users = draw(
        st.dictionaries(
            st.text(max_size=6) | st.integers(),
            st.sampled_from([HASH, "$2b$10$short", "plain"]) | JUNK,
            max_size=3,
        )
        | JUNK
    )
    document: dict[object, object] = {}
    if draw(st.booleans()):
        document["tls_server_config"] = tls if draw(st.integers(0, 4)) else draw(JUNK)
    if draw(st.booleans()):
        document["basic_auth_users"] = users
    if draw(st.integers(0, 9)) == 0:
        document[draw(st.text(max_size=5) | st.integers())] = draw(JUNK)
    text = yaml.safe_dump(draw(JUNK) if draw(st.integers(0, 9)) == 0 else document)
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(list(":-[]{}'\"#&*!|>%@`\t\n"))) + text[at:]
    return text


def check_web_config(content: str | bytes, directory: Path) -> ConfigError | None:
    path = directory / "web.yml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    try:
        load_web_config(str(path))
    except ConfigError as exc:
        assert_clean(exc)
        return exc
    return None


@BOUNDED
@given(st.data())
def test_load_web_config_loads_or_fails_cleanly(certs: Certs, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_web_config(data.draw(web_configs(certs)), Path(tmp))


@BOUNDED
@given(st.binary(max_size=200) | st.text(max_size=200))
@example(b"\xff\xfe tls_server_config: {}")
@example("[" * 5000)
@example("tls_server_config: {cert_file: [a], key_file: b}\n")
@example("tls_server_config: {cert_file: a, key_file: b, min_version: [TLS12]}\n")
@example("tls_server_config: {cert_file: a, key_file: b, 1: x, zz: y}\n")
@example("basic_auth_users: {'a\\nb': plain}\n")
def test_load_web_config_survives_arbitrary_files(content: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_web_config(content, Path(tmp))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data())
def test_cli_web_config_exits_2_with_one_line(certs: Certs, data: st.DataObject) -> None:
    """The real command line on a few generated bad web config files."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        exc = check_web_config(data.draw(web_configs(certs)), directory)
        if exc is None:
            reject()  # a good file would start the exporter
        assert_exits_2_with(exc, "--dsn", "host=x", "--web.config.file", str(directory / "web.yml"))

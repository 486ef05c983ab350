"""deploy/systemd: the unit parses cleanly for systemd itself and its sandbox stays tight."""

from __future__ import annotations

import configparser
import shutil
from pathlib import Path

import pytest
import yaml

from deploy_files import DEPLOY, run, venv_tool

pytestmark = pytest.mark.unit

UNIT = DEPLOY / "systemd" / "pg-aio-exporter.service"
# systemd-analyze security scores 0 (locked down) .. 10 (unconfined), in tenths here.
MAX_EXPOSURE_TENTHS = 20


def directives() -> dict[str, list[str]]:
    """`Key` -> every value it is given (systemd allows repeats), across all sections."""
    # typeshed: dict_type holds str values, but configparser stores lists in it while reading;
    # optionxform is a method there, replaced to keep the keys' case.
    parser = configparser.RawConfigParser(strict=False, dict_type=_MultiDict)  # type: ignore[arg-type]
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    # configparser ends by joining each key's list of lines with newlines: one value a line.
    return {
        key: value.split("\n")
        for section in parser.sections()
        for key, value in parser.items(section)
    }


class _MultiDict(dict[str, list[str] | str]):
    """While reading, configparser stores each value as a list of its lines: a repeated key
    extends the list it already has instead of replacing it."""

    def __setitem__(self, key: str, value: list[str] | str) -> None:
        existing = self.get(key)
        if isinstance(value, list) and isinstance(existing, list):
            existing.extend(value)
        else:
            super().__setitem__(key, value)


def test_unit_is_hardened_and_reads_the_password_from_a_credential() -> None:
    unit = directives()
    expected = {
        "DynamicUser": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "NoNewPrivileges": "yes",
        "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
        "CapabilityBoundingSet": "",
        "RestartPreventExitStatus": "2",
    }
    for key, value in expected.items():
        assert unit[key] == [value], key
    (credential,) = unit["LoadCredential"]
    name = credential.split(":")[0]
    # The shipped example targets file points password_file at that credential.
    targets = yaml.safe_load((DEPLOY / "systemd" / "targets.yaml").read_text())["targets"]
    assert targets[0]["password_file"] == f"/run/credentials/{UNIT.name}/{name}"
    assert "password" not in targets[0]["dsn"]
    (exec_start,) = unit["ExecStart"]
    assert "--config=/etc/pg-aio-exporter/targets.yaml" in exec_start


def unit_with_real_binary(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at an installed exporter: verify checks that it exists."""
    binary = venv_tool("pg-aio-exporter")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/opt/pg-aio-exporter/bin/pg-aio-exporter", binary))
    assert binary in unit.read_text()
    return unit


@pytest.fixture
def analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze not installed (Debian package systemd)")
    return tool


def test_systemd_analyze_verify_is_silent(analyze: str, tmp_path: Path) -> None:
    result = run(analyze, "verify", unit_with_real_binary(tmp_path))
    # verify exits 0 on unknown keys or bad values, but reports them: any output is a finding.
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_systemd_analyze_security_exposure(analyze: str, tmp_path: Path) -> None:
    result = run(
        analyze,
        "security",
        "--offline=yes",
        f"--threshold={MAX_EXPOSURE_TENTHS}",
        unit_with_real_binary(tmp_path),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "Overall exposure level" in result.stdout

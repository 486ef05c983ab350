#!/usr/bin/env python3
"""Build PostgreSQL 18 with liburing (io_method=io_uring) once per machine, into
pg_aio_exporter.demo.iouring.CACHE; print its directory. `make test` runs it before the suite.

The source is Debian unstable's source package postgresql-18 (the upstream release tarball and
Debian's packaging), fetched from the archive that this machine's own apt sources name, with a
private sources list and lists directory so the system's apt setup is untouched. apt verifies
every downloaded file against the checksums of the signed Sources index. Debian's patches are
not applied: the build is upstream PostgreSQL.

A finished build is reused without any network access. Builds run under a lock (worktrees and
CI runs on one machine share the cache) in a dot-directory that is renamed into place only
when installed, so a half-built tree is never taken for done. Any failure: one line on stderr,
exit 1.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from pg_aio_exporter.demo import iouring
from pg_aio_exporter.demo.debian import ArchiveError, sandbox_may_write, system_archive

SOURCE_PACKAGE = "postgresql-18"
SUITE = "sid"
APT_PACKAGES = {  # command or file that shows it is installed -> package
    "bison": "bison",
    "flex": "flex",
    "gcc": "gcc",
    "make": "make",
    "pkg-config": "pkg-config",
    "/usr/include/liburing.h": "liburing-dev",
    "/usr/include/zlib.h": "zlib1g-dev",
}
CONFIGURE = [
    "--with-liburing",
    "--without-readline",
    "--without-icu",
    # Binaries find libpq beside them ($ORIGIN/../lib; quoted for make's shell) instead of at
    # the absolute install path, so that a copy of the tree runs too: the demo and the suite
    # copy it for the server's OS user when a 0700 home hides the cache from it.
    "--disable-rpath",
    "LDFLAGS=-Wl,-rpath,'$$ORIGIN/../lib'",
]
# pg_buffercache evicts shared buffers for cold reads in the suite.
CONTRIB = ["pg_buffercache"]


class BuildError(Exception):
    pass


def main() -> int:
    try:
        print(build())
    except (BuildError, ArchiveError, iouring.IoUringUnavailable) as error:
        print(f"build-postgres-io-uring: {error}", file=sys.stderr)
        return 1
    return 0


def build() -> Path:
    refusal = iouring.kernel_refusal()
    if refusal is not None:
        raise BuildError(f"io_method=io_uring cannot run on this machine: {refusal}")
    if found := iouring.builds():
        return found[0]
    iouring.CACHE.mkdir(parents=True, exist_ok=True)
    with (iouring.CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another clone may be building it right now
        if found := iouring.builds():
            return found[0]
        for stale in iouring.CACHE.glob(".build-*"):  # left by a killed build
            shutil.rmtree(stale)
        install_build_packages()
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="pg-aio-apt-") as downloads:
            version, tarball = download_source(Path(downloads))
            # Built beside its final place: the last step is a rename on the same file system.
            work = Path(tempfile.mkdtemp(prefix=".build-", dir=iouring.CACHE))
            try:
                prefix = build_in(work, version, tarball)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        say(f"built in {time.monotonic() - started:.0f} s")
        return prefix


def install_build_packages() -> None:
    missing = sorted(
        {
            package
            for probe, package in APT_PACKAGES.items()
            if not (Path(probe).exists() if probe.startswith("/") else shutil.which(probe))
        }
    )
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BuildError(f"missing build packages (as root: apt-get install {' '.join(missing)})")
    run(["apt-get", "update", "-qq"], "apt-get update")
    run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
        f"apt-get install {' '.join(missing)}",
        env={"DEBIAN_FRONTEND": "noninteractive"},
    )


def build_in(work: Path, version: str, tarball: Path) -> Path:
    prefix = iouring.CACHE / f"{version}+{iouring.RECIPE}"
    log = iouring.CACHE / "build.log"
    say(f"building PostgreSQL {version} with liburing into {prefix} (~7 min, log: {log})")
    with tarfile.open(tarball) as archive:
        archive.extractall(work / "src", filter="data")
    (source,) = (work / "src").iterdir()
    stage = work / "stage"
    with log.open("w") as out:
        steps = [
            ["./configure", f"--prefix={prefix}", *CONFIGURE],
            ["make", f"-j{os.cpu_count() or 2}"],
            ["make", "install", f"DESTDIR={stage}"],
            *(["make", "-C", f"contrib/{name}", "install", f"DESTDIR={stage}"] for name in CONTRIB),
        ]
        for step in steps:
            run(step, f"{' '.join(step[:2])} failed, see {log}", cwd=source, out=out)
    # Moving the staged tree into place is the last, atomic step.
    (stage / prefix.relative_to("/")).rename(prefix)
    return prefix


def download_source(work: Path) -> tuple[str, Path]:
    """`apt-get source --download-only` from SUITE on the system's own Debian archive, into
    `work` (a temp dir outside root's home, which apt's download user could not enter)."""
    apt = work / "apt"
    (apt / "lists" / "partial").mkdir(parents=True)
    uri, keyring = system_archive()
    signed_by = f"Signed-By: {keyring}\n" if keyring else ""
    (apt / "sources.list").write_text("")
    (apt / "sources.list.d").mkdir()
    (apt / "sources.list.d" / "sid-src.sources").write_text(
        f"Types: deb-src\nURIs: {uri}\nSuites: {SUITE}\nComponents: main\n{signed_by}"
    )
    options = [
        f"-oDir::Etc::SourceList={apt / 'sources.list'}",
        f"-oDir::Etc::SourceParts={apt / 'sources.list.d'}",
        f"-oDir::State::Lists={apt / 'lists'}",
        "-oDir::Cache::pkgcache=",
        "-oDir::Cache::srcpkgcache=",
    ]
    download = work / "download"
    download.mkdir()
    sandbox_may_write(work)
    run(["apt-get", *options, "update", "-qq"], f"apt-get update for {SUITE} at {uri} failed")
    run(
        ["apt-get", *options, "source", "--download-only", "-qq", SOURCE_PACKAGE],
        f"apt-get source {SOURCE_PACKAGE} from {uri} failed",
        cwd=download,
    )
    dsc = next(download.glob(f"{SOURCE_PACKAGE}_*.dsc"), None)
    tarball = next(download.glob(f"{SOURCE_PACKAGE}_*.orig.tar.*"), None)
    if dsc is None or tarball is None:
        raise BuildError(f"apt-get source {SOURCE_PACKAGE} gave no .dsc or upstream tarball")
    version = dsc.name.removeprefix(f"{SOURCE_PACKAGE}_").removesuffix(".dsc")
    return version.partition(":")[2] or version, tarball


# The variables through which a make passes its state to the makes it runs. `make test` runs
# this script, and PostgreSQL's makefiles generate their headers (utils/errcodes.h, ...) only
# in a make at MAKELEVEL 0: inherited, they fail the build of a fresh machine.
OUTER_MAKE = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def child_environment(
    environ: Mapping[str, str], extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a step: this process' own, without an outer make's state."""
    base = {key: value for key, value in environ.items() if key not in OUTER_MAKE}
    return {**base, **(extra or {})}


def run(
    argv: list[str],
    failure: str,
    cwd: Path | None = None,
    out: IO[str] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    result = subprocess.run(
        argv,
        cwd=cwd,
        env=child_environment(os.environ, env),
        stdout=out if out is not None else subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        detail = (result.stdout or "").strip().splitlines()[-1:] if out is None else []
        raise BuildError(f"{failure}{': ' + detail[0] if detail else ''}")


def say(message: str) -> None:
    print(f"build-postgres-io-uring: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())

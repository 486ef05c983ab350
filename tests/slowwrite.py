"""Slow writes for real: the LD_PRELOAD write-delay shim (tests/shim/slowwrite.c), built per
server by the suite, the sibling of slowread.py. Delays fsync/fdatasync (WAL flushes, checkpoint
syncs) and pwrite/pwritev of 8 kB or more (data and WAL writes) below the system call."""

from __future__ import annotations

from pg_aio_exporter.demo.server import LocalServer
from slowread import DelayShim


class SlowWrites(DelayShim):
    """Attach to a server before start() (beside SlowReads, if any); then set_delay() moves its
    writes and syncs from fast to slow."""

    def __init__(self, server: LocalServer) -> None:
        super().__init__(server, "slowwrite")

    def set_delay(self, sync_us: int, write_us: int = 0) -> None:
        self._write_delays(sync_us, write_us)

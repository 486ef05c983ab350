"""Slow writes for real: the LD_PRELOAD write-delay shim (tests/shim/slowwrite.c), built per
server by the suite, the sibling of slowread.py. Delays fsync/fdatasync (WAL flushes, checkpoint
syncs) and pwrite/pwritev of 8 kB or more (data and WAL writes) below the system call."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pg_aio_exporter.demo.server import LocalServer

SOURCE = Path(__file__).parent / "shim" / "slowwrite.c"


class SlowWrites:
    """Attach to a server before start() (beside SlowReads, if any); then set_delay() moves its
    writes and syncs from fast to slow."""

    def __init__(self, server: LocalServer) -> None:
        self._library = server.root / "slowwrite.so"
        self._delay_file = server.root / "slowwrite_us"
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O2", "-o", str(self._library), str(SOURCE), "-ldl"],
            check=True,
            capture_output=True,
        )
        self._library.chmod(0o755)
        self.set_delay(0)
        preload = " ".join(filter(None, [server.env.get("LD_PRELOAD"), str(self._library)]))
        server.env.update(LD_PRELOAD=preload, SLOWWRITE_FILE=str(self._delay_file))

    def set_delay(self, sync_us: int, write_us: int = 0) -> None:
        self._delay_file.write_text(f"{sync_us} {write_us}\n")
        self._delay_file.chmod(0o644)

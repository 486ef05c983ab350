"""Slow storage for real: the LD_PRELOAD read-delay shim, built per server by the suite."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pg_aio_exporter.demo.server import LocalServer

SOURCE = Path(__file__).parent / "shim" / "slowread.c"
# A server whose single io worker and small buffers make slow storage show at once: reads
# reach the kernel, and two scanning clients keep the one worker busy.
ONE_IO_WORKER = {
    "shared_buffers": "16MB",
    "track_io_timing": "on",
    "io_method": "worker",
    "io_workers": "1",
}


class SlowReads:
    """Attach to a server before start(); then set_delay() moves storage from fast to slow."""

    def __init__(self, server: LocalServer) -> None:
        self._library = server.root / "slowread.so"
        self._delay_file = server.root / "slowread_us"
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O2", "-o", str(self._library), str(SOURCE), "-ldl"],
            check=True,
            capture_output=True,
        )
        self._library.chmod(0o755)
        self.set_delay(0)
        server.env.update(LD_PRELOAD=str(self._library), SLOWREAD_FILE=str(self._delay_file))

    def set_delay(self, microseconds: int) -> None:
        self._delay_file.write_text(f"{microseconds}\n")
        self._delay_file.chmod(0o644)

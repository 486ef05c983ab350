"""Slow storage for real: the LD_PRELOAD read-delay shim, built by the suite (once per test process,
copied into each server)."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

from pg_aio_exporter.demo.server import LocalServer

SHIMS = Path(__file__).parent / "shim"
# A server whose single io worker and small buffers make slow storage show at once: reads
# reach the kernel, and two scanning clients keep the one worker busy.
ONE_IO_WORKER = {
    "shared_buffers": "16MB",
    "track_io_timing": "on",
    "io_method": "worker",
    "io_workers": "1",
}


@functools.cache
def built(name: str) -> Path:
    """tests/shim/NAME.c compiled once per test process (each server gets a copy): a compile
    takes 0.3 s on an idle machine, over 1 s on a busy one."""
    out = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    atexit.register(shutil.rmtree, out, True)
    library = out / f"{name}.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", "-o", str(library), str(SHIMS / f"{name}.c"), "-ldl"],
        check=True,
        capture_output=True,
    )
    return library


class DelayShim:
    """tests/shim/NAME.c copied into one server (built()) and preloaded into it (beside any other
    shim); it reads its delays from a file that set_delay() rewrites while the server runs."""

    def __init__(self, server: LocalServer, name: str) -> None:
        self._library = server.root / f"{name}.so"
        self._delay_file = server.root / f"{name}_us"
        shutil.copyfile(built(name), self._library)
        self._library.chmod(0o755)
        self._write_delays(0)
        preload = " ".join(filter(None, [server.env.get("LD_PRELOAD"), str(self._library)]))
        server.env.update({"LD_PRELOAD": preload, f"{name.upper()}_FILE": str(self._delay_file)})

    def _write_delays(self, *microseconds: int) -> None:
        self._delay_file.write_text(" ".join(map(str, microseconds)) + "\n")
        self._delay_file.chmod(0o644)


class SlowReads(DelayShim):
    """Attach to a server before start(); then set_delay() moves storage from fast to slow."""

    def __init__(self, server: LocalServer) -> None:
        super().__init__(server, "slowread")

    def set_delay(self, microseconds: int) -> None:
        self._write_delays(microseconds)

"""Go tools the suite builds from the Go module proxy, cached outside the checkout in
~/.cache/pg_aio_exporter/ (shared by every clone and CI run on the machine)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CACHE = Path.home() / ".cache" / "pg_aio_exporter"
# Where Go itself may live when it is not on PATH: the upstream tarball's place, Debian's.
GO_CANDIDATES = ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")


def go() -> str:
    found = shutil.which("go") or next((p for p in GO_CANDIDATES if Path(p).is_file()), None)
    if found is None:
        pytest.fail("no Go toolchain: scripts/system-deps.sh installs golang-go")
    return found


def go_tool(package: str, version: str) -> Path:
    """The binary of `go install package@version`, built once per version."""
    name = package.rsplit("/", 1)[-1]
    binary = CACHE / "tools" / f"{name}-{version}" / name
    if binary.is_file():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    # Go's module and build caches go under ours too; -modcacherw keeps them deletable.
    env = {
        **os.environ,
        "GOMODCACHE": str(CACHE / "go" / "mod"),
        "GOCACHE": str(CACHE / "go" / "build"),
        "GOFLAGS": "-modcacherw",
    }
    with tempfile.TemporaryDirectory(dir=binary.parent) as gobin:
        result = subprocess.run(
            [go(), "install", f"{package}@{version}"],
            env={**env, "GOBIN": gobin},
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        assert result.returncode == 0, f"go install {package}@{version}: {result.stderr}"
        # A rename is atomic: two runs building at once both end with a whole binary.
        os.replace(Path(gobin) / name, binary)
    return binary

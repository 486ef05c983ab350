"""The image of deploy/Dockerfile, built by `make image` (scripts/image.sh), and containers run
from it with podman as a user runs them (scripts/podman.sh: the engine settings this machine
needs, in storage of its own)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deploy_files import REPO

PODMAN = REPO / "scripts" / "podman.sh"
BUILD_TIMEOUT = 900  # seconds: a cold build makes the Debian base first (about 3 minutes)


def podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PODMAN), *args], capture_output=True, text=True, check=False, timeout=timeout
    )


def build_image() -> str:
    """scripts/image.sh, as `make image` runs it: the image's name (cached layers make a
    rebuild of an unchanged tree take seconds)."""
    result = subprocess.run(
        [str(REPO / "scripts" / "image.sh")],
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def inspect(what: str, name: str) -> dict[str, Any]:
    result = podman(what, "inspect", name)
    assert result.returncode == 0, result.stderr
    (found,) = json.loads(result.stdout)
    assert isinstance(found, dict)
    return found


@contextmanager
def container(image: str, *run_args: str, args: tuple[str, ...] = ()) -> Iterator[str]:
    """`podman run -d` of `image` on the host's network (it reaches the suite's servers on
    127.0.0.1), hardened as docs/deploy.md says to run it; `args` replace the image's CMD.
    Yields the container's name; removed afterwards, its log attached to a failure."""
    name = f"pg-aio-test-{uuid.uuid4().hex[:10]}"
    started = podman(
        "run",
        "-d",
        "--name",
        name,
        "--network",
        "host",
        "--read-only",
        "--cap-drop=ALL",
        "--security-opt",
        "no-new-privileges",
        *run_args,
        image,
        *args,
    )
    assert started.returncode == 0, started.stderr
    try:
        yield name
    finally:
        podman("rm", "--force", "--time", "0", name)


def logs(name: str) -> str:
    result = podman("logs", name)
    return result.stdout + result.stderr


def readable_by(uid: int, path: Path, mode: int = 0o400) -> Path:
    """`path` owned by `uid` with `mode`, as a secret mounted for the container's user is."""
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path

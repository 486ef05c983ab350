"""A target's password, read again at every (re)connect from its file or its command, so that
a rotated password or a short-lived token (an RDS IAM token lasts 15 minutes) needs no restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from pathlib import Path

from pg_aio_exporter.config.targets import PasswordSource
from pg_aio_exporter.poll.errors import PasswordSourceError


async def read_password(source: PasswordSource) -> str:
    """The current password. Failures raise PasswordSourceError, whose message says which
    source failed and how, never what the file held or the command printed."""
    if source.file is not None:
        try:
            text = Path(source.file).read_text()
        except OSError as exc:
            raise PasswordSourceError(
                f"cannot read password_file {source.file}: {exc.strerror}"
            ) from None
        except UnicodeDecodeError:
            raise PasswordSourceError(f"password_file {source.file} is not UTF-8 text") from None
        what = f"password_file {source.file}"
    else:
        text = await _run(source)
        what = f"password_command {source.command[0]}"
    password = text.strip()
    if not password:
        raise PasswordSourceError(f"{what} gave an empty password")
    return password


async def _run(source: PasswordSource) -> str:
    # stderr is dropped, not logged: a failing token helper may print the secret it holds.
    proc = await asyncio.create_subprocess_exec(
        *source.command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    name = source.command[0]
    try:
        # asyncio.timeout, not wait_for: on 3.11 wait_for drops a cancellation (shutdown)
        # that lands as the command ends (see expose/exposition.py's render loop).
        async with asyncio.timeout(source.timeout):
            out, _ = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):  # it may have ended since the timeout
            proc.kill()
        await proc.wait()
        raise PasswordSourceError(
            f"password_command {name} timed out after {source.timeout:g}s"
        ) from None
    if proc.returncode != 0:
        raise PasswordSourceError(f"password_command {name} exited with status {proc.returncode}")
    try:
        return out.decode()
    except UnicodeDecodeError:
        raise PasswordSourceError(f"password_command {name} printed no UTF-8 text") from None

"""The worker's client-side timeout and error kinds, without a server."""

from __future__ import annotations

import asyncio
import contextlib
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

import psycopg
import pytest

from pg_aio_exporter.poll.errors import error_kind
from pg_aio_exporter.poll.session import CANCEL_GRACE, client_timeout

pytestmark = pytest.mark.unit
T = TypeVar("T")


async def psycopg_like_wait() -> None:
    """What psycopg's AsyncConnection.wait does when cancelled: ask the server to cancel and
    wait (up to 5 + 5 s) for it; a second interruption ends that at once."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        with contextlib.suppress(asyncio.CancelledError):  # psycopg closes the connection
            await asyncio.sleep(10)
        raise


class VirtualTime(selectors.DefaultSelector):
    """The loop's clock: it stands still while callbacks run and, when the loop would wait,
    jumps to the next timer instead of sleeping. Time in these tests is the loop's schedule,
    not the machine's load."""

    now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        assert timeout is not None, "the loop would wait forever"
        self.now += timeout
        return super().select(0)


def run(main: Coroutine[Any, Any, T]) -> tuple[T, float]:
    """`main` run on a loop with virtual time: its result and the seconds it took."""
    clock = VirtualTime()
    loop = asyncio.SelectorEventLoop(clock)
    loop.time = lambda: clock.now  # type: ignore[method-assign]
    try:
        return loop.run_until_complete(main), clock.now
    finally:
        loop.close()


def test_client_timeout_is_not_stretched_by_cancellation_handling() -> None:
    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with client_timeout(0.2):
                await psycopg_like_wait()

    _, elapsed = run(main())
    # The grace after the timeout, exactly (was 10.2 s with asyncio.timeout).
    assert elapsed == pytest.approx(0.2 + CANCEL_GRACE), elapsed


def test_client_timeout_lets_a_shutdown_through() -> None:
    async def main() -> None:
        async def body() -> None:
            async with client_timeout(5):
                await asyncio.sleep(60)

        task = asyncio.create_task(body())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    _, elapsed = run(main())
    assert elapsed == pytest.approx(0.05), "cancelled at once"


def test_client_timeout_leaves_fast_work_alone() -> None:
    async def main() -> int:
        async with client_timeout(1):
            await asyncio.sleep(0.01)
        await asyncio.sleep(1 + CANCEL_GRACE)  # the second cancellation must not fire later
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    cancelling, elapsed = run(main())
    assert cancelling == 0
    assert elapsed == pytest.approx(1.01 + CANCEL_GRACE)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"), "timeout"),
        (
            psycopg.OperationalError(
                'connection failed: FATAL:  pg_hba.conf rejects connection for host "127.0.0.1",'
                ' user "u", database "d", no encryption'
            ),
            "auth",
        ),
        (
            psycopg.OperationalError(
                'connection failed: FATAL:  no pg_hba.conf entry for host "127.0.0.1", user "u"'
            ),
            "auth",
        ),
        (
            psycopg.OperationalError("server does not support SSL, but SSL was required"),
            "connection",
        ),
        (psycopg.OperationalError("FATAL:  sorry, too many clients already"), "connection"),
        # By SQLSTATE, whatever the text's language.
        (psycopg.errors.InvalidPassword("Passwort-Authentifizierung fehlgeschlagen"), "auth"),
        (psycopg.errors.InvalidAuthorizationSpecification("Rolle existiert nicht"), "auth"),
        (psycopg.errors.TooManyConnections("zu viele Verbindungen"), "connection"),
        (psycopg.errors.AdminShutdown("Abbruch"), "connection"),
        (psycopg.errors.UndefinedTable("Relation existiert nicht"), "query"),
    ],
)
def test_error_kind_of_faults(exc: BaseException, kind: str) -> None:
    assert error_kind(exc) == kind

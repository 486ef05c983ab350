"""In-memory state -> the /metrics body, rendered off the scrape path.

Workers publish their latest families, already rendered to text (metricset.py); a render task
assembles the body once per burst of updates and swaps it in. A scrape only reads
`Exposition.body`, so it never waits on PostgreSQL or on rendering.

With many targets the body is large and updates arrive many times a second (figures in
docs/performance.md), so a render formats and copies nothing: each (target, part) keeps its
text per family, formatted once when published, and the body is the list of these texts in
exposition order.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import zlib
from collections.abc import Callable

from pg_aio_exporter.expose.metricset import Family
from pg_aio_exporter.expose.selfmetrics import SelfMetrics

# Updates arriving within this window share one render.
COALESCE_SECONDS = 0.05
# A large body (tens of targets) gets an update every few milliseconds, and each render lists
# every target's texts again and trims the heap of those it superseded: render it at most once
# a second (samples are a second apart anyway) instead of 20 times.
LARGE_BODY_COALESCE_SECONDS = 1.0
# Up to this size a body is joined and compressed when rendered, so that a scrape only sends
# bytes. A larger body (tens of targets) is never copied whole: it is sent
# chunk by chunk, and compressed by its first gzip scrape, since it is replaced many times
# between two Prometheus scrapes and compressing each version would cost more than all else.
EAGER_BYTES = 512 * 1024
# Chunks are sent in batches of about this size: a few system calls, and no copy of the whole.
WRITE_BATCH_BYTES = 256 * 1024


# A part is dropped at most max_age * (1 + 1/AGE_CHECKS) after its last publish.
AGE_CHECKS = 4

GZIP_WBITS = 31  # zlib: a gzip header and trailer around the deflate stream


def _compress(chunks: list[bytes]) -> bytes:
    compressor = zlib.compressobj(1, zlib.DEFLATED, GZIP_WBITS)
    return b"".join([*map(compressor.compress, chunks), compressor.flush()])


def _release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc only; elsewhere a no-op).

    Between two renders of a large body, every target's poll and samples replace their texts:
    thousands of small blocks freed all over the heap, which glibc keeps resident unless
    trimmed (what that costs: docs/performance.md)."""
    global _malloc_trim  # noqa: PLW0603
    if _malloc_trim is None:
        import ctypes  # noqa: PLC0415  (only large deployments get here)
        import ctypes.util  # noqa: PLC0415

        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        _malloc_trim = getattr(libc, "malloc_trim", _no_trim)
    _malloc_trim(0)


def _no_trim(pad: int) -> int:
    return 0


_malloc_trim: Callable[[int], int] | None = None


class Body:
    """One version of the /metrics body: the (target, part) texts in exposition order."""

    __slots__ = ("_chunks", "_gzipped", "large", "length")

    def __init__(self, chunks: list[bytes]) -> None:
        self.length = sum(map(len, chunks))
        self.large = self.length > EAGER_BYTES
        self._chunks = chunks
        self._gzipped: bytes | None = None
        if not self.large:
            self._chunks = [b"".join(chunks)]
            self._gzipped = _compress(self._chunks)

    @property
    def gzipped(self) -> bytes:
        gzipped = self._gzipped
        if gzipped is None:
            # Two simultaneous first gzip scrapes may both compress: same bytes, so no lock.
            gzipped = self._gzipped = _compress(self._chunks)
        return gzipped

    def write(self, write: Callable[[bytes], object]) -> None:
        batch: list[bytes] = []
        size = 0
        for chunk in self._chunks:
            batch.append(chunk)
            size += len(chunk)
            if size >= WRITE_BATCH_BYTES:
                write(b"".join(batch))
                batch.clear()
                size = 0
        if batch:
            write(b"".join(batch))  # the one chunk of a small body, not copied


class _Piece:
    """One family of one (target, part): its header and its sample lines."""

    __slots__ = ("header", "name", "text")

    def __init__(self, family: Family) -> None:
        self.name = family.name
        self.header = family.header  # shared by every target: metricset.header is cached
        self.text = "".join(family.lines).encode()


class Exposition:
    def __init__(
        self,
        selfmetrics: SelfMetrics,
        *,
        max_age: float = math.inf,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`max_age`: seconds after which a (target, part) that was not published again is
        dropped, so that no family older than that is served as current (the worker's
        stale_after: a target whose task hangs or died goes absent, not frozen)."""
        self._self = selfmetrics
        self._max_age = max_age
        self._clock = clock
        self._parts: dict[tuple[str, str], list[_Piece]] = {}
        self._published: dict[tuple[str, str], float] = {}
        self._changed = asyncio.Event()
        self.body = Body([])
        self._rendered = self._clock()
        self.render()

    def stale_for(self) -> float | None:
        """How long ago the body was last rendered, when that is longer than max_age (the
        render task re-renders at least every max_age / AGE_CHECKS: it is dead or stuck,
        and /metrics frozen); None while the body is current."""
        age = self._clock() - self._rendered
        return age if age > self._max_age else None

    def publish(self, target: str, part: str, families: list[Family]) -> None:
        """Replace what one target's poller ("poll") or sampler ("sample") last produced."""
        self._parts[(target, part)] = [_Piece(family) for family in families]
        self._published[(target, part)] = self._clock()
        self._changed.set()

    def forget(self, target: str) -> None:
        """Drop everything a target published (a reload removed or changed it): its series
        leave /metrics at the next render instead of ageing out."""
        for key in [key for key in self._parts if key[0] == target]:
            del self._parts[key], self._published[key]
        self._changed.set()

    def _age_out(self) -> None:
        oldest = self._clock() - self._max_age
        for key in [key for key, at in self._published.items() if at < oldest]:
            del self._parts[key], self._published[key]

    def render(self) -> None:
        self._age_out()
        # The text format allows one HELP/TYPE per name: group every part's pieces by family,
        # in order of first appearance over the parts sorted by (target, part).
        groups: dict[str, list[_Piece]] = {}
        for key in sorted(self._parts):
            for piece in self._parts[key]:
                groups.setdefault(piece.name, []).append(piece)
        chunks: list[bytes] = []
        for group in groups.values():
            chunks.append(group[0].header)
            chunks.extend(piece.text for piece in group)
        chunks.extend(self._self.render())
        self.body = Body(chunks)
        self._rendered = self._clock()
        if self.body.large:
            _release_free_memory()

    async def run(self) -> None:
        # Nothing published for a while still renders now and then, to age out what is stale.
        recheck = None if math.isinf(self._max_age) else self._max_age / AGE_CHECKS
        while True:
            # Not asyncio.wait_for: on Python 3.11 it returns the wait's result, dropping a
            # cancellation that arrives as the event is set (a publish), and this task then
            # never ends: the exporter's shutdown waited on it forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(recheck):
                    await self._changed.wait()
            if self._changed.is_set():
                large = self.body.large
                await asyncio.sleep(LARGE_BODY_COALESCE_SECONDS if large else COALESCE_SECONDS)
                self._changed.clear()
            self.render()

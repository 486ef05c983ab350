"""A TCP proxy between the exporter and PostgreSQL that can delay replies or stop answering."""

from __future__ import annotations

import asyncio
import threading

from pg_aio_exporter.demo.server import free_port


class Proxy:
    """Forwards 127.0.0.1:port -> upstream. `delay` seconds are added before every chunk the
    server sends back; `black_hole` accepts connections and forwards nothing. `requests` counts
    the chunks clients sent."""

    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self.delay = 0.0
        self.black_hole = False
        self.connections = 0
        self.requests = 0
        self._upstream = upstream_port
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="proxy")
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port)
        )
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.black_hole:
            await client_r.read()  # hold the connection open until the client gives up
            client_w.close()
            return
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self._upstream)
        await asyncio.gather(
            self._pipe(client_r, server_w, delayed=False),
            self._pipe(server_r, client_w, delayed=True),
            return_exceptions=True,
        )

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, delayed: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                self.requests += not delayed
                if delayed and self.delay:
                    await asyncio.sleep(self.delay)
                while self.black_hole:
                    await asyncio.sleep(0.05)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

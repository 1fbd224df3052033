"""The gateway's HTTP side (aiohttp): ``POST /`` takes JSON-RPC 2.0, ``GET /health`` says it is up.

A body over ``max_request_bytes`` (by its Content-Length, or counted while it streams in) is
answered with HTTP 413 and a JSON-RPC error (`REQUEST_TOO_LARGE`, id null) and never parsed.
Every other JSON-RPC answer is HTTP 200 (204 when a request held only notifications). Methods
call the chain synchronously, so `Dispatcher.handle` runs on a worker thread; the event loop
only reads bodies and writes answers.

Usage (in-process, e.g. tests)::

    server = GatewayServer(dispatcher, "127.0.0.1", 0, max_request_bytes=1 << 20).start()
    httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tenzro_training_listRuns"})
    server.stop()
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import Any, Callable

from aiohttp import web

from tenzro_operator.gateway.jsonrpc import REQUEST_TOO_LARGE, Dispatcher, RpcError, error_response

__all__ = ["GatewayServer"]

log = logging.getLogger("tenzro.gateway")

JSON = "application/json"


class GatewayServer:
    """Serves a `Dispatcher` over HTTP.

    Args:
        dispatcher: the JSON-RPC dispatcher.
        host: address to bind.
        port: TCP port (0: any free one; `url` tells which after `start`).
        max_request_bytes: the largest body accepted, bytes.
        health: extra fields of ``GET /health`` (chain id, registry address...).
    """

    def __init__(self, dispatcher: Dispatcher, host: str, port: int, max_request_bytes: int = 1 << 20,
                 health: dict[str, Any] | None = None) -> None:
        self.dispatcher, self.host, self.port = dispatcher, host, port
        self.max_request_bytes = max_request_bytes
        self.health = dict(health or {})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def url(self) -> str:
        """``http://host:port/`` of the bound server."""
        return f"http://{self.host}:{self.port}/"

    # -- handlers -----------------------------------------------------------------------

    def _too_large(self, size: int | None) -> web.Response:
        got = f"{size} bytes" if size is not None else "a body"
        err = RpcError(REQUEST_TOO_LARGE, f"request too large: {got} is over the limit of {self.max_request_bytes} "
                                          "bytes", {"limit_bytes": self.max_request_bytes})
        return web.json_response(error_response(err), status=413)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        if request.content_length is not None and request.content_length > self.max_request_bytes:
            return self._too_large(request.content_length)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._too_large(None)
        out = await asyncio.get_running_loop().run_in_executor(None, self.dispatcher.handle, body)
        if out is None:
            return web.Response(status=204)
        return web.Response(body=out, content_type=JSON)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, **self.health})

    def app(self) -> web.Application:
        """The aiohttp application (``client_max_size`` = the request limit)."""
        app = web.Application(client_max_size=self.max_request_bytes)
        app.router.add_post("/", self._post)
        app.router.add_get("/health", self._health)
        return app

    # -- lifecycle ----------------------------------------------------------------------

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._stopped = asyncio.Event()

    async def _serve(self, ready: Callable[[str], None] | None) -> None:
        await self._start()
        if ready is not None:
            ready(self.url)
        try:
            await self._stopped.wait()
        finally:
            await self._runner.cleanup()

    def serve_forever(self, ready: Callable[[str], None] | None = None) -> None:
        """Serve in the foreground until SIGINT or SIGTERM; ``ready(url)`` once bound.

        Raises:
            OSError: the address cannot be bound (port taken, bad host).
        """

        async def main() -> None:
            loop = asyncio.get_running_loop()
            self._loop = loop
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, lambda: self._stopped and self._stopped.set())
            await self._serve(ready)

        asyncio.run(main())

    def start(self) -> "GatewayServer":
        """Serve on a background thread; returns once bound (re-raises a bind error)."""
        bound = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(self._start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                failure.append(exc)
                bound.set()
                return
            bound.set()
            try:
                self._loop.run_until_complete(self._stopped.wait())
                self._loop.run_until_complete(self._runner.cleanup())
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, name="gateway-http", daemon=True)
        self._thread.start()
        bound.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop a server started with `start` (waits up to ``timeout_s`` seconds)."""
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(timeout_s)


"""The gateway's HTTP side (aiohttp): ``POST /`` takes JSON-RPC 2.0, ``GET /health`` says it is up.

A body over ``max_request_bytes`` (by its Content-Length, or counted while it streams in) is
answered with HTTP 413 and a JSON-RPC error (`REQUEST_TOO_LARGE`, id null) and never parsed.
Every other JSON-RPC answer is HTTP 200 (204 when a request held only notifications). Methods
call the chain synchronously, so they run on worker threads; the event loop reads bodies, parses
them and writes answers.

Bounds, so that no client can hold the server (issue #24):

- Two worker pools: ``write_workers`` threads for requests calling a write method
  (`Dispatcher.writes`: they wait for a receipt) and ``read_workers`` for the rest. A write that
  finds every write worker taken is answered at once with `BUSY` (nothing done), so writes never
  queue for ever and never starve reads.
- At most ``max_connections`` connections at a time (`ConnectionGuard`). One more makes room by
  closing the connection that has waited longest for its next request (HTTP 503); only when every
  connection is busy with a request is it answered HTTP 503 and closed itself.
- ``read_timeout_s``: a request's headers must arrive within it (from the connection's start, or
  from the previous answer on a kept-alive connection; an idle kept-alive connection is closed
  after it too), and its body within it once the headers are in. A late one is answered HTTP 408
  and closed. aiohttp has no header read timeout of its own.

Usage (in-process, e.g. tests)::

    server = GatewayServer(dispatcher, "127.0.0.1", 0, max_request_bytes=1 << 20, read_timeout_s=10).start()
    httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tenzro_training_listRuns"})
    server.stop()
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from aiohttp import web

from tenzro_operator.gateway.jsonrpc import (
    BUSY,
    INVALID_REQUEST,
    REQUEST_TOO_LARGE,
    Dispatcher,
    RpcError,
    error_response,
)

__all__ = ["ConnectionGuard", "GatewayServer"]

log = logging.getLogger("tenzro.gateway")

JSON = "application/json"
MAX_CONNECTIONS = 256  # connections served at a time (default)
READ_TIMEOUT_S = 10.0  # seconds for a request's headers, and again for its body (default)
READ_WORKERS = 8  # threads running reads (default)
WRITE_WORKERS = 2  # threads running writes (default): each may wait receipt_timeout_s for a receipt


def _raw_answer(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer (JSON-RPC error body, id null) written straight to a transport."""
    body = json.dumps(error_response(RpcError(BUSY if status == 503 else INVALID_REQUEST, message))).encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {JSON}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


class ConnectionGuard:
    """Wraps aiohttp's protocol factory: counts connections, closes one whose request headers do
    not arrive within the read timeout, and makes room for a new connection over the limit by
    closing the one that has waited longest for its next request (a half-sent request or an idle
    kept-alive connection: a client that sends half requests cannot keep a prompt one out). Only
    when every connection is busy with a request is a new one refused.

    Counters (for tests and logs): ``open`` (now), ``refused`` (over the limit, nothing to evict),
    ``evicted`` (closed to make room), ``timed_out`` (headers or body too late).

    Args:
        factory: aiohttp's `web.Server` (called once per connection for its protocol).
        max_connections: connections served at a time.
        read_timeout_s: seconds a connection may take to send a request's headers.
    """

    def __init__(self, factory: Callable[[], asyncio.Protocol], max_connections: int, read_timeout_s: float) -> None:
        self.factory, self.max_connections, self.read_timeout_s = factory, max_connections, read_timeout_s
        self.open = self.refused = self.evicted = self.timed_out = 0
        # connections waiting for a request's headers, longest-waiting first (insertion order)
        self._timers: dict[asyncio.BaseTransport, asyncio.TimerHandle] = {}

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self, self.factory())

    def admit(self) -> bool:
        """Room for one more connection: True if under the limit, or once the longest-waiting
        connection has been closed; False when every connection is busy with a request."""
        if self.open < self.max_connections:
            return True
        if not self._timers:
            return False
        oldest = next(iter(self._timers))
        self.evicted += 1
        self._close(oldest, 503, "Service Unavailable", "closed to make room: no request received; retry")
        return True

    def arm(self, transport: asyncio.BaseTransport) -> None:
        """Start (again) the wait for the next request's headers on ``transport``."""
        self.disarm(transport)
        if not transport.is_closing():
            loop = asyncio.get_running_loop()
            self._timers[transport] = loop.call_later(self.read_timeout_s, self.expire, transport)

    def disarm(self, transport: asyncio.BaseTransport | None) -> None:
        """The headers are in: stop the wait."""
        timer = self._timers.pop(transport, None) if transport is not None else None
        if timer is not None:
            timer.cancel()

    def expire(self, transport: asyncio.BaseTransport) -> None:
        """Answer HTTP 408 and close: the request did not arrive in time."""
        self._timers.pop(transport, None)
        if transport.is_closing():
            return
        self.timed_out += 1
        self._close(transport, 408, "Request Timeout", f"request not received within {self.read_timeout_s:g} s")

    def _close(self, transport: asyncio.BaseTransport, status: int, reason: str, message: str) -> None:
        self.disarm(transport)
        protocol = transport.get_protocol()
        if isinstance(protocol, _Guarded):
            protocol.release()  # the slot is free now, not once the close completes
        transport.write(_raw_answer(status, reason, message))
        transport.close()


class _Guarded(asyncio.Protocol):
    """One connection's protocol: aiohttp's, behind the guard's limit and header deadline."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard, self.inner, self.transport = guard, inner, None
        self.counted = self.made = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if not self.guard.admit():
            self.guard.refused += 1
            transport.write(_raw_answer(503, "Service Unavailable", f"server busy: {self.guard.max_connections} "
                                                                    "connections busy; retry later"))
            transport.close()
            return
        self.guard.open += 1
        self.counted = self.made = True
        self.guard.arm(transport)
        self.inner.connection_made(transport)

    def release(self) -> None:
        """Give the connection's slot back (once)."""
        if self.counted:
            self.counted = False
            self.guard.open -= 1

    def connection_lost(self, exc: BaseException | None) -> None:
        self.release()
        self.guard.disarm(self.transport)
        if self.made:
            self.made = False
            self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.made:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.made else None

    def pause_writing(self) -> None:
        if self.made:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.made:
            self.inner.resume_writing()


class GatewayServer:
    """Serves a `Dispatcher` over HTTP.

    Args:
        dispatcher: the JSON-RPC dispatcher (its ``writes`` go to the write workers).
        host: address to bind.
        port: TCP port (0: any free one; `url` tells which after `start`).
        max_request_bytes: the largest body accepted, bytes.
        health: extra fields of ``GET /health`` (chain id, registry address...).
        max_connections: connections served at a time; one more is answered HTTP 503.
        read_timeout_s: seconds for a request's headers, and again for its body (HTTP 408 after).
        read_workers: threads running reads.
        write_workers: threads running writes; a write finding all taken is answered `BUSY`.
        admit: optional ``admit(client IP, parsed document) -> RpcError | None``, called on the
            event loop before any call of a request runs (a per-client rate limit); an error
            answers every call of the request with it.
        admit_unread: optional ``admit_unread(client IP) -> RpcError | None``, called before the
            body is read: an error is answered at once (HTTP 429, id null) and the connection
            closed, so a client already over its limit costs no read, scan or parse on the loop
            that other clients share.
    """

    def __init__(self, dispatcher: Dispatcher, host: str, port: int, max_request_bytes: int = 1 << 20,
                 health: dict[str, Any] | None = None, *, max_connections: int = MAX_CONNECTIONS,
                 read_timeout_s: float = READ_TIMEOUT_S, read_workers: int = READ_WORKERS,
                 write_workers: int = WRITE_WORKERS,
                 admit: Callable[[str, Any], RpcError | None] | None = None,
                 admit_unread: Callable[[str], RpcError | None] | None = None) -> None:
        self.dispatcher, self.host, self.port, self.admit = dispatcher, host, port, admit
        self.admit_unread = admit_unread
        self.max_request_bytes = max_request_bytes
        self.health = dict(health or {})
        self.max_connections, self.read_timeout_s = max_connections, read_timeout_s
        self.read_workers, self.write_workers = read_workers, write_workers
        self.guard: ConnectionGuard | None = None
        self.busy_refusals = 0  # writes answered BUSY
        self._writes_running = 0
        self._reads = ThreadPoolExecutor(read_workers, thread_name_prefix="gateway-read")
        self._writes = ThreadPoolExecutor(write_workers, thread_name_prefix="gateway-write")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._server: asyncio.AbstractServer | None = None
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

    @web.middleware
    async def _deadline(self, request: web.Request, handler) -> web.StreamResponse:
        """The headers are in: stop their deadline; re-arm it for the next request once answered."""
        guard, transport = self.guard, request.transport
        if guard is not None:
            guard.disarm(transport)
        try:
            return await handler(request)
        finally:
            if guard is not None and transport is not None:
                guard.arm(transport)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        if self.admit_unread is not None and (err := self.admit_unread(request.remote or "")) is not None:
            resp = web.json_response(error_response(err), status=429)
            resp.force_close()
            return resp
        if request.content_length is not None and request.content_length > self.max_request_bytes:
            return self._too_large(request.content_length)
        try:
            body = await asyncio.wait_for(request.read(), self.read_timeout_s)
        except web.HTTPRequestEntityTooLarge:
            return self._too_large(None)
        except ConnectionResetError:  # the client went away mid-body: nobody to answer
            return web.Response(status=400)
        except asyncio.TimeoutError:
            if self.guard is not None:
                self.guard.timed_out += 1
            err = RpcError(INVALID_REQUEST, f"request body not received within {self.read_timeout_s:g} s")
            resp = web.json_response(error_response(err), status=408)
            resp.force_close()
            return resp
        doc, refused = self.dispatcher.parse(body)
        if refused is None and self.admit is not None:
            err = self.admit(request.remote or "", doc)
            refused = self.dispatcher.refuse(doc, err) if err is not None else None
            if err is not None and refused is None:
                return web.Response(status=204)
        if refused is not None:
            return web.Response(body=refused, content_type=JSON)
        loop = asyncio.get_running_loop()
        if not self.dispatcher.is_write(doc):
            out = await loop.run_in_executor(self._reads, self.dispatcher.run, doc)
        elif self._writes_running >= self.write_workers:
            self.busy_refusals += 1
            out = self.dispatcher.refuse(doc, RpcError(
                BUSY, f"busy: all {self.write_workers} write workers are waiting for transactions; retry later",
                {"write_workers": self.write_workers}))
        else:
            self._writes_running += 1
            try:
                out = await loop.run_in_executor(self._writes, self.dispatcher.run, doc)
            finally:
                self._writes_running -= 1
        if out is None:
            return web.Response(status=204)
        return web.Response(body=out, content_type=JSON)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, **self.health})

    def app(self) -> web.Application:
        """The aiohttp application (``client_max_size`` = the request limit)."""
        app = web.Application(client_max_size=self.max_request_bytes, middlewares=[self._deadline])
        app.router.add_post("/", self._post)
        app.router.add_get("/health", self._health)
        return app

    # -- lifecycle ----------------------------------------------------------------------

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False,
                                     keepalive_timeout=self.read_timeout_s, lingering_time=0)
        await self._runner.setup()
        self.guard = ConnectionGuard(self._runner.server, self.max_connections, self.read_timeout_s)
        self._server = await asyncio.get_running_loop().create_server(
            self.guard, self.host, self.port, backlog=min(self.max_connections, 1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._stopped = asyncio.Event()

    async def _cleanup(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._runner.cleanup()
        self._reads.shutdown(wait=False, cancel_futures=True)
        self._writes.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, ready: Callable[[str], None] | None) -> None:
        await self._start()
        if ready is not None:
            ready(self.url)
        try:
            await self._stopped.wait()
        finally:
            await self._cleanup()

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
                self._loop.run_until_complete(self._cleanup())
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


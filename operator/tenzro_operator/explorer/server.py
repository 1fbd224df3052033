"""The explorer's HTTP side: routes, error pages and a standard-library threading server.

Routes (GET and HEAD only; every HTML page has a JSON twin under ``/api``):

| HTML | JSON | what |
| --- | --- | --- |
| ``/`` | ``/api/runs`` | runs in posting order (``?offset=&limit=``) |
| ``/runs/<task>`` | ``/api/runs/<task>`` | one run (`views.run_view`) |
| ``/runs/<task>/rounds/<r>`` | ``/api/runs/<task>/rounds/<r>`` | one round and its transcript |

``<task>`` is ``0x`` + 64 hex digits or the spec's task_id name (URL-encoded). Errors are pages
(or ``{"error": ...}`` under ``/api``), never tracebacks: 400 for a malformed id, 404 for an
unknown run, round or path, 503 when the chain's RPC node or the IPFS node does not answer (or
the deployment record is not this chain's), 500 for anything else (logged here with its traceback).
Node URLs are shown redacted (`tenzro_operator.redact`): an API key in ``--rpc`` never reaches a page.

Bounds (issue #24): a request must arrive whole (request line and headers) within
``read_timeout_s`` of its connection, else the connection is closed (HTTP 408): a client that
sends half a request holds one thread for that long at most. At most ``max_connections``
connections at a time: one more makes room by closing the connection that has waited longest for
its request line and headers, so half-sent requests cannot keep a prompt one out; only when every
connection is busy with a page is it answered 503. One request per connection (HTTP/1.0).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tenzro_operator.errors import DeploymentError, IpfsUnavailable, ServiceUnavailable, TenzroError
from tenzro_operator.explorer import html, views

log = logging.getLogger(__name__)

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")  # no script may run on any page
_RUN = re.compile(r"/runs/([^/]+)")
_ROUND = re.compile(r"/runs/([^/]+)/rounds/([^/]+)")
MAX_LIMIT = 200  # runs per page
MAX_CONNECTIONS = 64  # connections served at a time (one thread each)
READ_TIMEOUT_S = 10.0  # seconds for a request line and its headers


class Response:
    """Status, content type and body of one answer."""

    def __init__(self, status: int, body: str, content_type: str) -> None:
        self.status, self.body, self.content_type = status, body.encode("utf-8"), content_type


class Explorer:
    """Turns a GET path into a `Response`.

    Args:
        chain: a `sources.ChainSource`.
        ipfs: an `IpfsClient`.
        specs: a `sources.SpecCache`.
        records: a `sources.SyncerRecords` (held-out loss).
        refresh_s: seconds between reloads of a page whose run is live (0: never).
    """

    def __init__(self, chain, ipfs, specs, records, refresh_s: int = 5) -> None:
        self.chain, self.ipfs, self.specs, self.records, self.refresh_s = chain, ipfs, specs, records, refresh_s

    def handle(self, target: str) -> Response:
        """Answer a request target (path and query)."""
        url = urlsplit(target)
        path, api = url.path.rstrip("/") or "/", url.path.startswith("/api/")
        try:
            return self._route(path[4:] if api else path, parse_qs(url.query), api)
        except views.PageNotFound as exc:
            return self._error(404, str(exc), "`tenzro train list-runs` (or this site's front page) lists the runs", api)
        except views.BadRequest as exc:
            return self._error(400, str(exc), "a task id is 0x + 64 hex digits, or the spec's task_id name", api)
        except IpfsUnavailable as exc:
            return self._error(503, str(exc), "start the IPFS node (`make devnet-up`) or pass --ipfs", api)
        except (ServiceUnavailable, DeploymentError) as exc:
            self.chain.reset()
            return self._error(503, str(exc), "start the devnet (`make devnet-up`), or pass --rpc / --deployments "
                                              "for the chain you mean", api)
        except TenzroError as exc:
            return self._error(502, str(exc), "", api)
        except Exception as exc:  # noqa: BLE001  (a page, never a traceback, in the browser)
            log.exception("explorer: %s failed", target)
            return self._error(500, f"internal error: {type(exc).__name__}", "the explorer's log has the details", api)

    def _route(self, path: str, query: dict[str, list[str]], api: bool) -> Response:
        if path in ("/", "/runs"):
            offset, limit = _int_arg(query, "offset", 0, 0, 2**31), _int_arg(query, "limit", 50, 1, MAX_LIMIT)
            page = views.runs_view(self.chain.client(), self.specs, offset, limit)
            return self._page(api, "runs.html", page, "Runs", f"/api/runs?offset={offset}&limit={limit}", True)
        m = _ROUND.fullmatch(path)
        if m:
            tid, r = views.parse_task_id(unquote(m.group(1))), _round(unquote(m.group(2)))
            page = views.round_view(self.chain.client(), self.ipfs, tid, r)
            return self._page(api, "round.html", page, f"round {r}", f"/api/runs/0x{tid.hex()}/rounds/{r}", False)
        m = _RUN.fullmatch(path)
        if m:
            tid = views.parse_task_id(unquote(m.group(1)))
            page = views.run_view(self.chain.client(), self.specs, self.records, tid)
            return self._page(api, "run.html", page, page["name"] or page["task_id"], f"/api/runs/0x{tid.hex()}",
                              page["live"])
        raise views.PageNotFound(f"no page at {path!r}")

    def _page(self, api: bool, template: str, page: dict[str, Any], title: str, api_path: str,
              live: bool) -> Response:
        if api:
            return Response(200, json.dumps(page, indent=1, sort_keys=True), "application/json")
        body = html.render(template, page, title=title, api=api_path, refresh_s=self.refresh_s if live else 0)
        return Response(200, body, "text/html; charset=utf-8")

    def _error(self, status: int, message: str, hint: str, api: bool) -> Response:
        if api:
            return Response(status, json.dumps({"error": message, "status": status, "hint": hint}), "application/json")
        return Response(status, html.error_page(status, message, hint), "text/html; charset=utf-8")


def _int_arg(query: dict[str, list[str]], name: str, default: int, lo: int, hi: int) -> int:
    raw = query.get(name, [str(default)])[-1]
    try:
        value = int(raw)
    except ValueError:
        raise views.BadRequest(f"?{name}={raw!r} is not a whole number") from None
    if not lo <= value <= hi:
        raise views.BadRequest(f"?{name}={value} is outside {lo}..{hi}")
    return value


def _round(text: str) -> int:
    if not text.isdigit() or len(text) > 10:
        raise views.BadRequest(f"round {text!r} is not a round number")
    return int(text)


class _Handler(BaseHTTPRequestHandler):
    server: "ExplorerServer"
    server_version = "tenzro-explorer"

    def setup(self) -> None:
        """The whole request must be in within the read timeout (a watchdog answers 408 and closes
        the socket of a request still incomplete then); every socket operation, the answer's
        included, waits at most a second more than that."""
        self.timeout = self.server.read_timeout_s + 1.0
        super().setup()
        self._watchdog = threading.Timer(self.server.read_timeout_s, self.drop, (b"408 Request Timeout",))
        self._watchdog.daemon = True
        self.server.waiting(self, True)
        self._watchdog.start()

    def drop(self, status: bytes) -> None:
        """Answer ``status`` with no body and close: the request is not in (too late, or evicted)."""
        if not self.server.waiting(self, False):
            return  # it came in meanwhile, or was dropped already
        self._watchdog.cancel()
        if status.startswith(b"408"):
            self.server.count("timed_out")
        try:
            self.connection.sendall(b"HTTP/1.0 " + status + b"\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def parse_request(self) -> bool:
        ok = super().parse_request()  # reads the headers too
        self.server.waiting(self, False)  # the request line and the headers are in (a GET has no body)
        self._watchdog.cancel()
        return ok

    def finish(self) -> None:
        self.server.waiting(self, False)
        self._watchdog.cancel()
        super().finish()

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def _answer(self, head: bool) -> None:
        res = self.server.app.handle(self.path)
        self.send_response(res.status)
        self.send_header("Content-Type", res.content_type)
        self.send_header("Content-Length", str(len(res.body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(res.body)

    def log_message(self, fmt: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), fmt % args)


class ExplorerServer(ThreadingHTTPServer):
    """A threading HTTP server (one thread per connection, at most ``max_connections``) serving ``app``.

    Counters: ``refused`` (over the limit with nothing to evict), ``evicted`` (closed to make room),
    ``timed_out`` (requests not in within ``read_timeout_s``).

    Args:
        app: the `Explorer`.
        host: address to bind (default loopback only).
        port: TCP port (0: a free one; read ``server_address`` after).
        max_connections: connections served at a time; one more closes the connection that has
            waited longest for its request (503), or is answered 503 itself when all are busy.
        read_timeout_s: seconds for a request line and its headers (and per socket operation).
    Raises:
        TenzroError: the address cannot be bound (in use, or not this host's).
    """

    daemon_threads = True

    def __init__(self, app: Explorer, host: str = "127.0.0.1", port: int = 8080, *,
                 max_connections: int = MAX_CONNECTIONS, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.app = app
        self.max_connections, self.read_timeout_s = max_connections, read_timeout_s
        self.request_queue_size = min(max_connections, 128)
        self.refused = self.evicted = self.timed_out = 0
        self._slots = threading.BoundedSemaphore(max_connections)
        self._waiting: dict[_Handler, None] = {}  # handlers still reading their request, oldest first
        self._waiting_lock = threading.Lock()
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise TenzroError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (pass another --port)") from None

    def waiting(self, handler: "_Handler", on: bool) -> bool:
        """Mark ``handler`` as reading its request (``on``) or not; True if that changed it."""
        with self._waiting_lock:
            if on:
                self._waiting[handler] = None
                return True
            return self._waiting.pop(handler, False) is None

    def count(self, counter: str) -> None:
        """Add one to ``counter`` (``refused``, ``evicted``, ``timed_out``): handler threads count too."""
        with self._waiting_lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def _evict_oldest(self) -> bool:
        with self._waiting_lock:
            oldest = next(iter(self._waiting), None)
        if oldest is None:
            return False
        self.count("evicted")
        oldest.drop(b"503 Service Unavailable")
        return True

    def process_request(self, request, client_address) -> None:
        """Serve on a thread of its own if a slot is free, or once the connection that has waited
        longest for its request is closed; else answer 503 and close at once."""
        if not self._slots.acquire(blocking=False) and not (self._evict_oldest()
                                                           and self._slots.acquire(timeout=2.0)):
            self.count("refused")
            body = json.dumps({"error": f"server busy: {self.max_connections} connections open; retry later",
                               "status": 503}).encode()
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Content-Length: %d\r\nRetry-After: 1\r\n\r\n%s" % (len(body), body))
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def handle_error(self, request, client_address) -> None:
        """A client gone mid-answer (a dropped half request, a closed tab) is no error worth a traceback."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, TimeoutError)):
            log.debug("explorer: %s went away", client_address)
            return
        super().handle_error(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


__all__ = ["CSP", "Explorer", "ExplorerServer", "Response"]

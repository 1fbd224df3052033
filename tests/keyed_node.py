"""A chain node behind a provider-style URL with an API key in its path and query (Infura, Alchemy):
``http://127.0.0.1:<port>/v3/SECRETKEY123?apikey=SECRET2`` forwards JSON-RPC to a real anvil; any
other path is a 404. For the redaction tests of issue #24: the key must never be shown.

Usage::

    with KeyedNode(anvil_url) as node:
        client = ChainClient(node.url, deployments)
        node.stop()   # now the node does not answer (RpcUnavailable)
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

SECRETS = ("SECRETKEY123", "SECRET2")
PATH = "/v3/SECRETKEY123?apikey=SECRET2"


class KeyedNode:
    """Forwards ``POST`` + `PATH` to ``upstream`` (loopback only)."""

    def __init__(self, upstream: str) -> None:
        node = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != PATH:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                r = node._http.post(upstream, content=body, headers={"content-type": "application/json"})
                self.send_response(r.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            def log_message(self, *args) -> None:
                pass

        self._http = httpx.Client(timeout=30)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{PATH}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._stopped = False

    def stop(self) -> None:
        """Stop answering (the port is closed: connection refused)."""
        if not self._stopped:
            self._stopped = True
            self._server.shutdown()
            self._server.server_close()
            self._http.close()

    def __enter__(self) -> "KeyedNode":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def leaks(text: str) -> list[str]:
    """The secrets of `PATH` that ``text`` shows."""
    return [s for s in SECRETS if s in text]

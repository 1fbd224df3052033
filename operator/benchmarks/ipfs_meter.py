"""Bytes to and from the IPFS node, counted on the wire: a TCP relay in front of its RPC API.

Every daemon of a benchmark run is given the relay's URL instead of the node's; the relay
passes each connection through unchanged and counts the bytes each way (HTTP headers and
multipart framing included), so the figure is what the node really served, for every client.

    meter = IpfsMeter("http://127.0.0.1:5001").start()   # meter.url -> give it to the daemons
    up, down = meter.totals()                              # bytes to the node, bytes from it
    meter.stop()
"""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit

__all__ = ["IpfsMeter"]

CHUNK = 1 << 16  # bytes per recv


class IpfsMeter:
    """A counting TCP relay on 127.0.0.1 (a free port) to the IPFS RPC API at ``upstream``.

    Args:
        upstream: the node's API URL, ``http://host:port``.
    """

    def __init__(self, upstream: str) -> None:
        u = urlsplit(upstream)
        if u.scheme != "http" or not u.hostname or not u.port:
            raise ValueError(f"IPFS API URL {upstream!r}: want http://host:port")
        self.upstream = (u.hostname, u.port)
        self._lock = threading.Lock()
        self._up = 0  # bytes client -> node
        self._down = 0  # bytes node -> client
        self._server: socket.socket | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """The relay's API URL (``http://127.0.0.1:<port>``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "IpfsMeter":
        """Listen and relay from a daemon thread; returns self."""
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", 0))
        srv.listen(256)
        self._server, self.port = srv, srv.getsockname()[1]
        threading.Thread(target=self._accept, name="ipfs-meter", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop accepting (open connections end with their clients)."""
        if self._server is not None:
            self._server.close()
            self._server = None

    def totals(self) -> tuple[int, int]:
        """(bytes sent to the node, bytes received from it) since `start`."""
        with self._lock:
            return self._up, self._down

    def _accept(self) -> None:
        while self._server is not None:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                node = socket.create_connection(self.upstream, timeout=10)
                node.settimeout(None)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, node, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(node, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                dst.sendall(data)
                with self._lock:
                    if up:
                        self._up += len(data)
                    else:
                        self._down += len(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):  # one side closed: close both (the other pump then ends too)
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

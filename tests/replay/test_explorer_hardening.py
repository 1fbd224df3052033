"""Issue #24 against the explorer: a provider's API key in ``--rpc`` is never shown (front page,
``/api/runs``, a 404, a 503 once the node is gone, nor the log), and half-sent requests are dropped
after the read timeout instead of holding a thread each for as long as their sender likes.
Every load loop targets 127.0.0.1 and is bounded in count and time."""

from __future__ import annotations

import logging
import socket
import threading

import httpx

from keyed_node import KeyedNode, leaks
from stack import closed_by_server
from tenzro_operator.explorer.server import Explorer, ExplorerServer, Response
from tenzro_operator.explorer.sources import ChainSource, SpecCache, SyncerRecords
from tenzro_operator.ipfs import IpfsClient

ZERO = "0x" + "00" * 32


def _serve(app, **kw) -> ExplorerServer:
    server = ExplorerServer(app, port=0, **kw)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_node_url_secrets_never_reach_an_explorer_page(stack, caplog):
    caplog.set_level(logging.DEBUG)
    ipfs = IpfsClient(stack.ipfs_url, timeout_s=5, retries=0)
    with KeyedNode(stack.rpc_url) as node:
        server = _serve(Explorer(ChainSource(node.url, stack.deployments), ipfs, SpecCache(ipfs), SyncerRecords()))
        try:
            pages = []
            for path, status in (("/", 200), ("/api/runs", 200), (f"/runs/{ZERO}", 404), (f"/api/runs/{ZERO}", 404)):
                r = httpx.get(server.url + path, timeout=60)
                assert r.status_code == status, (path, r.status_code, r.text[:300])
                pages.append((path, r.text))
            assert "127.0.0.1" in pages[0][1]  # the node is still named: scheme, host and port
            node.stop()
            for path in ("/", "/api/runs"):
                r = httpx.get(server.url + path, timeout=60)
                assert r.status_code == 503, (path, r.status_code, r.text[:300])
                pages.append((path + " (node down)", r.text))
            for path, text in pages:
                assert not leaks(text), (path, text[:2000])
            ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("tenzro"))
            assert not leaks(ours)  # nor the log (third-party DEBUG lines are the operator's to quiet)
        finally:
            server.shutdown()
            server.server_close()
            ipfs.close()


class _Fixed:
    """An explorer app that answers every path with 200 "ok"."""

    def handle(self, target: str) -> Response:
        return Response(200, "ok", "text/plain")


def test_half_sent_requests_to_the_explorer_are_dropped():
    server = _serve(_Fixed(), max_connections=8, read_timeout_s=5.0)
    host, port = server.server_address[:2]
    socks = []
    try:
        for i in range(12):  # 12 > 8 allowed: half of a request line, or headers cut short
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(b"GET / HT" if i % 2 else b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
        # a prompt request gets in while they hang: the longest-waiting half request makes room
        r = httpx.get(server.url + "/", timeout=10)
        assert r.status_code == 200 and r.text == "ok" and server.evicted >= 1
        # on cb6ae44 each held a thread as long as its sender liked; now each is answered (503 when
        # evicted, 408 after the read timeout) and closed: 3x the timeout as a margin
        assert all(closed_by_server(s, 15.0) for s in socks)
        assert server.evicted + server.timed_out + server.refused == 12, (server.evicted, server.timed_out)
    finally:
        for s in socks:
            s.close()
        server.shutdown()
        server.server_close()

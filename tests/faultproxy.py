"""A fault-injecting HTTP proxy in front of a real service (anvil's JSON-RPC, the IPFS node's
Kubo RPC): every request is forwarded to the real upstream unless a rule says otherwise, so the
faults are transport faults, and what answers is still the real component.

Rules match a request (its path and, for JSON-RPC, its ``method``) and fire ``times`` times
(None: always):

* ``drop``: forward the request, then close the connection without an answer (the request did
  reach the service, e.g. a transaction was accepted, but the client never hears of it);
* ``status``: answer this HTTP status (e.g. 429) without forwarding;
* ``delay``: wait ``seconds`` before forwarding;
* ``trickle``: forward, then send the answer ``chunk`` bytes at a time, ``seconds`` apart;
* ``rewrite``: forward, then pass the decoded JSON answer through ``fn(request, answer)``;
* ``lag``: answer as a node ``blocks`` blocks behind the real head would (a stale backend behind
  a load balancer): ``eth_blockNumber`` is that much lower, a block above it is ``null`` by
  number and "unknown block" by hash in ``eth_getLogs``, a ranged ``eth_getLogs`` silently stops
  at it (what geth and anvil do with a ``toBlock`` past their head); other methods pass.

``probability`` makes a rule fire on only that share of the matching requests (seeded: the same
test sees the same faults).

Usage::

    with FaultProxy(anvil.url) as proxy:
        proxy.add("drop", method="eth_sendRawTransaction", times=1)
        client = ChainClient(proxy.url, deployments, account)
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import httpx

__all__ = ["FaultProxy", "Rule"]


@dataclass
class Rule:
    action: str  # drop | status | delay | trickle | rewrite | lag
    method: str | None = None  # JSON-RPC method to match (None: any)
    path: str | None = None  # URL path prefix to match (None: any)
    times: int | None = 1  # how often it fires (None: always)
    status: int = 429
    seconds: float = 0.0
    chunk: int = 1
    fn: Callable[[dict, Any], Any] | None = None
    blocks: int = 3  # lag: how far behind the head
    probability: float = 1.0
    fired: int = 0

    def matches(self, path: str, rpc_method: str | None) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.path is not None and not path.startswith(self.path):
            return False
        return self.method is None or self.method == rpc_method


@dataclass
class FaultProxy:
    """The proxy (see the module docstring). ``log`` lists ``(path, rpc method, action)`` of every
    request it saw, ``"forward"`` for the untouched ones."""

    upstream: str
    rules: list[Rule] = field(default_factory=list)
    log: list[tuple[str, str | None, str]] = field(default_factory=list)
    seed: int = 0

    def __post_init__(self) -> None:
        self.upstream = self.upstream.rstrip("/")
        self._lock = threading.Lock()
        self._rng = random.Random(self.seed)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                proxy._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._http = httpx.Client(timeout=httpx.Timeout(120.0, connect=5.0))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "FaultProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, action: str, **kw: Any) -> Rule:
        """Add a rule (`Rule` fields as keywords); returns it (``rule.fired`` counts its firings)."""
        rule = Rule(action, **kw)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def _pick(self, path: str, rpc_method: str | None) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.matches(path, rpc_method):
                    if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                        continue
                    rule.fired += 1
                    return rule
        return None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        rpc_method, request = None, None
        try:
            request = json.loads(body)
            rpc_method = request.get("method") if isinstance(request, dict) else None
        except (ValueError, UnicodeDecodeError):
            pass
        rule = self._pick(h.path, rpc_method)
        self.log.append((h.path, rpc_method, rule.action if rule else "forward"))
        if rule is not None and rule.action == "status":
            payload = json.dumps({"jsonrpc": "2.0", "id": (request or {}).get("id"),
                                  "error": {"code": -32005, "message": "Too Many Requests"}}).encode()
            self._reply(h, rule.status, {"Content-Type": "application/json"}, payload)
            return
        if rule is not None and rule.action == "delay":
            time.sleep(rule.seconds)
        if rule is not None and rule.action == "lag" and isinstance(request, dict):
            answer = self._lagged(request, rule.blocks)
            if answer is not None:
                self._reply(h, 200, {"Content-Type": "application/json"}, json.dumps(answer).encode())
                return
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "content-length", "connection")}
        try:
            resp = self._http.post(self.upstream + h.path, content=body, headers=headers)
        except httpx.HTTPError:
            self._drop(h)
            return
        if rule is not None and rule.action == "drop":
            self._drop(h)
            return
        content = resp.content
        if rule is not None and rule.action == "rewrite" and rule.fn is not None:
            content = json.dumps(rule.fn(request, json.loads(content))).encode()
        out_headers = {"Content-Type": resp.headers.get("content-type", "application/octet-stream")}
        if rule is not None and rule.action == "trickle":
            h.send_response(resp.status_code)
            for k, v in out_headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(content)))
            h.end_headers()
            try:
                for i in range(0, len(content), rule.chunk):
                    h.wfile.write(content[i:i + rule.chunk])
                    h.wfile.flush()
                    time.sleep(rule.seconds)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        self._reply(h, resp.status_code, out_headers, content)

    def _upstream(self, method: str, params: list) -> Any:
        r = self._http.post(self.upstream, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        return r.json().get("result")

    def _lagged(self, request: dict, blocks: int) -> dict | None:
        """The answer of a node ``blocks`` behind the head to ``request``; None: forward it as is."""
        method, params = request.get("method"), list(request.get("params") or [])
        head = int(self._upstream("eth_blockNumber", []), 16) - blocks
        ok = lambda result: {"jsonrpc": "2.0", "id": request.get("id"), "result": result}  # noqa: E731
        if method == "eth_blockNumber":
            return ok(hex(max(0, head)))
        if method == "eth_getBlockByNumber" and params:
            tag = params[0]
            n = head if tag in ("latest", "pending", "safe", "finalized") else int(tag, 16) if tag.startswith("0x") \
                else None
            if n is None:
                return None
            return ok(None if n > head else self._upstream(method, [hex(n), *params[1:]]))
        if method == "eth_getLogs" and params and isinstance(params[0], dict):
            flt = dict(params[0])
            if "blockHash" in flt:
                blk = self._upstream("eth_getBlockByHash", [flt["blockHash"], False])
                if blk is None or int(blk["number"], 16) > head:
                    return {"jsonrpc": "2.0", "id": request.get("id"),
                            "error": {"code": -32000, "message": "unknown block"}}
                return None
            to = flt.get("toBlock", "latest")
            to_n = head if not str(to).startswith("0x") else min(int(to, 16), head)
            frm = flt.get("fromBlock", "latest")
            frm_n = head if not str(frm).startswith("0x") else int(frm, 16)
            if frm_n > to_n:
                return ok([])
            flt["fromBlock"], flt["toBlock"] = hex(frm_n), hex(to_n)
            return ok(self._upstream(method, [flt]))
        return None

    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, headers: dict[str, str], content: bytes) -> None:
        try:
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(content)))
            h.end_headers()
            h.wfile.write(content)
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _drop(h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

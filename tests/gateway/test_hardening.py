"""Issue #24 against the gateway and its HTTP server (also the syncer's submission endpoint): each
test reproduces an attack that worked on cb6ae44 and checks the defence.

- nonce gap: a signed call at a future nonce waited ``receipt_timeout_s`` on a worker, for free;
- write/read separation: hanging writes held every worker, so reads waited behind them;
- redaction: an API key in the node URL came back in the ``-32006`` error's data;
- half-open connections: half-sent requests stayed open for as long as their sender liked;
- nested JSON: 100,000 nested arrays escaped the dispatcher as an HTTP 500 with a traceback.

Every load loop targets 127.0.0.1 and is bounded in count and time."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

import httpx
import pytest

from gw_stack import PARSE_ERROR, Rpc
from keyed_node import KeyedNode, leaks
from stack import closed_by_server
from tenzro_operator.keys import anvil_account

NONCE_GAP, BUSY, UNAVAILABLE = -32007, -32008, -32006
GAP_SENDER = 9  # an anvil account no other gateway test signs with (a queued tx would wait for it)


def _gateway(node_rpc: str, deployments, **cfg):
    from tenzro_operator.config import GatewayConfig
    from tenzro_operator.gateway.app import build_gateway

    return build_gateway(GatewayConfig(node_rpc=node_rpc, deployments=deployments, port=0, **cfg)).start()


# ----------------------------------------------------------------------------- nonce gap


def test_a_future_nonce_is_refused_at_once_and_never_sent(chain, roles):
    sender = roles["base"].with_account(anvil_account(GAP_SENDER))
    nxt = sender.w3.eth.get_transaction_count(sender.address, "pending")
    fn = sender.registry.functions.enrollTrainer(b"\x07" * 32, 1, "did:x")
    tx = fn.build_transaction({"from": sender.address, "gas": 500_000, "chainId": sender.chain_id, "nonce": nxt + 1})
    signed = sender.account.sign_transaction(tx)
    # no simulation (it would refuse this call for another reason) and a short receipt wait: on
    # cb6ae44 the call was broadcast, queued by the node behind the gap, and held a worker 3 s
    server = _gateway(chain.rpc_url, chain.deployments, preflight=False, receipt_timeout_s=3)
    try:
        err = Rpc(server.url).error("enrollTrainer", {"raw_transaction": "0x" + bytes(signed.raw_transaction).hex()})
        assert err["code"] == NONCE_GAP, err
        assert err["data"] == {"nonce": nxt + 1, "next_nonce": nxt, "sender": sender.address}
        assert "nonce gap" in err["message"]
        from web3.exceptions import TransactionNotFound

        with pytest.raises(TransactionNotFound):  # never broadcast: nothing waits in the node's queue
            sender.w3.eth.get_transaction(signed.hash)
        # a nonce already used (not this very transaction) is refused the same way
        tx["nonce"] = nxt - 1 if nxt else 0
        if nxt:
            old = sender.account.sign_transaction(tx)
            err = Rpc(server.url).error("enrollTrainer", {"raw_transaction": "0x" + bytes(old.raw_transaction).hex()})
            assert err["code"] == NONCE_GAP and "already used" in err["message"]
    finally:
        server.stop()


# ----------------------------------------------------------------------------- writes apart from reads


def _blocking_server(release: threading.Event, started: list, **kw):
    """A GatewayServer over a dispatcher with one write that blocks until ``release`` and one read."""
    from tenzro_operator.gateway.jsonrpc import Dispatcher
    from tenzro_operator.gateway.server import GatewayServer

    def write() -> str:
        started.append(time.monotonic())
        release.wait(60)
        return "written"

    def read() -> str:
        return "read"

    dispatcher = Dispatcher({"w": write, "r": read}, writes={"w"})
    return GatewayServer(dispatcher, "127.0.0.1", 0, **kw).start()


def test_hanging_writes_cannot_starve_reads(chain):
    release, started = threading.Event(), []
    server = _blocking_server(release, started, write_workers=2, read_workers=2)
    results: list[dict] = []

    def call_write(i: int) -> None:
        r = httpx.post(server.url, json={"jsonrpc": "2.0", "id": i, "method": "w"}, timeout=90)
        results.append(r.json())

    writers = [threading.Thread(target=call_write, args=(i,), daemon=True) for i in range(8)]  # > 6 default workers
    try:
        for t in writers:
            t.start()
        deadline = time.monotonic() + 30
        while len(started) + sum(1 for r in results if "error" in r) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        # every write has either started (holding a write worker) or been refused: none is queued
        busy = [r for r in results if "error" in r]
        assert len(started) == 2 and len(busy) == 6, (len(started), results)
        assert all(r["error"]["code"] == BUSY and "retry" in r["error"]["message"] for r in busy)
        assert all(isinstance(r["id"], int) for r in busy)  # ids echoed
        # the writes still hang, and a read answers all the same
        r = httpx.post(server.url, json={"jsonrpc": "2.0", "id": "x", "method": "r"}, timeout=30)
        assert r.json()["result"] == "read" and not release.is_set() and len(started) == 2
        assert server.busy_refusals == 6
    finally:
        release.set()
        for t in writers:
            t.join(30)
        server.stop()
    assert sorted(r.get("result") for r in results if "result" in r) == ["written", "written"]


# ----------------------------------------------------------------------------- node URL redaction


def test_node_url_secrets_never_reach_a_gateway_error(chain, caplog):
    caplog.set_level(logging.DEBUG)
    with KeyedNode(chain.rpc_url) as node:
        server = _gateway(node.url, chain.deployments)
        try:
            rpc = Rpc(server.url)
            assert rpc.result("listRuns", {"limit": 1})["total"] >= 0  # the keyed URL works
            node.stop()
            r = rpc.post({"jsonrpc": "2.0", "id": 1, "method": "tenzro_training_listRuns", "params": {}})
            err = r.json()["error"]
            assert err["code"] == UNAVAILABLE, err
            assert not leaks(r.text), r.text
            health = rpc.http.get(server.url + "health").text
            assert not leaks(health)
            ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("tenzro"))
            assert "retry" in ours and not leaks(ours)  # nor the gateway's log (the chain client's retries)
        finally:
            server.stop()


# ----------------------------------------------------------------------------- half-open connections


def _half_sent(port: int, n: int, body: bool) -> list[socket.socket]:
    """``n`` connections each sending half a request: headers cut short, or headers and half a body."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if body:
            s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{\"js")
        else:
            s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Le")
        out.append(s)
    return out


def test_half_sent_requests_are_dropped_and_do_not_lock_out_others():
    from tenzro_operator.gateway.jsonrpc import Dispatcher
    from tenzro_operator.gateway.server import GatewayServer

    server = GatewayServer(Dispatcher({"r": lambda: "read"}), "127.0.0.1", 0, max_connections=16,
                           read_timeout_s=5.0).start()
    socks = _half_sent(server.port, 12, body=False) + _half_sent(server.port, 12, body=True)  # 24 > 16 allowed
    try:
        # a prompt request gets in while they hang: the longest-waiting half request makes room
        r = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "r"}, timeout=10)
        assert r.json()["result"] == "read" and server.guard.evicted >= 1
        # on cb6ae44 all 24 stayed open as long as their sender liked; now each is answered (503 when
        # evicted, 408 once the read timeout has passed) and closed: 3x the timeout as a margin
        assert all(closed_by_server(s, 15.0) for s in socks)
        g = server.guard
        assert g.evicted + g.timed_out + g.refused == 24 and g.refused == 0, (g.evicted, g.timed_out, g.refused)
        assert g.open <= 1
    finally:
        for s in socks:
            s.close()
        server.stop()


# ----------------------------------------------------------------------------- nested JSON


def test_deeply_nested_json_is_a_parse_error_not_a_traceback(bare_gateway):
    """Refused before the parser sees it: with py-evm's raised recursion limit (the test process
    has it) the C parser overflowed the stack on these bodies and killed the process."""
    from tenzro_operator.gateway.jsonrpc import MAX_DEPTH, Dispatcher

    for deep in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000):
        r = Rpc(bare_gateway.url).post(deep)  # 200-600 kB: under the default 1 MiB body limit
        assert r.status_code in (200, 400), (r.status_code, r.text[:300])
        assert "Traceback" not in r.text
        err = r.json()["error"]
        assert err["code"] == PARSE_ERROR and "nested too deeply" in err["message"] and r.json()["id"] is None
        assert err["data"] == {"limit": MAX_DEPTH}
        out = json.loads(Dispatcher({}).handle(deep))  # the dispatcher alone: no exception escapes either
        assert out["error"]["code"] == PARSE_ERROR
    ok = b'[[[[[1]]]]]'  # shallow nesting is only JSON: an invalid request, not a parse error
    assert json.loads(Dispatcher({}).handle(ok))[0]["error"]["code"] == -32600  # a batch of one bad call

"""EventCursor (issue 14, M5) on a real anvil: a lagging backend behind the RPC endpoint (the fault
proxy's ``lag``) can not make it skip events, a reorg (``anvil_reorg``, ``evm_revert``) is seen
and read again, and the position survives a restart in a durable file."""

from __future__ import annotations

import json

import requests

from faultproxy import FaultProxy
from tenzro_operator.chain import ChainClient
from tenzro_operator.chain.event_cursor import EventCursor
from tenzro_operator.keys import anvil_account

SPENDER = anvil_account(9).address  # a marker: only the tests' approvals name it


def rpc(url: str, method: str, *params):
    r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}, timeout=30)
    body = r.json()
    assert "error" not in body, body
    return body["result"]


def approve(c: ChainClient, *amounts: int) -> list[int]:
    """One Approval per amount, one block each; returns the blocks."""
    return [c.approve(a, spender=SPENDER).block_number for a in amounts]


def cursor(client: ChainClient, start: int, **kw) -> EventCursor:
    return EventCursor(client, ["Approval"], contract="TenzroToken", start_block=start, **kw)


def values(events) -> list[int]:
    return [e["args"]["value"] for e in events if e["args"]["spender"] == SPENDER]


def test_a_lagging_backend_cannot_make_the_cursor_skip_events(fresh_stack, tmp_path):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    start = c.block_number() + 1
    approve(c, 1, 2, 3, 4)
    head = c.block_number()
    with FaultProxy(fresh_stack.rpc_url) as proxy:
        lagging = ChainClient(proxy.url, fresh_stack.deployments)
        # the fault: eth_blockNumber answered by an up-to-date node, eth_getLogs by one 3 blocks
        # behind, which stops silently at its own head; a scan to the head (what the daemons did)
        # reads only the first approval and would move its cursor past the other three for good
        rule = proxy.add("lag", method="eth_getLogs", blocks=3, times=None)
        assert values(lagging.get_logs(start, lagging.block_number(), ["Approval"], contract="TenzroToken")) == [1]
        cur = cursor(lagging, start, path=tmp_path / "c.json")
        batch = cur.poll()
        assert values(batch.events) == [1] and batch.stale
        assert cur.next_block <= head - 2  # not past what it could prove it read
        assert values(cur.poll().events) == []  # still lagging: nothing new, nothing skipped
        proxy.clear()
        assert rule.fired > 0
        assert values(cur.poll().events) == [2, 3, 4] and cur.next_block == head + 1
        # a load balancer over a fresh and a stale node: half of all answers come from the stale one
        proxy.add("lag", blocks=2, times=None, probability=0.5)
        approve(c, 5, 6, 7)
        got: list[int] = []
        for _ in range(40):
            got += values(cur.poll().events)
            if got == [5, 6, 7] and cur.next_block == c.block_number() + 1:
                break
        assert got == [5, 6, 7]  # every event once, in order
        assert cur.stale_polls > 0


def test_a_reorg_is_detected_and_the_new_blocks_are_read(fresh_stack, tmp_path):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    start = c.block_number() + 1
    blocks = approve(c, 1, 2)
    cur = cursor(c, start, path=tmp_path / "c.json")
    assert values(cur.poll().events) == [1, 2]
    cur.save()
    # the block holding approval 2 is replaced by an empty one (its transaction dropped)
    rpc(fresh_stack.rpc_url, "anvil_reorg", 1, [])
    c.resync_nonce()
    batch = cur.poll()
    assert batch.reorg_from == blocks[1] and values(batch.events) == [] and cur.reorgs == 1
    approve(c, 3)
    assert values(cur.poll().events) == [3]
    # a reorg while the daemon was down: the saved hashes tell the restarted cursor
    cur.save()
    rpc(fresh_stack.rpc_url, "anvil_reorg", 1, [])
    c.resync_nonce()
    again = cursor(c, start, path=tmp_path / "c.json")
    assert again.next_block == cur.next_block
    batch = again.poll()
    assert batch.reorg_from == cur.next_block - 1 and values(batch.events) == []


def test_a_shorter_chain_after_a_revert_is_read_again(fresh_stack):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    start = c.block_number() + 1
    snap = rpc(fresh_stack.rpc_url, "evm_snapshot")
    approve(c, 1, 2)
    cur = cursor(c, start)
    assert values(cur.poll().events) == [1, 2]
    assert rpc(fresh_stack.rpc_url, "evm_revert", snap) is True
    c.resync_nonce()
    batch = cur.poll()  # the node lacks the blocks read: nothing to read yet, nothing skipped
    assert batch.stale and batch.events == []
    approve(c, 5, 6)  # the new chain grows past where the old one was
    batch = cur.poll()
    assert batch.reorg_from == start and values(batch.events) == [5, 6]


def test_the_cursor_file_is_written_atomically_and_resumes(fresh_stack, tmp_path):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    start = c.block_number() + 1
    approve(c, 1)
    path = tmp_path / "sub" / "c.json"
    cur = cursor(c, start, path=path)
    cur.poll()
    cur.extra["mine"] = [1, 2]
    cur.save()
    doc = json.loads(path.read_text())
    assert doc["next_block"] == c.block_number() + 1 and doc["extra"] == {"mine": [1, 2]}
    assert str(c.block_number()) in doc["hashes"]
    assert [p.name for p in path.parent.iterdir()] == ["c.json"]  # no temp file left behind
    approve(c, 2)
    resumed = cursor(c, start, path=path)
    assert values(resumed.poll().events) == [2] and resumed.extra == {"mine": [1, 2]}
    path.write_text("{not json")  # a damaged file: read again from the start (handlers are idempotent)
    assert values(cursor(c, start, path=path).poll().events) == [1, 2]

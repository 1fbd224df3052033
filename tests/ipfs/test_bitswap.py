"""Blocks move between two real local IPFS nodes (scripts/ipfs/node.mjs, bitswap over the libp2p swarm),
swarm-connected on 127.0.0.1 as `swarm_connect` joins them (issue 25): a CID added on node A is read,
pinned and kept on node B, under the byte cap and the deadline of each request, with Kubo's error shapes
when no peer has it. Before bitswap, B answered every such read `block was not found locally (offline)`."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from ipfs_fixtures import NodeHandle, node_pair
from kubo_oracle import cid_v1, to_text
from stack import free_port
from tenzro_operator.ipfs import IpfsClient, IpfsError, IpfsNotFound, IpfsTooLarge
from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node

UNKNOWN = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"  # valid CID, nobody has it
CHUNK = 262144  # bytes: Kubo's leaf size


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    with node_pair(tmp_path_factory.mktemp("bitswap")) as nodes:
        yield nodes


def local_only(url: str) -> IpfsClient:
    """A client whose requests ask the node at ``url`` for its own blocks only (Kubo's offline=true)."""
    return IpfsClient(url, timeout_s=10, retries=0, offline=True)


def leaf_cid(data: bytes, index: int) -> str:
    return to_text(cid_v1(0x55, data[index * CHUNK:(index + 1) * CHUNK]))


def test_cid_added_on_a_is_read_on_b_verified_stored_not_pinned(pair):
    a, b, ca, cb = pair
    big = os.urandom(3 * 1024 * 1024 + 77)  # dag-pb root over 13 raw leaves
    small = b"one raw block " + os.urandom(100)
    big_cid, small_cid = ca.add(big), ca.add(small)
    with local_only(b.url) as b_local:
        with pytest.raises(IpfsNotFound):
            b_local.cat(small_cid)  # B does not hold it beforehand
        assert cb.cat(small_cid, verify=True) == small
        assert cb.cat(big_cid, verify=True) == big
        # fetched blocks are stored on B (read back without asking A) but not pinned there
        assert b_local.cat(big_cid) == big and b_local.cat(small_cid) == small
    assert big_cid not in cb.pins() and small_cid not in cb.pins()
    assert ca.cat(big_cid) == big  # A's own read is local, as before


def test_cid_no_peer_has_fails_within_its_deadline_in_kubos_shape(pair):
    a, b, ca, cb = pair
    t0 = time.monotonic()
    with pytest.raises(IpfsNotFound, match=UNKNOWN) as err:
        cb.cat(UNKNOWN, timeout_s=2)
    took = time.monotonic() - t0
    assert isinstance(err.value, IpfsError)
    assert 1.5 < took < 5, f"a 2 s deadline ended after {took:.1f} s"
    r = httpx.post(f"{b.url}/api/v0/cat", params={"arg": UNKNOWN, "timeout": "1s"}, timeout=10)
    assert r.status_code == 500
    body = r.json()
    assert body["Type"] == "error" and body["Code"] == 0
    assert "context deadline exceeded" in body["Message"] and UNKNOWN in body["Message"]
    r = httpx.post(f"{b.url}/api/v0/cat", params={"arg": UNKNOWN, "timeout": "soon"}, timeout=10)
    assert r.status_code == 400 and r.json()["Code"] == 1
    with pytest.raises(IpfsNotFound, match=UNKNOWN):
        cb.pin(UNKNOWN, timeout_s=2)


def test_offline_request_asks_no_peer(pair):
    a, b, ca, cb = pair
    cid = ca.add(b"only on A " + os.urandom(64))
    with local_only(b.url) as b_local:
        t0 = time.monotonic()
        with pytest.raises(IpfsNotFound, match=cid):
            b_local.cat(cid)
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(IpfsNotFound, match=cid):
            b_local.cat(cid)  # and nothing was fetched meanwhile


def test_payload_over_the_cap_is_refused_and_not_fetched_whole(pair):
    a, b, ca, cb = pair
    data = os.urandom(12 * CHUNK)
    cid = ca.add(data)
    with pytest.raises(IpfsTooLarge) as err:
        cb.cat(cid, max_bytes=CHUNK)
    assert err.value.limit == CHUNK and err.value.cid == cid
    # B fetched the blocks under the cap (root, first leaves), never the rest of the payload
    with local_only(b.url) as b_local:
        assert b_local.block_size(leaf_cid(data, 0)) == CHUNK
        for i in range(2, 12):
            with pytest.raises(IpfsNotFound):
                b_local.block_size(leaf_cid(data, i))


def test_node_refuses_to_fetch_more_than_its_cap(pair, tmp_path):
    a, b, ca, cb = pair
    data = os.urandom(40 * CHUNK)  # 10 MiB on A
    cid = ca.add(data)
    capped = start_ipfs_node(tmp_path / "capped", free_port(), timeout_s=60, max_fetch_bytes=4 * CHUNK)
    try:
        with IpfsClient(capped.api_url, timeout_s=30, retries=0) as cc:
            cc.swarm_connect(a.proc.swarm_addr)
            with pytest.raises(IpfsError, match="over the cap of 1048576 bytes") as err:
                cc.pin(cid)  # pin/add walks the whole DAG: no client-side cap to stop it
            assert not isinstance(err.value, IpfsNotFound)
            assert cid not in cc.pins()
            with local_only(capped.api_url) as local:  # it stopped after the blocks in flight at the cap
                held = 0
                for i in range(40):
                    try:
                        local.block_size(leaf_cid(data, i))
                        held += 1
                    except IpfsNotFound:
                        pass
            assert held < 40, "the capped node fetched the whole payload"
    finally:
        stop_ipfs_node(capped)


def test_payload_missing_midway_is_not_found_not_an_outage(pair):
    a, b, ca, cb = pair
    data = os.urandom(6 * CHUNK)
    cid = ca.add(data)
    lost = [p for p in (a.repo / "blocks").rglob("*.data") if p.read_bytes() == data[5 * CHUNK:]]
    assert len(lost) == 1
    lost[0].unlink()  # A loses the last leaf: B streams the first ones, then waits in vain
    t0 = time.monotonic()
    with pytest.raises(IpfsNotFound, match=cid):
        cb.cat(cid, timeout_s=3)  # the node cut mid-answer at its deadline: not IpfsUnavailable
    took = time.monotonic() - t0
    assert took < 6, f"a 3 s deadline ended after {took:.1f} s"


def test_peer_serving_wrong_bytes_is_refused(pair):
    a, b, ca, cb = pair
    data = b"weights A will corrupt " + os.urandom(4000)
    cid = ca.add(data)
    tampered = 0
    for path in (a.repo / "blocks").rglob("*.data"):
        if path.read_bytes() == data:
            path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
            tampered += 1
    assert tampered == 1
    with pytest.raises(IpfsNotFound, match=cid):
        cb.cat(cid, timeout_s=2)  # A's block does not hash to the CID: B keeps waiting, then gives up
    with local_only(b.url) as b_local, pytest.raises(IpfsNotFound):
        b_local.cat(cid, verify=False)  # and stored nothing under that CID


def test_b_keeps_serving_what_it_fetched_after_a_stops(tmp_path):
    with node_pair(tmp_path) as (a, b, ca, cb):
        read = os.urandom(600_000)
        pinned = os.urandom(300_000)
        read_cid, pinned_cid = ca.add(read), ca.add(pinned)
        assert cb.cat(read_cid) == read
        cb.pin(pinned_cid)  # pin/add fetches the whole DAG from A
        assert pinned_cid in cb.pins() and read_cid not in cb.pins()
        assert a.stop() == 0
        t0 = time.monotonic()
        assert cb.cat(read_cid) == read and cb.cat(pinned_cid) == pinned
        assert time.monotonic() - t0 < 2.0  # local reads: no peer asked
        assert cb.block_size(leaf_cid(pinned, 1)) == 300_000 - CHUNK


def test_a_block_two_peers_hold_arrives_once(tmp_path):
    """C fetches a file that A and B both hold: each block arrives once (one peer is asked for it after
    a WANT-HAVE round, or the peer that sent the previous block), not once per peer that holds it
    (Helia's broadcast WANT-BLOCK: every holder sent every block)."""
    with node_pair(tmp_path) as (a, b, ca, cb):
        c = NodeHandle(tmp_path / "c", free_port())
        c.start()
        cc = IpfsClient(c.url, timeout_s=30, retries=1, backoff_s=0.1)
        try:
            assert cc.swarm_connect(a.proc.swarm_addr) == a.proc.peer_id
            assert cc.swarm_connect(b.proc.swarm_addr) == b.proc.peer_id
            data = os.urandom(3 * 1024 * 1024 + 77)  # dag-pb root over 13 raw leaves
            cid = ca.add(data)
            assert cb.cat(cid, verify=True) == data  # now A and B hold every block
            before = cc.bitswap_stat()
            assert cc.cat(cid, verify=True) == data
            time.sleep(1.0)  # a second copy in flight would land now
            after = cc.bitswap_stat()
            got = {k: after[k] - before[k] for k in after}
            assert got["BlocksReceived"] - got["DupBlksReceived"] == 14 and got["DataReceived"] >= len(data), got
            # only a block of at most 1 KiB (here the 655-byte root) may come from both: a peer sends such
            # a block in place of HAVE (@helia/bitswap's maxSizeReplaceHasWithBlock)
            assert got["DupBlksReceived"] <= 1 and got["DupDataReceived"] <= 1024, got
        finally:
            cc.close()
            c.stop()

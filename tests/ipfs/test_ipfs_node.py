"""The local IPFS node (scripts/ipfs/node.mjs) through the Python client and raw Kubo RPC calls."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from ipfs_fixtures import NodeHandle
from stack import free_port
from kubo_oracle import cid_v1, kubo_file_cid, to_text
from tenzro_operator.errors import IpfsNodeError
from tenzro_operator.ipfs import IpfsClient, IpfsIntegrityError, IpfsNotFound, IpfsUnavailable
from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node
from test_ipfs_cids import EMPTY_V1, HELLO_IPFS_V1, HELLO_V0, HELLO_V1

UNKNOWN = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"  # valid CID, nobody has it


def raw_add(url: str, data: bytes, **params) -> dict:
    """POST /api/v0/add as Kubo's own client does; returns the last JSON line."""
    resp = httpx.post(f"{url}/api/v0/add", params=params, files={"file": ("f.bin", data)}, timeout=60)
    assert resp.status_code == 200, resp.text
    return json.loads(resp.text.strip().splitlines()[-1])


def test_round_trip_add_cat_pin_unpin(client: IpfsClient):
    data = b"tenzro round trip " + os.urandom(1000)
    cid = client.add(data)
    assert cid.startswith("bafkrei")
    assert client.cat(cid) == data
    assert cid in client.pins()
    assert client.block_size(cid) == len(data)
    assert client.unpin(cid) is True
    assert cid not in client.pins()
    assert client.unpin(cid) is False  # idempotent
    client.pin(cid)
    client.pin(cid)  # already pinned: fine
    assert cid in client.pins()
    unpinned = client.add(b"not pinned " + os.urandom(8), pin=False)
    assert unpinned not in client.pins()
    assert client.cat(unpinned).startswith(b"not pinned")


def test_node_gives_kubo_vectors(node: NodeHandle):
    assert raw_add(node.url, b"hello IPFS\n", **{"cid-version": 1}) == {
        "Name": "f.bin", "Hash": HELLO_IPFS_V1, "Size": "11"}
    assert raw_add(node.url, b"hello\n", **{"cid-version": 1})["Hash"] == HELLO_V1
    assert raw_add(node.url, b"", **{"cid-version": 1})["Hash"] == EMPTY_V1
    assert raw_add(node.url, b"hello\n")["Hash"] == HELLO_V0  # Kubo's default: CIDv0, dag-pb leaves


def test_large_file_dag_pb_root_matches_oracle(node: NodeHandle, client: IpfsClient):
    data = os.urandom(3 * 1024 * 1024 + 4321)
    expected, cumulative, root_block = kubo_file_cid(data)
    entry = raw_add(node.url, data, **{"cid-version": 1, "raw-leaves": "true"})
    assert entry["Hash"] == expected and expected.startswith("bafybei")
    assert entry["Size"] == str(cumulative)
    assert client.add(data) == expected
    assert client.block_size(expected) == len(root_block)
    assert client.cat(expected) == data
    # Two DAG levels (more than 174 leaves), with small chunks to stay fast.
    small = os.urandom(180 * 1024 + 3)
    assert raw_add(node.url, small, **{"cid-version": 1, "chunker": "size-1024"})["Hash"] == \
        kubo_file_cid(small, chunk=1024)[0]


def test_pins_survive_restart(tmp_path: Path):
    handle = NodeHandle(tmp_path / "ipfs", free_port())
    handle.start()
    data = os.urandom(700_000)
    with IpfsClient(handle.url, retries=1) as c:
        cid = c.add(data)
        small = c.add(b"small pinned\n")
        gone = c.add(b"pinned then unpinned\n")
        c.unpin(gone)
    assert handle.stop() == 0  # SIGTERM: stores closed, exit 0
    assert not (handle.repo / "repo.lock").exists()
    handle.start()
    try:
        with IpfsClient(handle.url, retries=1) as c:
            pins = c.pins()
            assert {cid, small} <= pins and gone not in pins
            assert c.cat(cid) == data
            assert c.cat(small) == b"small pinned\n"
    finally:
        handle.stop()


def test_unknown_cid_is_not_found_fast(client: IpfsClient):
    for call in (client.cat, client.pin, client.block_size):
        t0 = time.monotonic()
        with pytest.raises(IpfsNotFound, match=UNKNOWN):
            call(UNKNOWN)
        assert time.monotonic() - t0 < 2.0


def test_node_down_is_unavailable_with_hint():
    url = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with IpfsClient(url, timeout_s=2, retries=2, backoff_s=0.05) as c, pytest.raises(IpfsUnavailable) as err:
        c.add(b"x")
    assert time.monotonic() - t0 < 5.0
    message = str(err.value)
    assert url in message and "make devnet-up" in message and "Traceback" not in message


def test_tampered_block_is_detected(node: NodeHandle, client: IpfsClient):
    data = b"precious weights " + os.urandom(5000)
    cid = client.add(data)
    big = os.urandom(2 * 262144 + 10)
    big_cid = client.add(big)
    leaf = big[262144:2 * 262144]
    tampered = 0
    for path in (node.repo / "blocks").rglob("*.data"):
        content = path.read_bytes()
        if content in (data, leaf):
            path.write_bytes(content[:-1] + bytes([content[-1] ^ 0xFF]))
            tampered += 1
    assert tampered == 2
    with pytest.raises(IpfsIntegrityError, match=cid):
        client.cat(cid)
    with pytest.raises(IpfsIntegrityError, match=big_cid):
        client.cat(big_cid)
    assert client.cat(cid, verify=False) != data


def test_kubo_error_shapes(node: NodeHandle):
    r = httpx.post(f"{node.url}/api/v0/cat", params={"arg": UNKNOWN})
    assert r.status_code == 500
    body = r.json()
    assert body["Type"] == "error" and body["Code"] == 0 and "not found" in body["Message"]
    r = httpx.post(f"{node.url}/api/v0/cat", params={"arg": "not-a-cid"})
    assert r.status_code == 500 and r.json()["Type"] == "error"
    r = httpx.post(f"{node.url}/api/v0/cat")
    assert r.status_code == 400 and r.json()["Code"] == 1
    r = httpx.post(f"{node.url}/api/v0/dht/findprovs", params={"arg": HELLO_V1})  # not served: offline node
    assert r.status_code == 404 and r.json()["Type"] == "error"
    assert httpx.get(f"{node.url}/api/v0/version").status_code == 405
    version = httpx.post(f"{node.url}/api/v0/version").json()
    assert {"Version", "Commit", "Repo", "System", "Golang"} <= set(version)
    assert "helia" in json.dumps(version).lower()
    ident = httpx.post(f"{node.url}/api/v0/id").json()
    assert ident["ID"].startswith("12D3KooW")
    assert node.proc.peer_id == ident["ID"]
    # the libp2p swarm (bitswap, pubsub) listens on loopback; its address names this peer
    assert ident["Addresses"] == [node.proc.swarm_addr]
    assert node.proc.swarm_addr.startswith("/ip4/127.0.0.1/tcp/") and node.proc.swarm_addr.endswith(f"/p2p/{ident['ID']}")


def test_pin_ls_and_block_stat_shapes(node: NodeHandle, client: IpfsClient):
    data = os.urandom(300_000)  # two leaves under a dag-pb root
    root = client.add(data)
    keys = httpx.post(f"{node.url}/api/v0/pin/ls").json()["Keys"]
    assert keys[root] == {"Type": "recursive"}
    leaf = to_text(cid_v1(0x55, data[:262144]))
    assert keys[leaf] == {"Type": "indirect"}
    r = httpx.post(f"{node.url}/api/v0/pin/ls", params={"arg": leaf}).json()
    assert r["Keys"][leaf]["Type"] == f"indirect through {root}"
    r = httpx.post(f"{node.url}/api/v0/block/stat", params={"arg": leaf}).json()
    assert r["Key"] == leaf and r["Size"] in (262144, 300_000 - 262144)


def test_port_taken_and_repo_locked_fail_clearly(node: NodeHandle, tmp_path: Path):
    with pytest.raises(IpfsNodeError, match="already in use"):
        start_ipfs_node(tmp_path / "other", node.port, timeout_s=30)
    with pytest.raises(IpfsNodeError, match="in use by another IPFS node"):
        start_ipfs_node(node.repo, free_port(), timeout_s=30)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a dir")
    with pytest.raises(IpfsNodeError, match="not usable|not a directory"):
        proc = start_ipfs_node(blocker, free_port(), timeout_s=30)
        stop_ipfs_node(proc)

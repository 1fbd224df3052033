"""IPFS reads against a hostile or slow source (issue 14, H2): a byte cap and a total deadline on
every `cat`, and CIDs the client can not verify refused before anything is fetched. Real local
node; the slow source is `faultproxy.FaultProxy` trickling the real node's answer."""

from __future__ import annotations

import os
import time
import tracemalloc

import pytest

from faultproxy import FaultProxy
from tenzro_operator.ipfs import (
    IpfsBadCid,
    IpfsClient,
    IpfsContentError,
    IpfsNotFound,
    IpfsTooLarge,
    IpfsUnsupported,
    kubo_cid,
)

# a raw-leaf CIDv1 whose multihash is blake2b-256 (0xb220): valid CID, unverifiable here
BLAKE2B_CID = "bafk2bzacedbjgjpo4ldtiscvtnzpgxrcxpa4vb5sq7vw54q45a7dwgbgwt2uc"


def test_oversize_content_is_cut_at_the_cap_without_holding_it(client: IpfsClient):
    data = os.urandom(3 * 1024 * 1024)
    cid = client.add(data)
    tracemalloc.start()
    try:
        with pytest.raises(IpfsTooLarge) as err:
            client.cat(cid, max_bytes=256 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.limit == 256 * 1024 and err.value.cid == cid
    assert isinstance(err.value, IpfsContentError)
    assert peak < 1024 * 1024, f"peak {peak} bytes held for a 256 KiB cap"
    assert client.cat(cid, max_bytes=len(data)) == data  # exactly at the cap is fine


def test_trickling_source_is_cut_at_the_total_deadline(node, client: IpfsClient):
    data = os.urandom(64 * 1024)
    cid = client.add(data)
    with FaultProxy(node.url) as proxy:
        proxy.add("trickle", path="/api/v0/cat", chunk=256, seconds=0.05, times=None)  # ~13 s for all of it
        slow = IpfsClient(proxy.url, timeout_s=30, retries=1, backoff_s=0.05)
        t0 = time.monotonic()
        with pytest.raises(IpfsNotFound, match="not the whole content|within 1 s"):
            slow.cat(cid, timeout_s=1.0)
        took = time.monotonic() - t0
        slow.close()
    assert took < 2.5, f"a 1 s deadline took {took:.1f} s"


@pytest.mark.parametrize("cid, err", [("not-a-cid", IpfsBadCid), ("", IpfsBadCid),
                                      (BLAKE2B_CID, IpfsUnsupported)])
def test_unreadable_cids_are_content_errors_before_any_fetch(client: IpfsClient, cid, err):
    with pytest.raises(err) as info:
        client.cat(cid)
    assert isinstance(info.value, IpfsContentError)


def test_unknown_dag_pb_cid_is_not_found_quickly(client: IpfsClient):
    # a dag-pb CID whose bytes the node does not have: not found, quickly, never a crash
    cid = kubo_cid(os.urandom(600_000))
    with pytest.raises(IpfsNotFound):
        client.cat(cid, timeout_s=2)

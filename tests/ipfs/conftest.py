"""Fixtures: a real local IPFS node (scripts/ipfs/node.mjs) on a free port with a temporary repo."""

from __future__ import annotations

import pytest

from tenzro_operator.ipfs import IpfsClient
from ipfs_fixtures import NodeHandle
from stack import free_port


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    """One node per test module (starting Node + Helia costs about a second); tests use fresh random content."""
    handle = NodeHandle(tmp_path_factory.mktemp("ipfs-node") / "ipfs", free_port())
    handle.start()
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def client(node: NodeHandle):
    with IpfsClient(node.url, timeout_s=30, retries=2, backoff_s=0.1) as c:
        yield c

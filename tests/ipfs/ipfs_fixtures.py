"""Helpers for the IPFS tests: free ports and a restartable node handle."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from stack import free_port
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.ipfs_node import start_ipfs_node, stop_ipfs_node


class NodeHandle:
    """A node started by the tests: restartable on the same repo and port."""

    def __init__(self, repo: Path, port: int) -> None:
        self.repo, self.port = repo, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = None

    def start(self) -> None:
        self.proc = start_ipfs_node(self.repo, self.port, timeout_s=60)

    def stop(self) -> int:
        code = stop_ipfs_node(self.proc) if self.proc is not None else 0
        self.proc = None
        return code


@contextlib.contextmanager
def node_pair(root) -> Iterator[tuple[NodeHandle, NodeHandle, IpfsClient, IpfsClient]]:
    """Nodes A and B under ``root``, B connected to A through A's advertised swarm address, with a
    client of each; both stopped and closed on exit."""
    a, b = NodeHandle(root / "a", free_port()), NodeHandle(root / "b", free_port())
    a.start()
    b.start()
    ca = IpfsClient(a.url, timeout_s=30, retries=1, backoff_s=0.1)
    cb = IpfsClient(b.url, timeout_s=30, retries=1, backoff_s=0.1)
    try:
        assert cb.swarm_connect(a.proc.swarm_addr) == a.proc.peer_id
        yield a, b, ca, cb
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()

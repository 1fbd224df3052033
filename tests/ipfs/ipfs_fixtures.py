"""Helpers for the IPFS tests: free ports and a restartable node handle."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Iterator

from stack import free_port
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node


def wait_for(cond, timeout_s: float) -> bool:
    """Poll ``cond()`` every 0.1 s until it is truthy or ``timeout_s`` seconds have passed; its last value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


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

"""Helpers for the IPFS tests: free ports and a restartable node handle."""

from __future__ import annotations

from pathlib import Path

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

"""`tenzro explorer` as a separate process on a free port, for the explorer's tests."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import httpx

from stack import REPO, free_port


@contextmanager
def explorer_process(stack, *extra: str) -> Iterator[str]:
    """Start `tenzro explorer` against the stack's chain and IPFS node with ``extra`` options, wait
    until it answers (60 s at most) and yield its base URL; terminate it on exit."""
    port = free_port()
    argv = [sys.executable, "-m", "tenzro_operator.cli", "explorer", "--port", str(port), "--rpc", stack.rpc_url,
            "--deployments", str(stack.deployments), "--ipfs", stack.ipfs_url, *extra]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                httpx.get(url + "/favicon.ico", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, "the explorer did not start"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)  # a loaded machine can take more than 10 s to unwind the server's threads
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

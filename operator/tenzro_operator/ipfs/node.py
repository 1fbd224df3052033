"""Start and stop the local IPFS node (scripts/ipfs/node.mjs, Helia on Node 22) from Python.

The devnet launcher and the tests use these; the node itself is documented in
scripts/ipfs/node.mjs.

Besides the RPC API the node listens for libp2p (TCP, noise, yamux, bitswap, gossipsub) on
127.0.0.1 and a free port unless ``swarm_port`` says otherwise; it dials nobody by
itself. Two nodes exchange blocks (bitswap: a `cat` or `pin` on one fetches what the
other holds) and pubsub messages once one is told of the other::

    a, b = start_ipfs_node(dir_a, port_a), start_ipfs_node(dir_b, port_b)
    IpfsClient(b.api_url).swarm_connect(a.swarm_addr)   # '/ip4/127.0.0.1/tcp/<port>/p2p/<id>'

Pubsub topics of tenzro-train (`tenzro_operator.ipfs.submission_topic` / `syncer_topic`):
``tenzro/training/1.0.0/<task id hex>`` for trainer submissions and
``tenzro/training/syncer/1.0.0/<task id hex>`` for syncer announcements.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

from tenzro_operator.errors import IpfsNodeError

REPO_ROOT = Path(__file__).resolve().parents[3]
NODE_BINARY = REPO_ROOT / "node_modules" / "node" / "bin" / "node"
NODE_SCRIPT = REPO_ROOT / "scripts" / "ipfs" / "node.mjs"
READY_PREFIX = "ipfs node ready "


def node_command(repo: Path, port: int, host: str = "127.0.0.1", swarm_port: int = 0,
                 max_fetch_bytes: int | None = None) -> list[str]:
    """The node's command line (Node 22 + scripts/ipfs/node.mjs); raises IpfsNodeError when Node 22
    is not installed."""
    if not NODE_BINARY.exists():
        raise IpfsNodeError(f"Node 22 is not installed at {NODE_BINARY}; run `make bootstrap` first")
    argv = [str(NODE_BINARY), str(NODE_SCRIPT), "--repo", str(repo), "--api", f"{host}:{port}",
            "--swarm", f"{host}:{int(swarm_port)}"]
    return argv + (["--max-fetch-bytes", str(int(max_fetch_bytes))] if max_fetch_bytes is not None else [])


def start_ipfs_node(repo: Path, port: int, *, timeout_s: float = 30.0, log_path: Path | None = None,
                    host: str = "127.0.0.1", swarm_port: int = 0,
                    max_fetch_bytes: int | None = None) -> subprocess.Popen:
    """Start the node on `host:port` with its data in `repo`; return once it answers.

    Args:
        repo: the node's data dir (created if missing).
        port: TCP port of the RPC API.
        timeout_s: seconds to wait for the `ipfs node ready` line.
        log_path: file for the node's stderr (default `<repo>.log` beside the repo dir).
        host: address of the RPC API and of the libp2p swarm.
        swarm_port: TCP port of the libp2p swarm (0: a free port picked by the node).
        max_fetch_bytes: most bytes one API request may fetch from peers (bitswap); None: the
            node's default, 1 GiB + 16 MiB.

    Returns the running process; its `api_url`, `peer_id` and `swarm_addr` (the multiaddr
    another node's `swarm_connect` takes, `/ip4/<host>/tcp/<port>/p2p/<peer id>`)
    attributes are set from the ready line. Stop it with stop_ipfs_node().
    Raises IpfsNodeError (with the node's own message) if the binary is
    missing, the node exits (port taken, repo unusable) or is not ready in time.
    """
    argv = node_command(Path(repo), port, host, swarm_port, max_fetch_bytes)
    repo = Path(repo)
    repo.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(log_path) if log_path else repo.with_name(repo.name + ".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, text=True)
    log.close()
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True, name=f"ipfs-node-{port}-stdout").start()
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stop_ipfs_node(proc)
            raise IpfsNodeError(f"the IPFS node on {host}:{port} was not ready within {timeout_s:g} s; "
                                f"see {log_path}: {_tail(log_path)}")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            code = proc.wait()
            raise IpfsNodeError(f"the IPFS node exited with code {code} before it was ready: {_tail(log_path)}")
        if line.startswith(READY_PREFIX):
            fields = dict(f.split("=", 1) for f in line[len(READY_PREFIX):].split() if "=" in f)
            proc.api_url = fields.get("api", f"http://{host}:{port}")  # type: ignore[attr-defined]
            proc.peer_id = fields.get("peer", "")  # type: ignore[attr-defined]
            proc.swarm_addr = fields.get("swarm", "")  # type: ignore[attr-defined]
            return proc


def stop_ipfs_node(proc: subprocess.Popen, timeout_s: float = 15.0) -> int:
    """SIGTERM the node, wait up to `timeout_s` for it to close its stores, SIGKILL if it hangs.

    Returns the exit code (0 after a clean shutdown). Raises nothing for a node already gone.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode


def _tail(path: Path, n: int = 800) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-n:] or "(empty log)"

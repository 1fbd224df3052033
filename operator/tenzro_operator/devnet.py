"""The local devnet: anvil (chain state persisted) and the Helia IPFS node.

`up` starts both (or reuses the ones already running), waits until each
answers and records their pids in `<data_dir>/pids.json`; `down` stops them
with SIGTERM (anvil then dumps its state to `<data_dir>/anvil/state.json`);
`status` reports what answers. The same functions serve `make devnet-up`,
the demo and the end-to-end tests (which pass their own data dir and free
ports).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from tenzro_operator.errors import DevnetError, IpfsNodeError
from tenzro_operator.ipfs_node import node_command

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = REPO_ROOT / ".devnet"
DEFAULT_RPC_PORT = 8545
DEFAULT_IPFS_PORT = 5001
ANVIL_CHAIN_ID = 31337
STARTUP_TIMEOUT_S = 60.0


@dataclass
class DevnetConfig:
    """Where the devnet keeps its data and which loopback ports it serves on."""

    data_dir: Path = DEFAULT_DATA_DIR
    rpc_port: int = DEFAULT_RPC_PORT
    ipfs_port: int = DEFAULT_IPFS_PORT
    chain_id: int = ANVIL_CHAIN_ID

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.rpc_port}"

    @property
    def ipfs_url(self) -> str:
        return f"http://127.0.0.1:{self.ipfs_port}"


@dataclass
class ServiceStatus:
    """One service's state as `status` reports it."""

    name: str
    url: str
    pid: int | None
    up: bool
    detail: dict = field(default_factory=dict)


def _bin(*candidates: Path | str) -> str:
    for c in candidates:
        p = Path(c)
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        found = shutil.which(str(c))
        if found:
            return found
    raise DevnetError(f"none of {', '.join(map(str, candidates))} found; run `make bootstrap` first")


def anvil_binary() -> str:
    """Path of the anvil executable installed from npm (node_modules/.bin/anvil)."""
    return _bin(REPO_ROOT / "node_modules/.bin/anvil", "anvil")


def rpc_call(url: str, method: str, params: list | None = None, timeout_s: float = 2.0):
    """One JSON-RPC call; raises httpx errors or `DevnetError` on a JSON-RPC error."""
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}, timeout=timeout_s)
    r.raise_for_status()
    body = r.json()
    if "error" in body:
        raise DevnetError(f"{method} at {url} failed: {body['error']}")
    return body["result"]


def rpc_answers(url: str) -> int | None:
    """Chain id at `url`, or None when nothing answers there."""
    try:
        return int(rpc_call(url, "eth_chainId"), 16)
    except (httpx.HTTPError, ValueError, DevnetError):
        return None


def ipfs_answers(url: str) -> dict | None:
    """`/api/v0/version` of the IPFS node at `url`, or None when nothing answers."""
    try:
        r = httpx.post(f"{url}/api/v0/version", timeout=2.0)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _wait(check, what: str, proc: subprocess.Popen, log: Path, timeout_s: float = STARTUP_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result is not None:
            return result
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise DevnetError(f"{what} exited with code {proc.returncode} during start-up; log {log}:\n{tail}")
        time.sleep(0.2)
    proc.terminate()
    raise DevnetError(f"{what} did not answer within {timeout_s:.0f} s; log {log}")


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        # A new session: the service outlives the shell that started it (`make devnet-up`).
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=REPO_ROOT, start_new_session=True)


def start_anvil(cfg: DevnetConfig) -> subprocess.Popen:
    """Start anvil on `cfg.rpc_port`, state persisted in `<data_dir>/anvil/state.json`.

    Raises `DevnetError` if the port is taken by something that is not our chain
    or anvil fails to answer within `STARTUP_TIMEOUT_S` seconds.
    """
    state = cfg.data_dir / "anvil" / "state.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    argv = [anvil_binary(), "--host", "127.0.0.1", "--port", str(cfg.rpc_port), "--chain-id", str(cfg.chain_id),
            "--state", str(state), "--state-interval", "5", "--silent"]
    log = cfg.data_dir / "logs" / "anvil.log"
    proc = _spawn(argv, log)
    _wait(lambda: rpc_answers(cfg.rpc_url), f"anvil on {cfg.rpc_url}", proc, log)
    return proc


def start_ipfs(cfg: DevnetConfig) -> subprocess.Popen:
    """Start the Helia IPFS node (scripts/ipfs/node.mjs) on `cfg.ipfs_port` with its repo in
    `<data_dir>/ipfs`, detached (it outlives `make devnet-up`; `ipfs_node.start_ipfs_node` is the
    attached variant the tests use)."""
    try:
        argv = node_command(cfg.data_dir / "ipfs", cfg.ipfs_port)
    except IpfsNodeError as exc:
        raise DevnetError(str(exc)) from None
    log = cfg.data_dir / "logs" / "ipfs.log"
    proc = _spawn(argv, log)
    _wait(lambda: ipfs_answers(cfg.ipfs_url), f"IPFS node on {cfg.ipfs_url}", proc, log)
    return proc


def _pids_file(cfg: DevnetConfig) -> Path:
    return cfg.data_dir / "pids.json"


def _read_pids(cfg: DevnetConfig) -> dict:
    try:
        return json.loads(_pids_file(cfg).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); its /proc state says Z.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return True


def up(cfg: DevnetConfig | None = None) -> dict:
    """Start anvil and the IPFS node unless they already answer; record pids. Idempotent.

    Returns `{"anvil": pid, "ipfs": pid, "rpc_url": ..., "ipfs_url": ...}`.
    Raises `DevnetError` when a port is held by something else or a service fails to start.
    """
    cfg = cfg or DevnetConfig()
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    pids = _read_pids(cfg)
    chain = rpc_answers(cfg.rpc_url)
    if chain is None:
        pids["anvil"] = start_anvil(cfg).pid
    elif chain != cfg.chain_id:
        raise DevnetError(f"{cfg.rpc_url} answers with chain id {chain}, not the devnet's {cfg.chain_id}")
    if ipfs_answers(cfg.ipfs_url) is None:
        pids["ipfs"] = start_ipfs(cfg).pid
    pids.update(rpc_url=cfg.rpc_url, ipfs_url=cfg.ipfs_url, chain_id=cfg.chain_id)
    _pids_file(cfg).write_text(json.dumps(pids, indent=2) + "\n")
    return pids


def _stop_pid(pid: int, timeout_s: float = 15.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def down(cfg: DevnetConfig | None = None) -> list[str]:
    """Stop the services recorded in pids.json with SIGTERM (SIGKILL after 15 s); returns what was stopped."""
    cfg = cfg or DevnetConfig()
    pids = _read_pids(cfg)
    stopped = []
    for name in ("ipfs", "anvil"):
        pid = pids.get(name)
        if _alive(pid):
            _stop_pid(pid)
            stopped.append(name)
    _pids_file(cfg).unlink(missing_ok=True)
    return stopped


def status(cfg: DevnetConfig | None = None) -> list[ServiceStatus]:
    """What answers now: chain id and block number of the chain, version of the IPFS node."""
    cfg = cfg or DevnetConfig()
    pids = _read_pids(cfg)
    out = []
    chain = rpc_answers(cfg.rpc_url)
    detail = {}
    if chain is not None:
        detail = {"chain_id": chain, "block": int(rpc_call(cfg.rpc_url, "eth_blockNumber"), 16)}
    out.append(ServiceStatus("anvil", cfg.rpc_url, pids.get("anvil"), chain is not None, detail))
    ver = ipfs_answers(cfg.ipfs_url)
    out.append(ServiceStatus("ipfs", cfg.ipfs_url, pids.get("ipfs"), ver is not None,
                             {"version": ver.get("Version")} if ver else {}))
    return out


def status_json(cfg: DevnetConfig | None = None) -> str:
    return json.dumps([asdict(s) for s in status(cfg)], indent=2)

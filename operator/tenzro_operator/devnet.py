"""The local devnet: anvil (chain state persisted) and the Helia IPFS node.

`up` starts both (or reuses the ones already running), waits until each
answers and records their pids in `<data_dir>/pids.json`; `down` writes the
chain's state to `<data_dir>/anvil/state.json` (`anvil_dumpState`) and stops
both with SIGTERM (anvil dumps the same state again on its way out);
`status` reports what answers. The same functions serve `make devnet-up`,
the demo and the end-to-end tests (which pass their own data dir and free
ports). `fund_eth` gives accounts beyond anvil's ten funded ones ETH for gas.

Ownership: every anvil has chain id 31337 and deploys to the same addresses,
so "something answers on the port" does not make it ours. A service counts as
this data dir's only when pids.json records it, that pid is alive, and, for
the chain, block 0 has the hash recorded when we started it (a fresh anvil's
genesis differs; one restarted from our `--state` keeps it). Anything else on
the port is refused with one line naming the port setting to change
(`make devnet-up RPC_PORT=... IPFS_PORT=...`).
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx
from eth_account.signers.local import LocalAccount

from tenzro_operator.errors import DevnetError, IpfsNodeError
from tenzro_operator.ipfs.node import node_command

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
    """Path of the anvil executable installed from npm: the platform package's binary
    (`node_modules/@foundry-rs/anvil-<os>-<arch>/bin/anvil`), not `node_modules/.bin/anvil`, a node
    wrapper that spawns it: the wrapper's pid is not anvil's, so a signal to it can end the wrapper
    while anvil lives on or is still writing its state. The wrapper, then a PATH `anvil`, if absent."""
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    native = REPO_ROOT / f"node_modules/@foundry-rs/anvil-{sys.platform}-{arch}/bin/anvil"
    return _bin(native, REPO_ROOT / "node_modules/.bin/anvil", "anvil")


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


def eth_balance(url: str, address: str) -> int:
    """ETH balance of ``address`` at the chain at ``url``, wei."""
    return int(rpc_call(url, "eth_getBalance", [address, "latest"]), 16)


def fund_eth(url: str, addresses: list[str], amount_wei: int, funder: LocalAccount | None = None,
             timeout_s: float = 30.0) -> list[str]:
    """Give every address holding less than ``amount_wei`` (wei) exactly that much ETH.

    On anvil with ``anvil_setBalance``; on a chain without it, by a plain transfer of the
    difference from ``funder`` (e.g. the deployer), each transfer awaited (``timeout_s`` seconds).

    Returns:
        The addresses that were topped up.
    Raises:
        DevnetError: the chain has no ``anvil_setBalance`` and no funder was given, or a transfer
            was not mined within ``timeout_s`` or failed.
    """
    funded = []
    for addr in addresses:
        have = eth_balance(url, addr)
        if have >= amount_wei:
            continue
        try:
            rpc_call(url, "anvil_setBalance", [addr, hex(amount_wei)])
        except DevnetError:
            if funder is None:
                raise DevnetError(f"{addr} holds {have} wei, less than the {amount_wei} wei it needs, and {url} "
                                  "has no anvil_setBalance: fund it from an account with ETH") from None
            _transfer(url, funder, addr, amount_wei - have, timeout_s)
        funded.append(addr)
    return funded


def _transfer(url: str, funder: LocalAccount, to: str, value: int, timeout_s: float) -> None:
    """A plain ETH transfer of ``value`` wei from ``funder`` to ``to``, awaited."""
    tx = {"to": to, "value": value, "gas": 21_000, "gasPrice": int(rpc_call(url, "eth_gasPrice"), 16),
          "nonce": int(rpc_call(url, "eth_getTransactionCount", [funder.address, "pending"]), 16),
          "chainId": int(rpc_call(url, "eth_chainId"), 16)}
    raw = funder.sign_transaction(tx).raw_transaction
    tx_hash = rpc_call(url, "eth_sendRawTransaction", ["0x" + bytes(raw).hex()])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rcpt = rpc_call(url, "eth_getTransactionReceipt", [tx_hash])
        if rcpt is not None:
            if int(rcpt["status"], 16) != 1:
                raise DevnetError(f"funding {to} with {value} wei failed (tx {tx_hash})")
            return
        time.sleep(0.2)
    raise DevnetError(f"funding {to} with {value} wei: tx {tx_hash} not mined within {timeout_s:.0f} s")


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


def anvil_state_path(cfg: DevnetConfig) -> Path:
    """`<data_dir>/anvil/state.json`: the chain state anvil loads on start (`--state`)."""
    return cfg.data_dir / "anvil" / "state.json"


def save_anvil_state(cfg: DevnetConfig, timeout_s: float = 30.0) -> bool:
    """Write the running chain's state to `anvil_state_path(cfg)`, whole or not at all.

    `anvil_dumpState` answers with the gzip-compressed JSON that `--state` loads (checked with
    anvil 1.7); it is written to a temporary file and renamed over the old state. SIGTERM alone
    once left no state file under CI load. Returns False (the old file untouched) when the chain
    does not answer or the dump fails.
    """
    try:
        blob = bytes.fromhex(rpc_call(cfg.rpc_url, "anvil_dumpState", timeout_s=timeout_s).removeprefix("0x"))
        data = gzip.decompress(blob)
    except (httpx.HTTPError, DevnetError, ValueError, OSError, AttributeError):
        return False
    state = anvil_state_path(cfg)
    tmp = state.with_suffix(".json.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, state)
    return True


def start_anvil(cfg: DevnetConfig) -> subprocess.Popen:
    """Start anvil on `cfg.rpc_port`, state persisted in `<data_dir>/anvil/state.json`.

    Raises `DevnetError` if the port is taken by something that is not our chain
    or anvil fails to answer within `STARTUP_TIMEOUT_S` seconds.
    """
    state = anvil_state_path(cfg)
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


def recorded_config(data_dir: Path, rpc_port: int | None = None, ipfs_port: int | None = None) -> DevnetConfig:
    """The devnet of ``data_dir`` on the ports given, else on the ports its ``pids.json`` records
    (the ports it was last started on), else the defaults: ``status`` / ``down`` without ports find a
    devnet started with ``RPC_PORT=8546``."""
    pids = _read_pids(DevnetConfig(data_dir=data_dir))

    def port(given: int | None, url_key: str, default: int) -> int:
        if given is not None:
            return given
        try:
            return urlparse(str(pids.get(url_key))).port or default
        except ValueError:
            return default

    return DevnetConfig(data_dir=data_dir, rpc_port=port(rpc_port, "rpc_url", DEFAULT_RPC_PORT),
                        ipfs_port=port(ipfs_port, "ipfs_url", DEFAULT_IPFS_PORT))


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs (not a zombie); False for None or 0."""
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


def genesis_hash(url: str) -> str | None:
    """0x-hex hash of block 0 of the chain at `url` (None when nothing answers)."""
    try:
        return rpc_call(url, "eth_getBlockByNumber", ["0x0", False])["hash"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError, DevnetError):
        return None


def chain_is_ours(cfg: DevnetConfig, pids: dict | None = None) -> bool:
    """True iff the chain at `cfg.rpc_url` is the anvil this data dir started: its pid (pids.json)
    is alive, it was started for this URL, and block 0 has the hash recorded then."""
    pids = _read_pids(cfg) if pids is None else pids
    return (pid_alive(pids.get("anvil")) and pids.get("rpc_url") == cfg.rpc_url
            and pids.get("genesis_hash") is not None and genesis_hash(cfg.rpc_url) == pids["genesis_hash"])


def ipfs_is_ours(cfg: DevnetConfig, pids: dict | None = None) -> bool:
    """True iff the IPFS node at `cfg.ipfs_url` is the one this data dir started (pid alive, same URL)."""
    pids = _read_pids(cfg) if pids is None else pids
    return pid_alive(pids.get("ipfs")) and pids.get("ipfs_url") == cfg.ipfs_url


def _foreign(what: str, url: str, cfg: DevnetConfig, setting: str) -> DevnetError:
    return DevnetError(
        f"{url} already serves {what} that {cfg.data_dir} did not start (another checkout's devnet?); "
        f"stop it, or use another port: `make devnet-up {setting}=<free port>` (and the same for deploy / demo)")


def up(cfg: DevnetConfig | None = None) -> dict:
    """Start anvil and the IPFS node unless this data dir's own already answer; record pids and the
    chain's block 0 hash. Idempotent.

    Returns `{"anvil": pid, "ipfs": pid, "rpc_url": ..., "ipfs_url": ..., "genesis_hash": ...}`.
    Raises `DevnetError` when a port is held by something that is not ours (another checkout's
    devnet, another program) or a service fails to start.
    """
    cfg = cfg or DevnetConfig()
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    pids = _read_pids(cfg)
    chain = rpc_answers(cfg.rpc_url)
    if chain is None:
        pids["anvil"] = start_anvil(cfg).pid
        pids["rpc_url"] = cfg.rpc_url
        pids["genesis_hash"] = genesis_hash(cfg.rpc_url)
    elif not chain_is_ours(cfg, pids):
        raise _foreign(f"a chain (chain id {chain})", cfg.rpc_url, cfg, "RPC_PORT")
    if ipfs_answers(cfg.ipfs_url) is None:
        pids["ipfs"] = start_ipfs(cfg).pid
    elif not ipfs_is_ours(cfg, pids):
        raise _foreign("an IPFS node", cfg.ipfs_url, cfg, "IPFS_PORT")
    pids.update(rpc_url=cfg.rpc_url, ipfs_url=cfg.ipfs_url, chain_id=cfg.chain_id)
    _pids_file(cfg).write_text(json.dumps(pids, indent=2) + "\n")
    return pids


def require_ours(cfg: DevnetConfig | None = None) -> dict:
    """pids.json of a devnet this data dir started and that answers; `DevnetError` (one line) when
    nothing answers or the chain / IPFS node on the ports is someone else's (before `make deploy`)."""
    cfg = cfg or DevnetConfig()
    pids = _read_pids(cfg)
    if rpc_answers(cfg.rpc_url) is None:
        raise DevnetError(f"no chain answers at {cfg.rpc_url}: start the devnet first (`make devnet-up`)")
    if not chain_is_ours(cfg, pids):
        raise _foreign("a chain", cfg.rpc_url, cfg, "RPC_PORT")
    if ipfs_answers(cfg.ipfs_url) is not None and not ipfs_is_ours(cfg, pids):
        raise _foreign("an IPFS node", cfg.ipfs_url, cfg, "IPFS_PORT")
    return pids


def _stop_pid(pid: int, timeout_s: float = 15.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def down(cfg: DevnetConfig | None = None) -> list[str]:
    """Stop the services recorded in pids.json with SIGTERM (SIGKILL after 15 s), the chain's state
    saved first (`save_anvil_state`) when the chain is ours; returns what was stopped."""
    cfg = cfg or DevnetConfig()
    pids = _read_pids(cfg)
    if chain_is_ours(cfg, pids):
        save_anvil_state(cfg)
    stopped = []
    for name in ("ipfs", "anvil"):
        pid = pids.get(name)
        if pid_alive(pid):
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
        detail = {"chain_id": chain, "block": int(rpc_call(cfg.rpc_url, "eth_blockNumber"), 16),
                  "ours": chain_is_ours(cfg, pids)}
    # up = answering and ours: another checkout's node on our port is shown (ours=False), not counted
    out.append(ServiceStatus("anvil", cfg.rpc_url, pids.get("anvil"), bool(detail.get("ours")), detail))
    ver = ipfs_answers(cfg.ipfs_url)
    ours = ver is not None and ipfs_is_ours(cfg, pids)
    out.append(ServiceStatus("ipfs", cfg.ipfs_url, pids.get("ipfs"), ours,
                             {"version": ver.get("Version"), "ours": ours} if ver else {}))
    return out


def status_json(cfg: DevnetConfig | None = None) -> str:
    return json.dumps([asdict(s) for s in status(cfg)], indent=2)

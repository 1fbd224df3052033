"""Helpers of the operator tests (imported by conftest.py and the tests; a unique module name so
it never collides with another suite's conftest): a real anvil on a free port, the real contracts deployed on it
(from ape's build artifacts in .build/, through web3, written in the deployments JSON shape that
`ape run deploy` writes), and role accounts funded with TNZO."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
from web3 import HTTPProvider, Web3

from tenzro_operator.keys import anvil_account

REPO = Path(__file__).resolve().parents[2]
ANVIL = REPO / "node_modules/.bin/anvil"
BUILD = REPO / ".build/__local__.json"
PRECOMPILE = "0x0000000000000000000000000000000000001008"
TOKEN = 10**18
MIN_SYNCER_STAKE = 10 * TOKEN
SYNCER_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rpc_answers(url: str) -> bool:
    try:
        r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}, timeout=1.0)
        return r.status_code == 200
    except httpx.HTTPError:
        return False


class Anvil:
    """An anvil process of our own; `restart()` keeps the chain when started with a state file.

    anvil binds ``--port 0`` itself and we read the port from its "Listening on" line, so a port
    taken by someone else's anvil (other suites run at the same time) can never be mistaken for ours.
    """

    def __init__(self, tmp: Path, state: bool = False) -> None:
        self.port: int | None = None
        self.state = tmp / "anvil-state.json" if state else None
        self.log = tmp / "anvil.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Anvil":
        argv = [str(ANVIL), "--host", "127.0.0.1", "--port", str(self.port or 0)]
        if self.state is not None:
            argv += ["--state", str(self.state)]
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            with open(self.log, "rb") as fh:
                fh.seek(offset)
                text = fh.read().decode(errors="replace")
            m = re.search(r"Listening on 127\.0\.0\.1:(\d+)", text)
            if m and self.proc.poll() is None:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"anvil did not start: {text[-500:]}")
            time.sleep(0.05)
        while not rpc_answers(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"anvil on {self.url} does not answer")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # anvil dumps --state on SIGTERM
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        """Stop and start again on the same port (and state file)."""
        self.stop()
        self.start()


def _artifacts() -> dict:
    if not BUILD.exists():
        env = dict(os.environ, PATH=f"{REPO / 'node_modules/.bin'}:{os.environ['PATH']}")
        subprocess.run([str(REPO / ".venv/bin/ape"), "compile"], cwd=REPO, env=env, check=True,
                       capture_output=True)
    return json.loads(BUILD.read_text())["contractTypes"]


def deploy_stack(rpc_url: str, out: Path) -> dict:
    """Deploy TenzroToken, TrainingRegistry, ReceiptVerifier (+ its code at 0x…1008) and RewardEscrow
    from anvil account 0; write the deployment record to ``out``; return it."""
    types = _artifacts()
    w3 = Web3(HTTPProvider(rpc_url))
    deployer = anvil_account(0)
    nonce = w3.eth.get_transaction_count(deployer.address)

    def deploy(name: str, *args):
        nonlocal nonce
        ct = types[name]
        c = w3.eth.contract(abi=ct["abi"], bytecode=ct["deploymentBytecode"]["bytecode"])
        tx = c.constructor(*args).build_transaction({"from": deployer.address, "nonce": nonce, "gas": 15_000_000})
        nonce += 1
        h = w3.eth.send_raw_transaction(deployer.sign_transaction(tx).raw_transaction)
        rcpt = w3.eth.wait_for_transaction_receipt(h, timeout=30)
        assert rcpt["status"] == 1, f"deploying {name} failed"
        return rcpt["contractAddress"], ct["abi"]

    block = w3.eth.block_number + 1
    token, token_abi = deploy("TenzroToken", 10**9 * TOKEN)
    registry, reg_abi = deploy("TrainingRegistry", token, MIN_SYNCER_STAKE, SYNCER_TIMEOUT_S)
    verifier, ver_abi = deploy("ReceiptVerifier")
    w3.provider.make_request("anvil_setCode", [PRECOMPILE, "0x" + bytes(w3.eth.get_code(verifier)).hex()])
    escrow, esc_abi = deploy("RewardEscrow", PRECOMPILE)

    def rec(addr, abi):
        canon = json.dumps(abi, sort_keys=True, separators=(",", ":")).encode()
        return {"address": addr, "abi": abi, "abi_sha256": hashlib.sha256(canon).hexdigest()}

    record = {"network": "local", "chain_id": w3.eth.chain_id, "rpc_url": rpc_url, "deploy_block": block,
              "deployer": deployer.address, "verifier_precompile": PRECOMPILE,
              "contracts": {"TenzroToken": rec(token, token_abi), "TrainingRegistry": rec(registry, reg_abi),
                            "ReceiptVerifier": rec(verifier, ver_abi), "RewardEscrow": rec(escrow, esc_abi)}}
    out.write_text(json.dumps(record, indent=2))
    return record


EXAMPLE_SPEC = REPO / "operator/examples/task_spec.json"
_counter = {"n": 0}


def make_spec(**overrides):
    """The example spec with a fresh task id (the session chain is shared) and ``overrides``
    (``protocol`` updates metadata.protocol)."""
    from tenzro_operator.spec import parse_spec

    raw = json.loads(EXAMPLE_SPEC.read_text())
    _counter["n"] += 1
    raw["task_id"] = f"test-{os.getpid()}-{_counter['n']}-{time.time_ns()}"
    proto = overrides.pop("protocol", None)
    if proto:
        raw["metadata"]["protocol"].update(proto)
    raw.update(overrides)
    return parse_spec(raw)


def fund(rpc_url: str, deployments: Path, indices: list[int], amount: int) -> None:
    """Mint ``amount`` TNZO atto-units to each anvil account index (from the owner, account 0)."""
    from tenzro_operator.chain import ChainClient

    owner = ChainClient(rpc_url, deployments, anvil_account(0))
    pend = [owner.send("mint", anvil_account(i).address, amount, contract="TenzroToken") for i in indices]
    for p in pend:
        owner.wait(p)

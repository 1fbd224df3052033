"""What every chain-backed test suite needs (operator, roles, replay, devnet, e2e, referee): a free
loopback port, an anvil process of its own (`Anvil`), ape's compiled contract artifacts, and the four
contracts deployed on a devnet through web3.

Importable as ``import stack`` from any test folder (``pythonpath = ["tests"]`` in pyproject.toml).

Deployment goes through web3 from ``.build/__local__.json`` (compiled with ``ape compile`` when
missing), not through ``ape run deploy``: ape's own start-up plus a recompile whenever a contract
changed costs minutes on a shared 2-core machine, too slow for a per-session fixture. The record
has the shape ``scripts/deploy.py`` writes (``deployments/<network>.json``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import httpx

from web3 import HTTPProvider, Web3

from tenzro_operator import devnet
from tenzro_operator.chain import merged_abi
from tenzro_operator.keys import anvil_account

__all__ = ["ANVIL", "Anvil", "BUILD", "MIN_SYNCER_FEE_PER_ROUND", "MIN_SYNCER_STAKE", "PRECOMPILE", "REPO", "SYNCER_TIMEOUT_S", "TOKEN",
           "build_artifacts", "closed_by_server", "deploy_stack", "free_port", "fund", "rpc_answers", "small_dataset"]

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / ".build/__local__.json"
PRECOMPILE = "0x0000000000000000000000000000000000001008"  # TRAINING_VERIFY, as scripts/deploy.py
TOKEN = 10**18  # atto-units per TNZO
MIN_SYNCER_STAKE = 10 * TOKEN  # atto-units
SYNCER_TIMEOUT_S = 60
MIN_SYNCER_FEE_PER_ROUND = 10**15  # atto-units (0.001 TNZO), scripts/deploy.py's default
DEPLOY_GAS = 25_000_000  # per deployment transaction; under anvil's default 30M block gas limit
INITIAL_SUPPLY = 10**9 * TOKEN  # minted to the deployer (anvil account 0)

ANVIL = Path(devnet.anvil_binary())  # the binary, not the node wrapper: its pid is the one signalled


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

    def __init__(self, tmp: Path, state: bool = False, extra_args: Sequence[str] = ()) -> None:
        self.port: int | None = None
        self.extra_args = list(extra_args)  # more anvil flags, e.g. --disable-block-gas-limit
        self.state = tmp / "anvil-state.json" if state else None
        self.log = tmp / "anvil.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Anvil":
        argv = [str(ANVIL), "--host", "127.0.0.1", "--port", str(self.port or 0), *self.extra_args]
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



def wait_until(predicate, timeout_s: float = 10.0, what: str = "condition", poll_s: float = 0.1):
    """Poll ``predicate()`` until it returns something truthy (returned) or ``timeout_s`` seconds pass
    (AssertionError naming ``what``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)


_PORTS_PER_WORKER = 1_500  # below the kernel's ephemeral range (32768-60999), which bind(0) draws from
_port_cursor = itertools.count()


def free_port() -> int:
    """A loopback TCP port nobody listens on now, from a range of this pytest-xdist worker's own
    (20000 + 1,500 x its number), so two workers never pick the same one: with the kernel's port 0 they
    sometimes did, and the devnet launcher, which reuses a node already answering on its port, then
    ran two workers' tests on one chain (permit nonces taken by the other worker: reverted posts)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    base = 20_000 + (worker % 8) * _PORTS_PER_WORKER
    for _ in range(_PORTS_PER_WORKER):
        port = base + next(_port_cursor) % _PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {base}-{base + _PORTS_PER_WORKER - 1}")


def build_artifacts() -> dict[str, Any]:
    """ape's compiled contract types by name (``abi``, ``deploymentBytecode``, ...), from
    ``.build/__local__.json``; runs ``ape compile`` first when that file is missing.

    Raises:
        subprocess.CalledProcessError: ``ape compile`` failed.
    """
    if not BUILD.exists():
        env = dict(os.environ, PATH=f"{REPO / 'node_modules/.bin'}:{os.environ['PATH']}")
        subprocess.run([str(REPO / ".venv/bin/ape"), "compile"], cwd=REPO, env=env, check=True, capture_output=True)
    return json.loads(BUILD.read_text())["contractTypes"]


def _contract_record(address: str, abi: list) -> dict[str, Any]:
    canon = json.dumps(abi, sort_keys=True, separators=(",", ":")).encode()
    return {"address": address, "abi": abi, "abi_sha256": hashlib.sha256(canon).hexdigest()}


def deploy_stack(rpc_url: str, out: Path, *, min_syncer_stake: int = MIN_SYNCER_STAKE,
                 syncer_timeout_s: int = SYNCER_TIMEOUT_S,
                 min_syncer_fee_per_round: int = MIN_SYNCER_FEE_PER_ROUND) -> dict[str, Any]:
    """Deploy TenzroToken (10^9 TNZO to the deployer), TrainingRegistry, ReceiptVerifier (+ its
    runtime code at 0x…1008 with ``anvil_setCode``) and RewardEscrow (pointing at 0x…1008) from
    anvil account 0 on the anvil at ``rpc_url``; write the deployment record to ``out``.

    Args:
        rpc_url: an anvil JSON-RPC URL.
        out: where the record goes (JSON).
        min_syncer_stake: the registry's minimum syncer stake, atto-units.
        syncer_timeout_s: seconds after the later of a round deadline and the syncer's election
            before a silent syncer may be replaced.
        min_syncer_fee_per_round: the smallest syncer pay per round a task may offer, atto-units.

    Returns:
        The record: network, chain_id, rpc_url, deploy_block, genesis_hash (block 0), deployer,
        verifier_precompile, contracts {name: {address, abi, abi_sha256}}.

    Raises:
        AssertionError: a deployment transaction reverted.
    """
    types = build_artifacts()
    w3 = Web3(HTTPProvider(rpc_url))
    deployer = anvil_account(0)
    nonce = w3.eth.get_transaction_count(deployer.address)
    contracts: dict[str, dict[str, Any]] = {}

    def deploy(name: str, *args) -> str:
        nonlocal nonce
        ct = types[name]
        c = w3.eth.contract(abi=ct["abi"], bytecode=ct["deploymentBytecode"]["bytecode"])
        tx = c.constructor(*args).build_transaction({"from": deployer.address, "nonce": nonce, "gas": DEPLOY_GAS})
        nonce += 1
        h = w3.eth.send_raw_transaction(deployer.sign_transaction(tx).raw_transaction)
        rcpt = w3.eth.wait_for_transaction_receipt(h, timeout=30)
        assert rcpt["status"] == 1, f"deploying {name} failed"
        contracts[name] = _contract_record(rcpt["contractAddress"], ct["abi"])
        return rcpt["contractAddress"]

    block = w3.eth.block_number + 1
    token = deploy("TenzroToken", INITIAL_SUPPLY)
    # the registry's modules first (EIP-3860: its init code cannot hold their code), same parameters
    rounds = deploy("RegistryRounds", token, min_syncer_fee_per_round)
    evidence = deploy("RegistryEvidence", token, min_syncer_fee_per_round, rounds, min_syncer_stake, syncer_timeout_s)
    registry = deploy("TrainingRegistry", token, min_syncer_stake, syncer_timeout_s, min_syncer_fee_per_round, evidence)
    del contracts["RegistryRounds"], contracts["RegistryEvidence"]  # their code runs only through the registry
    contracts["TrainingRegistry"] = _contract_record(registry, merged_abi(
        types["TrainingRegistry"]["abi"], types["RegistryEvidence"]["abi"], types["RegistryRounds"]["abi"]))
    verifier = deploy("ReceiptVerifier")
    w3.provider.make_request("anvil_setCode", [PRECOMPILE, "0x" + bytes(w3.eth.get_code(verifier)).hex()])
    deploy("RewardEscrow", PRECOMPILE)
    record = {"network": "local", "chain_id": w3.eth.chain_id, "rpc_url": rpc_url, "deploy_block": block,
              "genesis_hash": "0x" + bytes(w3.eth.get_block(0)["hash"]).hex(), "deployer": deployer.address,
              "verifier_precompile": PRECOMPILE, "contracts": contracts}
    out.write_text(json.dumps(record, indent=2))
    return record


def fund(rpc_url: str, deployments: Path, indices, amount: int) -> None:
    """Mint ``amount`` TNZO atto-units to each anvil account index, from the token owner (account 0)."""
    from tenzro_operator.chain import ChainClient

    owner = ChainClient(rpc_url, deployments, anvil_account(0))
    for p in [owner.send("mint", anvil_account(i).address, amount, contract="TenzroToken") for i in indices]:
        owner.wait(p)


_DATASETS: dict[int, Any] = {}


@dataclass
class DevStack:
    """A running anvil with the contracts deployed (`funded_devnet`)."""

    anvil: Anvil
    deployments: Path
    record: dict

    @property
    def rpc_url(self) -> str:
        return self.anvil.url


@contextmanager
def funded_devnet(tmp: Path, funded=range(1, 10), *, state: bool = False) -> Iterator[DevStack]:
    """Anvil in ``tmp`` (``state``: persisted, survives ``anvil.restart()``), the contracts deployed by
    `deploy_stack`, anvil accounts ``funded`` holding 1,000,000 TNZO each; anvil stopped on exit."""
    anvil = Anvil(tmp, state=state).start()
    try:
        dep = tmp / "deployments.json"
        record = deploy_stack(anvil.url, dep)
        fund(anvil.url, dep, list(funded), 1_000_000 * TOKEN)
        yield DevStack(anvil, dep, record)
    finally:
        anvil.stop()


def ensure_syncer_stake(client, bond: int, min_stake: int = MIN_SYNCER_STAKE) -> None:
    """Make ``client``'s account a syncer candidate whose unlocked stake covers ``bond`` atto-units
    (the runs of a shared session chain are left unsealed, each holding a bond): registers
    ``max(min_stake, bond)`` the first time, else tops the stake up by the shortfall. A top-up
    inside the election window of the candidate's last change is refused by the registry
    (PROTOCOL.md §3), so on this devnet the helper mines up to the block it may come in first."""
    info = client.syncer_info()
    if not info.registered:
        client.register_syncer(max(min_stake, bond))
    elif info.free < bond:
        _, from_block = client.syncer_weight()
        head = client.block_number()
        if from_block > head:
            client.w3.provider.make_request("anvil_mine", [hex(from_block - head)])
        client.register_syncer(bond - info.free)


def force_commit(trainer, tid: bytes, rnd: int, fragment: int, payload):
    """The first half of the forced path: ``trainer`` (a `ChainClient`) signs ``payload`` (a
    `SignedPayload` without signature) over the open round's weights and commits to it on-chain.
    Returns the `RevealMessage`; ``submit_outer_gradient(..., m.signed_payload())`` reveals it once
    the commit phase has closed."""
    from tenzro_operator.root_flow import RevealMessage

    base_root = trainer.get_run(tid).weights_root
    signed = trainer.sign_outer_gradient(tid, rnd, fragment, payload, base_root=base_root)
    m = RevealMessage.of(tid, rnd, fragment, trainer.address, base_root, signed)
    trainer.commit_submission(tid, rnd, fragment, m.commitment())
    return m


def past_commit_phase(client, tid: bytes) -> None:
    """Mine the devnet past the open round's commit phase (chain time: ``evm_increaseTime``), so
    forced reveals are taken and the round can be committed."""
    closes = client.commit_phase(tid)[0]
    client.mine(seconds=max(0, closes - client.block_timestamp("latest")) + 1)


def small_dataset(n_series: int = 4):
    """A few real series of the default collection (200-800 points each, long enough for the demo
    model's windows), the first ``n_series`` by id; cached per size."""
    if n_series not in _DATASETS:
        from tenzro_trainer.data.collection import default_collection

        df = default_collection()
        lengths = df.groupby("unique_id").size()
        ids = sorted(u for u, n in lengths.items() if 200 <= n <= 800)[:n_series]
        _DATASETS[n_series] = df[df["unique_id"].isin(ids)].reset_index(drop=True)
    return _DATASETS[n_series].copy()


def closed_by_server(s: socket.socket, within_s: float) -> bool:
    """True when the server closes ``s`` (an answer then EOF, or a reset) within ``within_s`` seconds."""
    s.settimeout(within_s)
    try:
        while s.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False

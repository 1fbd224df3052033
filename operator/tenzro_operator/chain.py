"""Chain client: web3.py 7 over JSON-RPC, ABIs and addresses from ``deployments/<network>.json``.

One `ChainClient` per (process, signing account). It

* checks at start-up that the RPC answers, that its chain id is the deployment's, and that
  code exists at every recorded address (fail fast, `DeploymentError`);
* estimates every transaction first and refuses what would revert, decoding custom errors
  by name from the ABIs of all deployed contracts into `ChainRevert(error_name, args)`;
* owns the account's nonce (a lock and a local counter, resynced from the node on a nonce
  error or a lost transaction) so several transactions can be in flight (`send` / `wait`);
* polls receipts for a bounded time (`TxFailed` past it), replacing a transaction that is not
  mined after ``replace_after_s`` by the same one on the same nonce with fees bumped by 12.5 %,
  never above the fee cap (``max_fee_per_gas``: `FeeCapExceeded` when the network asks more);
* never signs a call twice: after an uncertain broadcast (a lost response, a "nonce too low"
  for a transaction it may itself have sent) it looks the signed hash up on the node first;
* decodes a revert at mining time like an estimated one (`TxReverted`, a `ChainRevert`);
* pays for ``postTask`` / ``enrollTrainer`` with an ERC-2612 permit signed locally over the
  token's own EIP-712 domain (`spend`, `tenzro_operator.permit`): one transaction, no allowance
  left; a token without permits is approved first (`spend_approved`);
* retries connection errors, HTTP 429 / 5xx and JSON-RPC "busy" answers with exponential
  backoff, then raises `RpcUnavailable(url)`.

Amounts are ``int`` token atto-units everywhere; ``bytes32`` values are ``bytes`` (32 long);
addresses are checksummed strings. Times on-chain are unix seconds.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping, NamedTuple, Sequence

import requests
from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address
from eth_utils.abi import abi_to_signature, get_abi_input_types
from web3 import HTTPProvider, Web3
from web3.exceptions import (
    BlockNotFound,
    ContractLogicError,
    TimeExhausted,
    TransactionNotFound,
    Web3RPCError,
)

from tenzro_operator.errors import (
    ChainError,
    ChainRevert,
    DeploymentError,
    FeeCapExceeded,
    InsufficientTokens,
    RpcUnavailable,
    TxFailed,
    TxReverted,
)
from tenzro_operator.permit import PermitDomain, PermitSignature, sign_permit
from tenzro_operator.redact import redact_url, scrub

__all__ = [
    "ChainClient",
    "ContractRecord",
    "Deployment",
    "EIP712_DOMAIN_NAME",
    "EIP712_DOMAIN_VERSION",
    "RoundRecord",
    "RunStatus",
    "RunView",
    "SlashReason",
    "SignedPayload",
    "ChunkOpening",
    "SyncerInfo",
    "TrainerStats",
    "TrainingReceipt",
    "TxResult",
    "load_deployment",
    "outer_gradient_typed_data",
    "sign_outer_gradient",
    "registry_domain_separator",
    "sign_submission_commitment",
    "submission_commitment_digest",
]

log = logging.getLogger("tenzro.chain")

REGISTRY = "TrainingRegistry"
TOKEN = "TenzroToken"
VERIFIER = "ReceiptVerifier"
ESCROW = "RewardEscrow"
EIP712_DOMAIN_NAME = "TenzroTrainingRegistry"
EIP712_DOMAIN_VERSION = "2"
ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
DEVNET_CHAIN_IDS = (31337, 1337)  # anvil / hardhat-style local chains: devnet-only helpers work there
ELECTION_WINDOW_BLOCKS = 256  # TrainingRegistry.ELECTION_WINDOW_BLOCKS: blocks an election request can be resolved in
CONNECTION_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout, ConnectionError)
_TRANSIENT_RPC = re.compile(r"rate limit|too many requests|busy|timeout|timed out|header not found|"
                            r"try again|temporarily unavailable|limit exceeded", re.I)
_UNKNOWN_BLOCK = re.compile(r"unknown block|block not found|not found block|missing block", re.I)
FEE_BUMP = (9, 8)  # a replacement pays 9/8 of the fees it replaces (12.5 %; nodes require >= 10 %)
_NONCE_ERROR = re.compile(r"nonce too (low|high)|already known|replacement transaction underpriced|"
                          r"invalid nonce|known transaction", re.I)


# ----------------------------------------------------------------------------- enums / records


class RunStatus(enum.IntEnum):
    """``ITrainingRegistry.RunStatus``."""

    NONE = 0
    ENROLLING = 1
    TRAINING = 2
    COMPLETED = 3
    SEALED = 4
    CANCELLED = 5


class SlashReason(enum.IntEnum):
    """``ITrainingRegistry.SlashReason``: proveInvalid proves 2..3, proveNormOutlier 4 (PROTOCOL.md
    §4); 5 follows an unanswered availability challenge; 6 a forced commitment never revealed
    (``slashUnrevealed``); 0 and 1 are kept for old events."""

    MISSED_ROUNDS = 0
    HASH_MISMATCH = 1
    MALFORMED = 2
    NON_FINITE = 3
    NORM_OUTLIER = 4
    UNAVAILABLE = 5
    UNREVEALED = 6


@dataclass(frozen=True)
class SignedPayload:
    """``ITrainingRegistry.SignedPayload``: a trainer's signed submission of one (round, fragment).

    ``payload_root`` / ``payload_sumsq`` are the chunk commitment of the pseudo-gradient (PROTOCOL.md
    §2; 32 bytes and a binary32 bit pattern), ``payload_hash`` the sha256 of the bytes at ``cid``,
    ``signature`` the trainer's 65-byte EIP-712 signature (empty while unsigned)."""

    payload_root: bytes
    payload_sumsq: int
    cid: str
    payload_hash: bytes
    signature: bytes = b""

    def to_abi(self) -> tuple:
        return (_b32(self.payload_root), int(self.payload_sumsq), self.cid, _b32(self.payload_hash),
                bytes(self.signature))

    @classmethod
    def from_event(cls, args: Mapping[str, Any]) -> "SignedPayload":
        """From the arguments of a ``GradientSubmitted`` event."""
        return cls(bytes(args["payloadRoot"]), int(args["payloadSumsq"]), args["cid"], bytes(args["payloadHash"]),
                   bytes(args["signature"]))


@dataclass(frozen=True)
class ChunkOpening:
    """``ITrainingRegistry.ChunkOpening``: chunk ``chunk_index`` (64 bytes) of a committed vector and
    its sibling ``(h, s)`` pairs from the leaf level up (`tenzro_trainer.commitment.ChunkTree.proof`);
    or, with ``chunk_index`` = `WHOLE_PAYLOAD`, the answer to a whole-payload challenge
    (PROTOCOL.md §4 "Whole payload"): every chunk in ``chunk`` and each leaf's sum in
    ``leaf_sums`` (sent as siblingS, with no sibling hashes)."""

    WHOLE_PAYLOAD: ClassVar[int] = 2**32 - 1  # EvidenceVerifier.WHOLE_PAYLOAD

    chunk_index: int
    chunk: bytes
    proof: tuple[tuple[bytes, int], ...] = ()
    leaf_sums: tuple[int, ...] = ()

    def to_abi(self) -> tuple:
        if self.chunk_index == self.WHOLE_PAYLOAD:
            return (int(self.chunk_index), bytes(self.chunk), [], [int(s) for s in self.leaf_sums])
        return (int(self.chunk_index), bytes(self.chunk), [_b32(h) for h, _ in self.proof],
                [int(s) for _, s in self.proof])

    @classmethod
    def of(cls, tree, chunk_index: int) -> "ChunkOpening":
        """The opening of chunk ``chunk_index`` of a `ChunkTree` (`WHOLE_PAYLOAD`: `whole`)."""
        if chunk_index == cls.WHOLE_PAYLOAD:
            return cls.whole(tree)
        return cls(chunk_index, tree.chunk(chunk_index), tuple(tree.proof(chunk_index)))

    @classmethod
    def whole(cls, tree) -> "ChunkOpening":
        """The whole-payload answer of a `ChunkTree`: its ``num_chunks`` chunks (64 bytes each)
        and leaf sums."""
        m = tree.num_chunks
        return cls(cls.WHOLE_PAYLOAD, b"".join(tree.chunk(i) for i in range(m)), (),
                   tuple(tree.leaf(i)[1] for i in range(m)))


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _from_abi_dict(cls, d: dict[str, Any]):
    names = {f.name for f in dataclasses.fields(cls)}
    kw = {}
    for k, v in d.items():
        s = _snake(k)
        if s in names:
            kw[s] = v
    return cls(**kw)


@dataclass(frozen=True)
class RunView:
    """``getRun``: a run as the registry sees it. Amounts atto-units, times unix seconds."""

    task_id: bytes = b""
    status: RunStatus = RunStatus.NONE
    sponsor: str = ZERO_ADDRESS
    syncer: str = ZERO_ADDRESS
    spec_hash: bytes = b""
    spec_cid: str = ""
    initial_weights_root: bytes = b""
    weights_root: bytes = b""
    trainer_count: int = 0
    quorum: int = 0
    fragment_count: int = 0
    enrolled_count: int = 0
    inner_steps: int = 0
    max_rounds: int = 0
    grace_window_seconds: int = 0
    aggregation: int = 0
    tier: int = 0
    current_round: int = 0
    round_opened_at: int = 0
    round_deadline: int = 0
    syncer_replaceable_at: int = 0
    posted_at: int = 0
    min_stake: int = 0
    reward_pool: int = 0
    reward_pool_left: int = 0
    stake_held: int = 0
    total_credits: int = 0
    fragment_sizes: tuple[int, ...] = ()
    enrollment_deadline: int = 0  # postedAt + enrollmentSeconds: last second an enrollment is accepted
    syncer_elected_at: int = 0  # 0 while no syncer
    election_block: int = 0  # block of a pending requestSyncerElection (0 = none)
    syncer_fee_bps: int = 0  # share of the reward pool paid to syncers, basis points
    syncer_bond: int = 0  # stake the elected syncer locks for this run, atto-units
    syncer_fees_accrued: int = 0  # accrued to syncers so far (claimable after the seal), atto-units
    norm_screen_sq: int = 0  # binary32 bits of the norm screen squared (0 = none)
    challenge_seconds: int = 0  # answer window of an availability challenge, seconds
    open_challenges: int = 0  # availability challenges pending (the seal waits for none)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(int(self.status)))
        object.__setattr__(self, "fragment_sizes", tuple(self.fragment_sizes))

    @property
    def exists(self) -> bool:
        return self.status != RunStatus.NONE

    @property
    def aggregation_name(self) -> str:
        from tenzro_operator.spec import AGGREGATION_RULES

        return AGGREGATION_RULES[self.aggregation] if self.aggregation < len(AGGREGATION_RULES) else "?"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict: bytes as 0x-hex, the status by name, amounts as decimal strings."""
        out = _view_json(self, ("min_stake", "reward_pool", "reward_pool_left", "stake_held", "total_credits",
                                "syncer_bond", "syncer_fees_accrued"))
        out["aggregation"] = self.aggregation_name
        return out


class SyncerInfo(NamedTuple):
    """``syncerInfo``: a syncer candidate's pool entry (amounts atto-units)."""

    stake: int
    active_tasks: int
    registered: bool
    locked: int  # sum of the bonds of the runs it is syncer of (<= stake)

    @property
    def free(self) -> int:
        """Stake not locked as a bond: what another run's ``syncerBond`` must fit in."""
        return self.stake - self.locked


@dataclass(frozen=True)
class RoundRecord:
    """``getRound``: a finalized round."""

    weights_root: bytes = b""
    transcript_hash: bytes = b""
    round_digest: bytes = b""
    accepted_count: int = 0
    finalized_at: int = 0
    challenge_status: int = 0  # root flow: 1 once a challenge of the round was lost (receipt.with_status)
    opened_at: int = 0  # root flow: the opening (seconds) the round was committed in


@dataclass(frozen=True)
class TrainerStats:
    """``trainerMetrics``: one trainer in one run (amounts atto-units)."""

    trainer: str = ZERO_ADDRESS
    index: int = 0
    enrolled: bool = False
    submitted: int = 0  # on-chain (forced) submissions of the open round
    stake: int = 0
    slashed: int = 0
    did: str = ""

    def to_json(self) -> dict[str, Any]:
        return _view_json(self, ("stake", "slashed"))


@dataclass(frozen=True)
class TrainingReceipt:
    """``getReceipt``: the sealed receipt; ``serialized`` is the verifier input minus the root."""

    task_id: bytes = b""
    spec_hash: bytes = b""
    final_model_hash: bytes = b""
    run_root: bytes = b""
    transcript_root: bytes = b""
    rounds: int = 0
    trainer_count: int = 0
    chain_id: int = 0
    registry: str = ZERO_ADDRESS
    sealed_at: int = 0
    serialized: bytes = b""

    def to_json(self) -> dict[str, Any]:
        return _view_json(self)


@dataclass
class TxResult:
    """A mined transaction: hash (0x-hex), block, gas used, and the decoded events it emitted
    (``(event_name, args)`` from any deployed contract, in log order)."""

    tx_hash: str
    block_number: int
    gas_used: int
    status: int
    method: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def event(self, name: str) -> dict[str, Any]:
        """Args of the first ``name`` event; `ChainError` if the transaction emitted none."""
        for n, args in self.events:
            if n == name:
                return args
        raise ChainError(f"transaction {self.tx_hash} ({self.method}) emitted no {name} event")

    def events_named(self, name: str) -> list[dict[str, Any]]:
        return [a for n, a in self.events if n == name]


@dataclass
class PendingTx:
    """A sent, not yet mined transaction (`ChainClient.send`). ``tx`` is the unsigned transaction
    (fees included) and ``hashes`` every hash broadcast for this nonce, the first one included
    (replacements add theirs; whichever is mined is the result)."""

    tx_hash: str
    nonce: int
    method: str
    sent_at: float
    tx: dict[str, Any] = field(default_factory=dict)
    hashes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.hashes:
            self.hashes = [self.tx_hash]


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, enum.Enum):
        return v.name
    return v


def _view_json(view: Any, amounts: Sequence[str] = ()) -> dict[str, Any]:
    """A view dataclass as a JSON-ready dict (`_jsonable`), the ``amounts`` fields (atto-units,
    beyond a JSON number's exact range) as decimal strings."""
    out = _jsonable(dataclasses.asdict(view))
    for k in amounts:
        out[k] = str(getattr(view, k))
    return out


def _fmt_args(args: Any) -> str:
    if isinstance(args, dict):
        return "(" + ", ".join(f"{k}={_jsonable(v)}" for k, v in args.items()) + ")"
    return "(" + ", ".join(str(_jsonable(v)) for v in args) + ")"


def proof_commitment(calldata: bytes, prover: str) -> bytes:
    """``commitProof``'s argument for a proof transaction's ``calldata`` (selector and arguments)
    sent by ``prover``: keccak256(abi.encode(keccak256(calldata), prover)), 32 bytes."""
    return keccak(abi_encode(["bytes32", "address"], [keccak(calldata), to_checksum_address(prover)]))


def _b32(v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray)) and len(v) == 32:
        return bytes(v)
    if isinstance(v, str) and re.fullmatch(r"0x[0-9a-fA-F]{64}", v):
        return bytes.fromhex(v[2:])
    raise ValueError(f"expected 32 bytes (0x + 64 hex digits), got {v!r}")


# ----------------------------------------------------------------------------- deployments


def merged_abi(first: list, *more: list) -> list:
    """One address's ABI from several contracts': every item of ``first``, then the functions,
    events and errors of ``more`` that ``first`` lacks (the registry's own ABI plus RegistryEvidence's,
    whose functions its fallback serves)."""
    def key(item: dict) -> tuple:
        return item.get("type"), item.get("name"), json.dumps(item.get("inputs", []), sort_keys=True)

    out, seen = list(first), {key(i) for i in first}
    for abi in more:
        for item in abi:
            if item.get("type") in ("function", "event", "error") and key(item) not in seen:
                seen.add(key(item))
                out.append(item)
    return out


@dataclass(frozen=True)
class ContractRecord:
    name: str
    address: str
    abi: list[dict[str, Any]]


@dataclass(frozen=True)
class Deployment:
    """``deployments/<network>.json``."""

    path: Path
    network: str
    chain_id: int
    deploy_block: int
    contracts: dict[str, ContractRecord]
    rpc_url: str | None = None
    deployer: str | None = None
    verifier_precompile: str | None = None
    genesis_hash: str | None = None  # 0x-hex of block 0 of the chain deployed on (a fresh anvil's differs)
    ipfs_url: str | None = None  # Kubo RPC API of the devnet's IPFS node (`make deploy` records it)

    def contract(self, name: str) -> ContractRecord:
        try:
            return self.contracts[name]
        except KeyError:
            raise DeploymentError(f"{self.path} has no contract {name!r} (has: {', '.join(self.contracts)})") from None

    @property
    def verifier_address(self) -> str | None:
        """Where to call the receipt verifier: the precompile address on devnets, else the deployed one."""
        if self.verifier_precompile:
            return to_checksum_address(self.verifier_precompile)
        rec = self.contracts.get(VERIFIER)
        return rec.address if rec else None


def load_deployment(path: str | Path) -> Deployment:
    """Read a deployment record.

    Raises:
        DeploymentError: missing file, bad JSON, or missing fields (names the file and field).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise DeploymentError(f"deployment record {p} not found; deploy first "
                              "(`make deploy`, or `ape run deploy --network ethereum:local:foundry`)") from None
    except json.JSONDecodeError as exc:
        raise DeploymentError(f"deployment record {p} is not valid JSON: {exc}") from None
    try:
        contracts = {}
        for name, c in doc["contracts"].items():
            if not isinstance(c.get("abi"), list):
                raise DeploymentError(f"deployment record {p}: contracts.{name}.abi is missing or not a list")
            contracts[name] = ContractRecord(name, to_checksum_address(c["address"]), c["abi"])
        return Deployment(path=p, network=str(doc.get("network", "?")), chain_id=int(doc["chain_id"]),
                          deploy_block=int(doc.get("deploy_block", 0)), contracts=contracts,
                          rpc_url=doc.get("rpc_url"), deployer=doc.get("deployer"),
                          verifier_precompile=doc.get("verifier_precompile"),
                          genesis_hash=doc.get("genesis_hash"), ipfs_url=doc.get("ipfs_url"))
    except KeyError as exc:
        raise DeploymentError(f"deployment record {p} lacks field {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise DeploymentError(f"deployment record {p} is malformed: {exc}") from None


# ----------------------------------------------------------------------------- EIP-712


def outer_gradient_typed_data(chain_id: int, registry: str, task_id: bytes, round: int, fragment: int,
                              base_root: bytes, payload: SignedPayload) -> dict[str, Any]:
    """EIP-712 message a trainer signs for ``submitOuterGradient`` (PROTOCOL.md §4):
    ``OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,bytes32 baseRoot,bytes32 payloadRoot,
    uint32 payloadSumsq,string cid,bytes32 payloadHash)``, domain ``{name: "TenzroTrainingRegistry",
    version: "2", chainId, verifyingContract}``; ``base_root`` is the run's weightsRoot while the round
    is open (the weights the trainer started from)."""
    return {
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                             {"name": "chainId", "type": "uint256"},
                             {"name": "verifyingContract", "type": "address"}],
            "OuterGradient": [{"name": "taskId", "type": "bytes32"}, {"name": "round", "type": "uint32"},
                              {"name": "fragment", "type": "uint16"}, {"name": "baseRoot", "type": "bytes32"},
                              {"name": "payloadRoot", "type": "bytes32"},
                              {"name": "payloadSumsq", "type": "uint32"}, {"name": "cid", "type": "string"},
                              {"name": "payloadHash", "type": "bytes32"}],
        },
        "primaryType": "OuterGradient",
        "domain": {"name": EIP712_DOMAIN_NAME, "version": EIP712_DOMAIN_VERSION, "chainId": chain_id,
                   "verifyingContract": to_checksum_address(registry)},
        "message": {"taskId": _b32(task_id), "round": int(round), "fragment": int(fragment),
                    "baseRoot": _b32(base_root), "payloadRoot": _b32(payload.payload_root),
                    "payloadSumsq": int(payload.payload_sumsq), "cid": payload.cid,
                    "payloadHash": _b32(payload.payload_hash)},
    }


def sign_outer_gradient(account: LocalAccount, chain_id: int, registry: str, task_id: bytes, round: int,
                        fragment: int, base_root: bytes, payload: SignedPayload) -> SignedPayload:
    """``payload`` with the trainer's 65-byte (r, s, v) signature over `outer_gradient_typed_data`."""
    msg = encode_typed_data(full_message=outer_gradient_typed_data(chain_id, registry, task_id, round, fragment,
                                                                     base_root, payload))
    return dataclasses.replace(payload, signature=bytes(account.sign_message(msg).signature))


def outer_gradient_digest(chain_id: int, registry: str, task_id: bytes, round: int, fragment: int,
                          base_root: bytes, payload: SignedPayload) -> bytes:
    """The 32-byte EIP-712 digest (``keccak(0x1901 || domainSeparator || structHash)``)."""
    m = encode_typed_data(full_message=outer_gradient_typed_data(chain_id, registry, task_id, round, fragment,
                                                                   base_root, payload))
    return keccak(b"\x19" + m.version + m.header + m.body)


SUBMISSION_COMMITMENT_TYPE = "SubmissionCommitment(bytes32 taskId,uint32 round,uint16 fragment,bytes32 commitment)"
_SUBMISSION_COMMITMENT_TYPEHASH = keccak(SUBMISSION_COMMITMENT_TYPE.encode())
_DOMAIN_TYPEHASH = keccak(b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")


@functools.lru_cache(maxsize=16)
def registry_domain_separator(chain_id: int, registry: str) -> bytes:
    """The registry's EIP-712 domain separator (the ``OuterGradient`` one: name, version, chain id, address)."""
    return keccak(_DOMAIN_TYPEHASH + keccak(EIP712_DOMAIN_NAME.encode()) + keccak(EIP712_DOMAIN_VERSION.encode())
                  + int(chain_id).to_bytes(32, "big") + bytes(12) + bytes.fromhex(registry[2:]))


def submission_commitment_digest(chain_id: int, registry: str, task_id: bytes, round: int, fragment: int,
                                 commitment: bytes) -> bytes:
    """The 32-byte EIP-712 digest a trainer signs for an off-chain commitment (PROTOCOL.md §5):
    ``SubmissionCommitment(bytes32 taskId,uint32 round,uint16 fragment,bytes32 commitment)`` under
    the registry's domain (`outer_gradient_typed_data`'s). Off-chain only: the registry never reads
    it; the syncer keeps a commitment only when it recovers to the trainer it names. Computed with
    keccak directly (no typed-data encoder): the syncer computes one per commitment it receives.

    Raises:
        ValueError: a field out of its type's range (task id or commitment not 32 bytes).
    """
    if len(task_id) != 32 or len(commitment) != 32 or not 0 <= round < 2**32 or not 0 <= fragment < 2**16:
        raise ValueError("task id and commitment must be 32 bytes, round a uint32, fragment a uint16")
    struct = keccak(_SUBMISSION_COMMITMENT_TYPEHASH + bytes(task_id) + int(round).to_bytes(32, "big")
                    + int(fragment).to_bytes(32, "big") + bytes(commitment))
    return keccak(b"\x19\x01" + registry_domain_separator(int(chain_id), registry.lower()) + struct)


def sign_submission_commitment(account: LocalAccount, chain_id: int, registry: str, task_id: bytes, round: int,
                               fragment: int, commitment: bytes) -> bytes:
    """The trainer's 65-byte (r, s, v) signature over `submission_commitment_digest`."""
    digest = submission_commitment_digest(chain_id, registry, task_id, round, fragment, commitment)
    return bytes(account.unsafe_sign_hash(digest).signature)


# ----------------------------------------------------------------------------- errors from ABIs


class ErrorDecoder:
    """Maps 4-byte selectors of every custom error in a set of ABIs to (name, input names, types)."""

    BUILTIN = {
        bytes.fromhex("08c379a0"): ("Error", ["message"], ["string"]),
        bytes.fromhex("4e487b71"): ("Panic", ["code"], ["uint256"]),
    }

    def __init__(self, abis: Iterable[list[dict[str, Any]]]) -> None:
        self.errors: dict[bytes, tuple[str, list[str], list[str]]] = dict(self.BUILTIN)
        for abi in abis:
            for item in abi:
                if item.get("type") != "error":
                    continue
                types = list(get_abi_input_types(item))
                sel = keccak(text=abi_to_signature(item))[:4]
                self.errors[sel] = (item["name"], [i.get("name") or f"arg{n}" for n, i in
                                                   enumerate(item.get("inputs", []))], types)

    def decode(self, data: bytes | str | None, function: str = "") -> ChainRevert:
        if isinstance(data, str):
            s = data[2:] if data.startswith("0x") else data
            try:
                data = bytes.fromhex(s)
            except ValueError:
                return ChainRevert("<unknown>", (data,), function)
        data = data or b""
        if len(data) < 4:
            return ChainRevert("<no reason>" if not data else "<unknown>", (), function, data)
        entry = self.errors.get(data[:4])
        if entry is None:
            return ChainRevert("<unknown>", ("0x" + data.hex(),), function, data)
        name, names, types = entry
        try:
            values = abi_decode(types, data[4:])
        except Exception:  # noqa: BLE001 - malformed revert data: report raw
            return ChainRevert(name, ("0x" + data[4:].hex(),), function, data)
        values = [to_checksum_address(v) if t == "address" else v for t, v in zip(types, values)]
        return ChainRevert(name, dict(zip(names, values)), function, data)


def _os_cause(exc: BaseException) -> OSError | None:
    """The operating system's error under a client library's wrapping (requests -> urllib3's
    MaxRetryError -> NewConnectionError -> ConnectionRefusedError), if there is one."""
    seen, cur = set(), exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.strerror:
            return cur
        reason = getattr(cur, "reason", None)
        cur = reason if isinstance(reason, BaseException) else (cur.__cause__ or cur.__context__)
    return None


def _why(exc: BaseException | None) -> str:
    """``"TypeName: message"`` for logs and error messages: the operating system's error when a
    library wraps one (``ConnectionRefusedError: Connection refused``, not 400 characters of urllib3),
    else the message cut to 200 characters."""
    if exc is None:
        return "?"
    root = _os_cause(exc)
    if root is not None:
        return f"{type(root).__name__}: {root.strerror}"
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _revert_data(exc: Exception) -> bytes | str | None:
    data = getattr(exc, "data", None)
    if isinstance(data, dict):  # some nodes nest it
        data = data.get("data")
    if data is None and isinstance(exc, Web3RPCError):
        rpc = getattr(exc, "rpc_response", None) or {}
        data = (rpc.get("error") or {}).get("data")
        if isinstance(data, dict):
            data = data.get("data")
    return data


def _to_named(abi_params: list[dict[str, Any]], values: Sequence[Any]) -> dict[str, Any]:
    """Tuple values of ABI outputs/components -> dict by name, recursively (web3 returns tuples)."""
    out = {}
    for i, (p, v) in enumerate(zip(abi_params, values)):
        out[p.get("name") or f"out{i}"] = _named_value(p, v)
    return out


def _named_value(p: dict[str, Any], v: Any) -> Any:
    t = p.get("type", "")
    if t == "tuple" and isinstance(v, (tuple, list)):
        return _to_named(p["components"], v)
    if t.startswith("tuple[") and isinstance(v, (tuple, list)):
        return [_to_named(p["components"], x) if isinstance(x, (tuple, list)) else x for x in v]
    if isinstance(v, (tuple, list)):
        return list(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return v


def _normalize_event_args(args: Any) -> Any:
    if hasattr(args, "items"):
        return {k: _normalize_event_args(v) for k, v in args.items()}
    if isinstance(args, (list, tuple)):
        return [_normalize_event_args(x) for x in args]
    if isinstance(args, (bytes, bytearray)):
        return bytes(args)
    return args


# ----------------------------------------------------------------------------- client


class ChainClient:
    """The operator's view of the chain: registry, token, verifier (see module docstring).

    Args:
        rpc_url: JSON-RPC endpoint (``http://127.0.0.1:8545``).
        deployments_path: ``deployments/<network>.json``.
        account: signing account (`tenzro_operator.keys.unlock`); None = read-only.
        timeout_s: HTTP timeout per RPC request (seconds).
        retries: attempts per RPC request on connection errors (>= 1).
        backoff_s: first retry delay; doubles up to ``max_backoff_s`` (seconds).
        receipt_timeout_s: how long to poll for a receipt (seconds).
        replace_after_s: a transaction not mined after this many seconds is sent again on the same
            nonce with fees bumped by 12.5 % (capped); None = never replace.
        max_fee_per_gas: fee cap in wei per gas (EIP-1559 ``maxFeePerGas``, legacy ``gasPrice``);
            None = no cap. A network asking more raises `FeeCapExceeded` (nothing is sent).
        check: run the start-up checks (chain id, code at every address).
        metrics: a `tenzro_operator.metrics.RoleMetrics` (tx counters), optional.
    Raises:
        RpcUnavailable: the endpoint does not answer after the retries.
        DeploymentError: bad record, wrong chain id, or no code at a recorded address.
    """

    def __init__(self, rpc_url: str, deployments_path: str | Path, account: LocalAccount | None = None, *,
                 timeout_s: float = 10.0, retries: int = 5, backoff_s: float = 0.25, max_backoff_s: float = 4.0,
                 receipt_timeout_s: float = 60.0, poll_s: float = 0.05, check: bool = True,
                 replace_after_s: float | None = 20.0, max_fee_per_gas: int | None = None,
                 metrics: Any = None, _shared: "ChainClient | None" = None) -> None:
        self.rpc_url = rpc_url.rstrip("/")
        self.shown_url = redact_url(self.rpc_url)  # what messages, pages and logs show (no API key)
        self.replace_after_s, self.max_fee_per_gas = replace_after_s, max_fee_per_gas
        self.account = account
        self.retries = max(1, retries)
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.receipt_timeout_s, self.poll_s = receipt_timeout_s, poll_s
        self.metrics = metrics
        self._nonce_lock = threading.Lock()
        self._next_nonce: int | None = None
        self._permit_ok: bool | None = None  # supports_permit(), once asked
        self._permit_domain: PermitDomain | None = None
        if _shared is not None:
            self.w3, self.deployment, self.chain_id = _shared.w3, _shared.deployment, _shared.chain_id
            self._contracts, self._errors, self._events = _shared._contracts, _shared._errors, _shared._events
            return
        self.deployment = load_deployment(deployments_path)
        self.w3 = Web3(HTTPProvider(self.rpc_url, request_kwargs={"timeout": timeout_s},
                                    exception_retry_configuration=None))
        self.chain_id = self._rpc("eth_chainId", lambda: self.w3.eth.chain_id)
        if self.chain_id != self.deployment.chain_id:
            raise DeploymentError(f"{self.shown_url} is chain {self.chain_id} but {self.deployment.path} was "
                                  f"deployed on chain {self.deployment.chain_id}")
        self._contracts = {name: self.w3.eth.contract(address=rec.address, abi=rec.abi)
                           for name, rec in self.deployment.contracts.items()}
        self._errors = ErrorDecoder(rec.abi for rec in self.deployment.contracts.values())
        self._events = self._index_events()
        if check:
            self.check_deployment()

    # -- construction helpers -------------------------------------------------------------

    def with_account(self, account: LocalAccount | None) -> "ChainClient":
        """Another client on the same connection and deployment, signing as ``account``
        (its own nonce counter: use one client per account)."""
        return ChainClient(self.rpc_url, self.deployment.path, account, retries=self.retries,
                           backoff_s=self.backoff_s, max_backoff_s=self.max_backoff_s,
                           receipt_timeout_s=self.receipt_timeout_s, poll_s=self.poll_s,
                           replace_after_s=self.replace_after_s, max_fee_per_gas=self.max_fee_per_gas,
                           metrics=self.metrics, _shared=self)

    def check_deployment(self) -> None:
        """Fail fast: the chain must be the one the record was written on (its block 0 hash, when
        the record has one: every fresh anvil has the same chain id and contract addresses, but its
        own genesis block), and code must exist at every recorded address (and at the verifier
        precompile)."""
        if self.deployment.genesis_hash:
            got = self.block_hash(0)
            if got.lower() != self.deployment.genesis_hash.lower():
                raise DeploymentError(
                    f"{self.shown_url} is not the chain {self.deployment.path} was deployed on: its block 0 is "
                    f"{got}, the record's {self.deployment.genesis_hash} (another devnet answers there, or the "
                    f"chain was reset): pass the right --rpc / TENZRO_NODE_RPC, or deploy again")
        targets = {name: rec.address for name, rec in self.deployment.contracts.items()}
        if self.deployment.verifier_precompile:
            targets["verifier precompile"] = to_checksum_address(self.deployment.verifier_precompile)
        for name, addr in targets.items():
            code = self._rpc("eth_getCode", lambda a=addr: self.w3.eth.get_code(a))
            if not code:
                raise DeploymentError(f"no contract code at {addr} ({name}) on {self.shown_url}; the chain was "
                                      f"reset or {self.deployment.path} is stale: deploy again")

    @property
    def address(self) -> str:
        """The signing account's checksummed address."""
        if self.account is None:
            raise ChainError("this chain client has no account (read-only): pass --keystore")
        return self.account.address

    @property
    def registry(self):
        return self.contract(REGISTRY)

    @property
    def token(self):
        return self.contract(TOKEN)

    def contract(self, name: str):
        """The web3 contract object of a deployed contract by name."""
        try:
            return self._contracts[name]
        except KeyError:
            raise DeploymentError(f"{self.deployment.path} has no contract {name!r}") from None

    # -- RPC with retries -----------------------------------------------------------------

    def _rpc(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run one RPC operation; retry connection errors, timeouts, HTTP 429 / 5xx and JSON-RPC
        errors that say the node is busy or rate-limiting (`_TRANSIENT_RPC`) with exponential
        backoff (``backoff_s`` doubling up to ``max_backoff_s``, ``retries`` attempts in all).

        Raises:
            RpcUnavailable: still failing after the retries (the cause named).
            ChainError: an HTTP error that retrying will not mend (4xx other than 429).
            Web3RPCError / ContractLogicError: every other JSON-RPC error, for the caller to decode.
        """
        delay = self.backoff_s
        last: Exception | None = None
        for attempt in range(1, self.retries + 1):
            try:
                return fn()
            except (*CONNECTION_ERRORS, requests.exceptions.HTTPError) as exc:
                status = getattr(getattr(exc, "response", None), "status_code", None)
                if isinstance(exc, requests.exceptions.HTTPError) and (status is None or (status < 500
                                                                                          and status != 429)):
                    raise ChainError(f"RPC {what} to {self.shown_url} failed: HTTP {status}") from exc
                last = exc
            except Web3RPCError as exc:
                if isinstance(exc, ContractLogicError) or not _TRANSIENT_RPC.search(str(exc)):
                    raise
                last = exc
            if attempt == self.retries:
                break
            log.warning("RPC %s to %s failed (%s); retry %d/%d in %.2f s", what, self.shown_url,
                        scrub(_why(last), self.rpc_url), attempt, self.retries - 1, delay)
            time.sleep(delay)
            delay = min(delay * 2, self.max_backoff_s)
        raise RpcUnavailable(self.rpc_url, self.retries, f"{what}: {_why(last)}") from last

    def block_number(self) -> int:
        return self._rpc("eth_blockNumber", lambda: self.w3.eth.block_number)

    def block_hash(self, block: int | str = "latest") -> str:
        """0x-hex hash of a block (block 0: the chain's genesis, what tells two devnets apart)."""
        b = self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block(block))
        return "0x" + bytes(b["hash"]).hex()

    def block_header(self, block: int | str) -> dict[str, Any] | None:
        """``{"number", "hash", "parent_hash", "bloom", "timestamp"}`` of a block (hashes 0x-hex,
        ``bloom`` the ``logsBloom`` as an int, ``timestamp`` unix seconds), or None when this node
        does not have it (it lags behind the block, or a reorg removed it).

        Raises:
            RpcUnavailable: the node does not answer (after the retries).
        """
        try:
            b = self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block(block))
        except BlockNotFound:
            return None
        return {"number": int(b["number"]), "hash": "0x" + bytes(b["hash"]).hex(),
                "timestamp": int(b["timestamp"]),
                "parent_hash": "0x" + bytes(b["parentHash"]).hex(),
                "bloom": int.from_bytes(bytes(b["logsBloom"]), "big")}

    def block_timestamp(self, block: int | str = "latest") -> int:
        """Timestamp (unix seconds) of a block."""
        return int(self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block(block))["timestamp"])

    def next_block_time(self) -> int:
        """The earliest timestamp (unix seconds) the next block can carry: the later of the head
        block's and the pending block's (a node that builds one, as anvil does, stamps it with its
        own clock). The head alone runs behind on a chain with no block for a while (a devnet
        between transactions): a deadline counted from it may have passed when the transaction
        is mined. A node without a pending block gives the head's."""
        head = self.block_timestamp("latest")
        try:
            return max(head, self.block_timestamp("pending"))
        except (ChainError, Web3RPCError, ValueError, TypeError):
            return head

    def first_block_at(self, timestamp: int) -> int:
        """The first block at or after the deploy block whose timestamp (unix seconds) is >=
        ``timestamp``, by binary search (block timestamps never decrease): about log2(head -
        deploy block) ``eth_getBlockByNumber`` calls. Returns head + 1 when no block is that late.

        Used to start event scans of a run at its ``posted_at`` rather than at the deploy block
        (a block in the same second may come before the posting block: scans start early, never late).
        """
        lo, hi = self.deployment.deploy_block, self.block_number() + 1
        while lo < hi:
            mid = (lo + hi) // 2
            header = self.block_header(mid)  # None: a lagging node lacks it; searching earlier is safe
            if header is None or header["timestamp"] >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def run_start_block(self, run: "RunView") -> int:
        """First block to scan for the events of ``run``: `first_block_at` its ``posted_at``."""
        return self.first_block_at(run.posted_at) if run.posted_at else self.deployment.deploy_block

    def balance_eth(self, address: str | None = None) -> int:
        """Native balance in wei."""
        return self._rpc("eth_getBalance", lambda: self.w3.eth.get_balance(address or self.address))

    # -- calls ----------------------------------------------------------------------------

    def _fn(self, contract: str, method: str, *args: Any):
        c = self.contract(contract)
        try:
            return getattr(c.functions, method)(*args)
        except AttributeError:
            raise DeploymentError(f"{contract} in {self.deployment.path} has no function {method}") from None

    def call(self, method: str, *args: Any, contract: str = REGISTRY, block: int | str = "latest") -> Any:
        """A view call; raises `ChainRevert` with the decoded error if it reverts."""
        fn = self._fn(contract, method, *args)
        try:
            return self._rpc(f"{contract}.{method}", lambda: fn.call(block_identifier=block))
        except (ContractLogicError, Web3RPCError) as exc:
            data = _revert_data(exc)
            if data is None and not isinstance(exc, ContractLogicError):
                raise ChainError(f"{contract}.{method} failed: {exc}") from None
            raise self._errors.decode(data, f"{contract}.{method}") from None

    def call_named(self, method: str, *args: Any, contract: str = REGISTRY) -> dict[str, Any]:
        """A view call whose outputs come back as a dict by ABI name (structs as dicts)."""
        value = self.call(method, *args, contract=contract)
        outputs = self._fn(contract, method, *args).abi["outputs"]
        values = (value,) if len(outputs) == 1 else tuple(value)
        return _to_named(outputs, values)

    # -- transactions ---------------------------------------------------------------------

    def resync_nonce(self) -> None:
        """Forget the local nonce counter; the next transaction reads it from the node."""
        with self._nonce_lock:
            self._next_nonce = None

    def estimate(self, method: str, *args: Any, contract: str = REGISTRY, value: int = 0) -> int:
        """Gas estimate; raises `ChainRevert` (decoded) if the transaction would revert."""
        fn = self._fn(contract, method, *args)
        try:
            return self._rpc(f"estimate {method}", lambda: fn.estimate_gas({"from": self.address, "value": value}))
        except (ContractLogicError, Web3RPCError) as exc:
            data = _revert_data(exc)
            if data is None and not isinstance(exc, ContractLogicError):
                raise ChainError(f"estimating {contract}.{method} failed: {exc}") from None
            err = self._errors.decode(data, f"{contract}.{method}")
            if self.metrics is not None:
                self.metrics.tx_failed(method, err.error_name)
            raise err from None

    def send(self, method: str, *args: Any, contract: str = REGISTRY, value: int = 0,
             gas: int | None = None) -> PendingTx:
        """Estimate (refusing reverts), apply the fee cap, sign with the next local nonce and
        broadcast; do not wait.

        A broadcast whose answer is lost is not signed again: when the node then says the nonce
        is used ("nonce too low", "already known") or stops answering, the signed hash is looked
        up first (`_tx_known`); if the node has it, that transaction is the one returned.

        Raises:
            ChainRevert: the estimate reverted (nothing is sent, no nonce is used).
            FeeCapExceeded: the network's fee is above ``max_fee_per_gas`` (nothing is sent).
            RpcUnavailable: the endpoint is down (and the node does not show the transaction).
        """
        if self.account is None:
            raise ChainError(f"cannot send {method}: this chain client has no account")
        gas_limit = gas or int(self.estimate(method, *args, contract=contract, value=value) * 1.25) + 20_000
        fn = self._fn(contract, method, *args)
        # Fees and calldata outside the lock; nonce, signature and broadcast inside it, so that
        # transactions reach the node in nonce order (a gap would stall an automining devnet).
        tx = self._rpc(f"build {method}", lambda: fn.build_transaction(
            {"from": self.address, "nonce": 0, "gas": gas_limit, "chainId": self.chain_id, "value": value}))
        tx = self._cap_fees(dict(tx), method)
        with self._nonce_lock:
            for attempt in range(2):
                if self._next_nonce is None:
                    self._next_nonce = self._rpc("eth_getTransactionCount", lambda: self.w3.eth.get_transaction_count(
                        self.address, "pending"))
                nonce = self._next_nonce
                signed = self.account.sign_transaction(dict(tx, nonce=nonce))
                tx_hash = "0x" + bytes(signed.hash).hex()
                pending = PendingTx(tx_hash, nonce, method, time.monotonic(), dict(tx, nonce=nonce))
                try:
                    self._rpc(f"send {method}", lambda: self.w3.eth.send_raw_transaction(signed.raw_transaction))
                except Web3RPCError as exc:
                    text = str(exc)
                    if "already known" in text.lower() or (_NONCE_ERROR.search(text) and self._tx_known(tx_hash)):
                        # our own broadcast got through earlier and its answer was lost: it is this one
                        log.warning("%s nonce=%d: the node already has tx %s (an earlier answer was lost); "
                                    "not sending it again", method, nonce, tx_hash)
                        self._next_nonce = nonce + 1
                        return self._sent(pending)
                    self._next_nonce = None
                    if _NONCE_ERROR.search(text) and attempt == 0:
                        log.warning("nonce %d for %s rejected (%s); resyncing from the node", nonce, method, text)
                        continue
                    if self.metrics is not None:
                        self.metrics.tx_failed(method, "send")
                    raise ChainError(f"sending {contract}.{method} failed: {text}") from exc
                except RpcUnavailable:
                    self._next_nonce = None
                    try:
                        known = self._tx_known(tx_hash)
                    except RpcUnavailable:
                        known = False
                    if known:
                        self._next_nonce = nonce + 1
                        return self._sent(pending)
                    log.warning("%s nonce=%d: broadcast of tx %s is uncertain (the endpoint stopped answering); "
                                "the next send re-reads the nonce from the node", method, nonce, tx_hash)
                    raise
                self._next_nonce = nonce + 1
                return self._sent(pending)
        raise ChainError(f"sending {contract}.{method} failed: nonce kept being rejected")  # pragma: no cover

    def _sent(self, pending: PendingTx) -> PendingTx:
        if self.metrics is not None:
            self.metrics.tx_sent(pending.method)
        log.debug("sent %s nonce=%d tx=%s", pending.method, pending.nonce, pending.tx_hash)
        return pending

    def _tx_known(self, tx_hash: str) -> bool:
        """True iff the node has the transaction ``tx_hash`` (pending or mined)."""
        try:
            return self._rpc("eth_getTransactionByHash", lambda: self.w3.eth.get_transaction(tx_hash)) is not None
        except TransactionNotFound:
            return False

    def _cap_fees(self, tx: dict[str, Any], method: str) -> dict[str, Any]:
        """Hold the fees of ``tx`` at or under ``max_fee_per_gas`` (wei per gas): an EIP-1559 fee
        above the cap is lowered to it while it still covers the latest base fee plus the tip.

        Raises:
            FeeCapExceeded: the latest base fee plus the tip (or the legacy gas price) is above the cap.
        """
        cap = self.max_fee_per_gas
        if cap is None:
            return tx
        if "maxFeePerGas" in tx:
            if int(tx["maxFeePerGas"]) <= cap:
                return tx
            base = int(self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block("latest")).get(
                "baseFeePerGas", 0))
            tip = min(int(tx.get("maxPriorityFeePerGas", 0)), cap)
            if base + tip > cap:
                raise FeeCapExceeded(f"{method}: the network asks {base + tip} wei/gas (base fee {base} + tip "
                                     f"{tip}), above the cap max_fee_per_gas={cap}; not sent")
            return dict(tx, maxFeePerGas=cap, maxPriorityFeePerGas=tip)
        if int(tx.get("gasPrice", 0)) > cap:
            raise FeeCapExceeded(f"{method}: gas price {tx['gasPrice']} wei above the cap max_fee_per_gas={cap}; "
                                 "not sent")
        return tx

    def _bumped(self, tx: dict[str, Any]) -> dict[str, Any] | None:
        """``tx`` with every fee raised by `FEE_BUMP` (+1 wei), or None when the cap leaves no room
        for a replacement (a node needs >= 10 % more to take it)."""
        num, den = FEE_BUMP
        keys = ("maxFeePerGas", "maxPriorityFeePerGas") if "maxFeePerGas" in tx else ("gasPrice",)
        out = dict(tx)
        for k in keys:
            out[k] = int(tx[k]) * num // den + 1
        cap = self.max_fee_per_gas
        if cap is not None:
            top = "maxFeePerGas" if "maxFeePerGas" in tx else "gasPrice"
            if out[top] > cap:
                out[top] = cap
                if out[top] * 10 < int(tx[top]) * 11:
                    return None
                if "maxPriorityFeePerGas" in out:
                    out["maxPriorityFeePerGas"] = min(out["maxPriorityFeePerGas"], cap)
        return out

    def _replace(self, pending: PendingTx) -> bool:
        """Broadcast a fee-bumped copy of ``pending`` on its nonce; True if one went out."""
        bumped = self._bumped(pending.tx) if pending.tx else None
        if bumped is None:
            return False
        signed = self.account.sign_transaction(bumped)
        new_hash = "0x" + bytes(signed.hash).hex()
        try:
            self._rpc(f"replace {pending.method}", lambda: self.w3.eth.send_raw_transaction(signed.raw_transaction))
        except Web3RPCError as exc:  # mined meanwhile ("nonce too low"), or the node wants more: keep polling
            log.info("replacement of %s nonce=%d not taken: %s", pending.method, pending.nonce, exc)
            return False
        pending.tx = bumped
        pending.hashes.append(new_hash)
        pending.tx_hash = new_hash
        log.warning("%s nonce=%d not mined after %.0f s: replaced by tx %s with fees x%d/%d (%s)", pending.method,
                    pending.nonce, self.replace_after_s, new_hash, *FEE_BUMP,
                    ", ".join(f"{k}={bumped[k]}" for k in ("maxFeePerGas", "maxPriorityFeePerGas", "gasPrice")
                              if k in bumped))
        return True

    def _receipt_of(self, pending: PendingTx) -> tuple[str, Any] | None:
        """``(hash, receipt)`` of whichever broadcast of ``pending`` was mined, else None."""
        for h in list(pending.hashes):
            try:
                rcpt = self._rpc("eth_getTransactionReceipt", lambda h=h: self.w3.eth.get_transaction_receipt(h))
            except TransactionNotFound:
                continue
            if rcpt is not None:
                return h, rcpt
        return None

    def wait(self, pending: PendingTx, timeout_s: float | None = None) -> TxResult:
        """Poll for the receipt (bounded; ``receipt_timeout_s`` by default) and decode its events.
        Every ``replace_after_s`` seconds without a receipt the transaction is replaced on the same
        nonce with bumped fees (`_bumped`); whichever broadcast is mined is the result.

        Raises:
            TxReverted: mined with status 0, the reason decoded (a `ChainRevert` and a `TxFailed`).
            TxFailed: no receipt within the timeout (the nonce counter is resynced), or status 0
                with no recoverable reason.
        """
        timeout = self.receipt_timeout_s if timeout_s is None else timeout_s
        start = last_broadcast = time.monotonic()
        while True:
            found = self._receipt_of(pending)
            if found is not None:
                break
            now = time.monotonic()
            if now - start > timeout:
                self.resync_nonce()
                if self.metrics is not None:
                    self.metrics.tx_failed(pending.method, "timeout")
                raise TxFailed(f"{pending.method} tx {pending.tx_hash} (nonce {pending.nonce}) was not mined within "
                               f"{timeout:.0f} s")
            if self.replace_after_s is not None and now - last_broadcast >= self.replace_after_s \
                    and self.account is not None:
                self._replace(pending)
                last_broadcast = now
            time.sleep(self.poll_s)
        tx_hash, rcpt = found
        pending.tx_hash = tx_hash
        result = TxResult(tx_hash=tx_hash, block_number=rcpt["blockNumber"], gas_used=rcpt["gasUsed"],
                          status=rcpt["status"], method=pending.method, events=self.decode_logs(rcpt["logs"]))
        if rcpt["status"] != 1:
            if self.metrics is not None:
                self.metrics.tx_failed(pending.method, "reverted")
            reason = self._replay_revert(pending, result.block_number)
            if reason is not None:
                raise TxReverted(reason.error_name, reason.args_, reason.function, reason.data, tx_hash=tx_hash,
                                 block=result.block_number)
            limit = pending.tx.get("gas")
            why = (f"it used all its gas ({result.gas_used}): out of gas" if limit and result.gas_used >= limit
                   else "the reason could not be recovered")
            raise TxFailed(f"{pending.method} tx {tx_hash} reverted on-chain (block {result.block_number}); {why}")
        return result

    def _replay_revert(self, pending: PendingTx, block: int) -> ChainRevert | None:
        """The reason a mined transaction reverted: from the node's trace of the transaction itself
        (``debug_traceTransaction``, exact: its own block's time and the transactions before it in
        the block) where the node serves one (anvil, geth, reth), else by re-running it as a call
        on the state before its block (exact only when nothing in its block came first and nothing
        depended on the block's time). None when it can not be recovered: the node has no trace
        and the replay succeeds, or it ran out of gas (no revert data), or the node does not answer."""
        traced = self._traced_revert(pending)
        if traced is not None:
            return traced
        try:
            tx = self._rpc("eth_getTransactionByHash", lambda: self.w3.eth.get_transaction(pending.tx_hash))
            self._rpc("eth_call replay", lambda: self.w3.eth.call(
                {"from": tx["from"], "to": tx["to"], "data": tx["input"], "value": tx["value"], "gas": tx["gas"]},
                block_identifier=max(0, block - 1)))
        except (ContractLogicError, Web3RPCError) as exc:
            data = _revert_data(exc)
            return self._errors.decode(data, pending.method) if data is not None else None
        except (ChainError, TransactionNotFound) as exc:
            log.warning("could not replay reverted tx %s for its reason: %s", pending.tx_hash, _why(exc))
            return None
        return None

    def _traced_revert(self, pending: PendingTx) -> ChainRevert | None:
        """The revert data of a mined transaction from ``debug_traceTransaction``'s call tracer,
        decoded; None when the node serves no trace or the trace carries no revert data."""
        try:
            answer = self._rpc("debug_traceTransaction", lambda: self.w3.provider.make_request(
                "debug_traceTransaction", [pending.tx_hash, {"tracer": "callTracer"}]))
        except (ChainError, Web3RPCError, ValueError) as exc:
            log.debug("no trace of reverted tx %s: %s", pending.tx_hash, _why(exc))
            return None
        output = (answer.get("result") or {}).get("output") if isinstance(answer, dict) else None
        if not isinstance(output, str) or len(output) < 10:
            return None
        return self._errors.decode(output, pending.method)

    def transact(self, method: str, *args: Any, contract: str = REGISTRY, value: int = 0,
                 gas: int | None = None) -> TxResult:
        """`send` then `wait`."""
        return self.wait(self.send(method, *args, contract=contract, value=value, gas=gas))

    # -- events ---------------------------------------------------------------------------

    def _index_events(self) -> dict[bytes, tuple[str, str]]:
        idx: dict[bytes, tuple[str, str]] = {}
        for cname, rec in self.deployment.contracts.items():
            for item in rec.abi:
                if item.get("type") == "event" and not item.get("anonymous"):
                    idx[keccak(text=abi_to_signature(item))] = (cname, item["name"])
        return idx

    def event_topic(self, name: str, contract: str = REGISTRY) -> bytes:
        """topic0 of an event of a deployed contract."""
        for topic, (c, n) in self._events.items():
            if c == contract and n == name:
                return topic
        raise DeploymentError(f"{contract} in {self.deployment.path} has no event {name}")

    def decode_log(self, raw_log: Any) -> tuple[str, dict[str, Any]] | None:
        """(event name, args) of a raw log from a deployed contract, or None if unknown."""
        topics = raw_log["topics"]
        if not topics:
            return None
        entry = self._events.get(bytes(topics[0]))
        if entry is None:
            return None
        cname, ename = entry
        if to_checksum_address(raw_log["address"]) != self.deployment.contracts[cname].address:
            return None
        ev = getattr(self.contract(cname).events, ename)()
        data = ev.process_log(raw_log)
        return ename, _normalize_event_args(data["args"])

    def decode_logs(self, raw_logs: Iterable[Any]) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for lg in raw_logs:
            d = self.decode_log(lg)
            if d is not None:
                out.append(d)
        return out

    def get_logs(self, from_block: int, to_block: int, event_names: Sequence[str] | None = None,
                 contract: str = REGISTRY, task_id: bytes | None = None,
                 max_range: int = 5000) -> list[dict[str, Any]]:
        """``eth_getLogs`` over ``[from_block, to_block]`` (inclusive) for the contract, optionally
        only some events and one task (events whose first indexed topic is the task id: every
        registry event about a run; ``Withdrawn`` / ``Syncer*`` are keyed by address and never match).
        Long spans are split into requests of at most ``max_range`` blocks.

        Returns dicts ``{"event", "args", "block_number", "tx_hash", "log_index"}`` in chain order.
        """
        base = self._log_filter(event_names, contract, task_id)
        out = []
        start = max(0, from_block)
        while start <= to_block:
            end = min(to_block, start + max(1, max_range) - 1)
            flt = {**base, "fromBlock": start, "toBlock": end}
            out += self._decoded_logs(self._rpc("eth_getLogs", lambda f=flt: self.w3.eth.get_logs(f)))
            start = end + 1
        return out

    def get_logs_at(self, block_hash: str, event_names: Sequence[str] | None = None, contract: str = REGISTRY,
                    task_id: bytes | None = None) -> list[dict[str, Any]] | None:
        """``eth_getLogs`` of the one block with hash ``block_hash`` (EIP-234 ``blockHash`` filter),
        same filters and result shape as `get_logs`. A node that does not know the block answers an
        error instead of an empty list, so a lagging node, or a block a reorg removed, can not pass
        for a block without events: then None.

        Raises:
            RpcUnavailable: the node does not answer (after the retries).
        """
        flt = {**self._log_filter(event_names, contract, task_id), "blockHash": block_hash}
        try:
            raw = self._rpc("eth_getLogs", lambda: self.w3.eth.get_logs(flt))
        except Web3RPCError as exc:
            if _UNKNOWN_BLOCK.search(str(exc)):
                return None
            raise
        return self._decoded_logs(raw)

    def log_bloom_items(self, event_names: Sequence[str] | None = None, contract: str = REGISTRY,
                        task_id: bytes | None = None) -> list[bytes]:
        """What a block's ``logsBloom`` must contain for it to hold a log `get_logs` with these
        filters would return: the contract's address and the task id topic (event topics are
        alternatives, so they are left out)."""
        items = [bytes.fromhex(self.deployment.contracts[contract].address[2:])]
        if task_id is not None:
            items.append(_b32(task_id))
        return items

    def _log_filter(self, event_names: Sequence[str] | None, contract: str, task_id: bytes | None) -> dict:
        topic0 = [("0x" + self.event_topic(n, contract).hex()) for n in event_names] if event_names else None
        topics: list[Any] = [topic0] if topic0 else [None]
        if task_id is not None:
            topics.append("0x" + _b32(task_id).hex())
        return {"address": self.deployment.contracts[contract].address,
                "topics": topics if (topic0 or task_id is not None) else []}

    def _decoded_logs(self, raw: Iterable[Any]) -> list[dict[str, Any]]:
        out = []
        for lg in raw:
            d = self.decode_log(lg)
            if d is None:
                continue
            out.append({"event": d[0], "args": d[1], "block_number": lg["blockNumber"],
                        "block_hash": "0x" + bytes(lg["blockHash"]).hex(),
                        "tx_hash": "0x" + bytes(lg["transactionHash"]).hex(), "log_index": lg["logIndex"]})
        return out

    # -- token ----------------------------------------------------------------------------

    def token_balance(self, address: str | None = None) -> int:
        """Token balance in atto-units."""
        return self.call("balanceOf", address or self.address, contract=TOKEN)

    def allowance(self, owner: str | None = None, spender: str | None = None) -> int:
        return self.call("allowance", owner or self.address, spender or self.registry.address, contract=TOKEN)

    def approve(self, amount: int, spender: str | None = None) -> TxResult:
        """Approve ``spender`` (default the registry) for ``amount`` atto-units."""
        return self.transact("approve", spender or self.registry.address, amount, contract=TOKEN)

    def ensure_allowance(self, amount: int, spender: str | None = None) -> TxResult | None:
        """Approve ``amount`` if the allowance is lower; None if nothing was needed."""
        if self.allowance(self.address, spender or self.registry.address) >= amount:
            return None
        return self.approve(amount, spender)

    def spend_approved(self, amount: int, method: str, *args: Any) -> TxResult:
        """Registry call ``method(*args)`` that pulls ``amount`` atto-units of TNZO from this account.

        Checks the balance first (`InsufficientTokens`, nothing sent), approves exactly ``amount``
        when the allowance is lower, and when the call then fails puts the allowance back to what
        it was, so a refused ``postTask`` / ``enrollTrainer`` / ``registerSyncer`` leaves no
        approval behind.
        """
        have = self.token_balance()
        if have < amount:
            raise InsufficientTokens(self.address, have, amount, method)
        before = self.allowance()
        approved = self.approve(amount) if before < amount else None
        try:
            return self.transact(method, *args)
        except BaseException:
            if approved is not None:
                try:
                    self.approve(before)
                except ChainError as exc:  # the original failure matters more; say what is left
                    log.warning("could not reset the allowance of %s to %d after %s failed: %s",
                                self.address, before, method, exc)
            raise

    # -- token: ERC-2612 permits (one transaction, no allowance left) ---------------------

    #: How long a permit this client signs stays valid past the chain's latest block (seconds).
    PERMIT_TTL_S = 600
    #: Registry functions that take a permit instead of an allowance (``<method>WithPermit``).
    PERMIT_METHODS = ("postTask", "enrollTrainer")

    def supports_permit(self) -> bool:
        """True when the token speaks ERC-2612 + ERC-5267 (``permit``, ``nonces``, ``eip712Domain``
        in its recorded ABI, and ``eip712Domain()`` answers) and the registry has the
        ``*WithPermit`` functions; cached per client. False for an older deployment: callers
        then approve first."""
        if self._permit_ok is not None:
            return self._permit_ok
        token_fns = {i.get("name") for i in self.token.abi if i.get("type") == "function"}
        reg_fns = {i.get("name") for i in self.registry.abi if i.get("type") == "function"}
        ok = {"permit", "nonces", "eip712Domain"} <= token_fns and \
            {m + "WithPermit" for m in self.PERMIT_METHODS} <= reg_fns
        if ok:
            try:
                self._permit_domain = PermitDomain.from_eip712_domain(self.call("eip712Domain", contract=TOKEN))
            except ChainError as exc:  # ChainRevert included: the token does not answer it
                log.info("token %s has no usable EIP-712 domain (%s): approving instead of permits",
                         self.token.address, _why(exc))
                ok = False
        self._permit_ok = ok
        return ok

    def permit_domain(self) -> PermitDomain:
        """The token's EIP-712 domain, from its ``eip712Domain()``.

        Raises:
            ChainError: the token does not support permits (see `supports_permit`).
        """
        if not self.supports_permit():
            raise ChainError(f"token {self.token.address} does not support ERC-2612 permits")
        return self._permit_domain

    def sign_permit(self, value: int, deadline: int | None = None, spender: str | None = None) -> PermitSignature:
        """This account's ERC-2612 permit for ``spender`` (default the registry) to pull ``value``
        atto-units, at the token's current nonce, valid until ``deadline`` (unix seconds; default
        `PERMIT_TTL_S` after the time the next block will carry, `next_block_time`). Signs
        locally; sends nothing."""
        if deadline is None:
            deadline = self.next_block_time() + self.PERMIT_TTL_S
        nonce = self.call("nonces", self.address, contract=TOKEN)
        return sign_permit(self.account, self.permit_domain(), spender or self.registry.address, value, nonce,
                           deadline)

    def spend_permitted(self, amount: int, method: str, *args: Any) -> TxResult:
        """Registry call ``<method>WithPermit(*args, deadline, v, r, s)`` that pulls exactly
        ``amount`` atto-units of TNZO from this account under a fresh permit: one transaction,
        and the allowance it grants is spent whole (none is left, also when the call fails).

        Raises:
            InsufficientTokens: the balance is below ``amount`` (nothing signed or sent).
            ChainRevert: the registry's refusal (e.g. ``Registry__AllowanceTooLow`` when the
                permit did not apply and no allowance covers ``amount``).
        """
        if method not in self.PERMIT_METHODS:
            raise ChainError(f"{method} has no permit variant (one of {', '.join(self.PERMIT_METHODS)})")
        have = self.token_balance()
        if have < amount:
            raise InsufficientTokens(self.address, have, amount, method)
        sig = self.sign_permit(amount)
        return self.transact(method + "WithPermit", *args, sig.deadline, sig.v, sig.r, sig.s)

    def spend(self, amount: int, method: str, *args: Any) -> TxResult:
        """`spend_permitted` when the token and registry support permits, else `spend_approved`."""
        if method in self.PERMIT_METHODS and self.supports_permit():
            return self.spend_permitted(amount, method, *args)
        return self.spend_approved(amount, method, *args)

    def transfer_tokens(self, to: str, amount: int) -> TxResult:
        """Send ``amount`` atto-units of TNZO to ``to`` (``Transfer`` event)."""
        return self.transact("transfer", to_checksum_address(to), amount, contract=TOKEN)

    def set_eth_balance(self, address: str, wei: int) -> None:
        """Devnet only (anvil): set the native balance of ``address`` to ``wei``."""
        if self.chain_id not in DEVNET_CHAIN_IDS:
            raise ChainError(f"anvil_setBalance is for devnets; chain {self.chain_id} is not one")
        self._rpc("anvil_setBalance", lambda: self.w3.provider.make_request(
            "anvil_setBalance", [to_checksum_address(address), hex(int(wei))]))

    def mint(self, to: str, amount: int) -> TxResult:
        """Devnet faucet: mint ``amount`` atto-units to ``to`` (the token owner only)."""
        return self.transact("mint", to_checksum_address(to), amount, contract=TOKEN)

    # -- registry: syncer pool ------------------------------------------------------------

    def register_syncer(self, amount: int, approve: bool = True) -> TxResult:
        """Join the syncer pool with ``amount`` atto-units of stake, or add to it (approves first).

        Raises:
            ChainRevert: ``Registry__SyncerStakeTooLow`` (a first registration below
                ``minSyncerStake``), ``Registry__SyncerPoolFull``.
        """
        if approve:
            return self.spend_approved(amount, "registerSyncer", amount)
        return self.transact("registerSyncer", amount)

    def unregister_syncer(self) -> TxResult:
        """Leave the syncer pool: the first call emits ``SyncerLeaving`` (drawn in no election
        requested from then on), the second, from its ``fromBlock`` on, ``SyncerUnregistered``
        (the stake becomes withdrawable).

        Raises:
            ChainRevert: ``Registry__NotSyncerCandidate``, ``Registry__SyncerBusy``,
                ``Registry__SyncerChangePending`` (before the exit has taken effect).
        """
        return self.transact("unregisterSyncer")

    def request_syncer_election(self, task_id: bytes) -> TxResult:
        """Step 1 of an election (anyone): ``requestSyncerElection``. The run must be Training,
        without a syncer or with a replaceable one; the request's block hash seeds the draw.

        Raises:
            ChainRevert: ``Registry__ElectionPending`` (an earlier request can still be resolved),
                ``Registry__SyncerStillActive``, ``Registry__WrongStatus`` (not Training).
        """
        return self.transact("requestSyncerElection", _b32(task_id))

    def elect_syncer(self, task_id: bytes) -> str:
        """Step 2 (anyone, from the block after the request, within 256 blocks): ``electSyncer``;
        returns the elected address (the replaced syncer's bond is burned).

        Raises:
            ChainRevert: ``Registry__NoElectionRequested``, ``Registry__ElectionNotReady`` (same
                block as the request), ``Registry__ElectionExpired``, ``Registry__SyncerStillActive``,
                ``Registry__NoSyncerCandidates``.
        """
        res = self.transact("electSyncer", _b32(task_id))
        return to_checksum_address(res.event("SyncerElected")["syncer"])

    def run_syncer_election(self, task_id: bytes, *, timeout_s: float = 120.0) -> str:
        """Both steps of an election: request one (unless a request that can still be resolved is
        pending, e.g. another syncer's), wait for the next block, elect. A request that expired
        (more than 256 blocks old) is made again; if someone else resolved the election meanwhile
        the run's syncer is returned. On a devnet (chain id 31337 / 1337) an empty block is mined
        when none comes by itself (anvil mines only for transactions).

        Returns:
            the run's syncer after the election (checksummed).
        Raises:
            ChainRevert: the election cannot happen (``Registry__SyncerStillActive``,
                ``Registry__WrongStatus``, ``Registry__NoSyncerCandidates``, ...).
            ChainError: no block after the request within ``timeout_s`` seconds.
        """
        tid = _b32(task_id)
        deadline = time.monotonic() + timeout_s
        attempts = 0
        while True:
            run = self.get_run(tid)
            pending = run.election_block
            if not pending or self.block_number() > pending + ELECTION_WINDOW_BLOCKS:
                if attempts == 3:
                    raise ChainError(f"the syncer election of task 0x{tid.hex()} did not resolve after 3 requests")
                attempts += 1
                try:
                    pending = self.request_syncer_election(tid).block_number
                except ChainRevert as exc:
                    if exc.error_name != "Registry__ElectionPending":
                        raise
                    pending = int(exc.args_["requestBlock"])
            try:
                return self.elect_syncer(tid)
            except ChainRevert as exc:
                if exc.error_name == "Registry__ElectionNotReady":
                    self._wait_block_after(pending, deadline)
                elif exc.error_name == "Registry__NoElectionRequested":  # resolved by someone else meanwhile
                    syncer = self.get_run(tid).syncer
                    if syncer != ZERO_ADDRESS:
                        return syncer
                elif exc.error_name != "Registry__ElectionExpired":  # expired: request again
                    raise

    def _wait_block_after(self, block: int, deadline: float) -> None:
        """Return once the head is past ``block`` (mining an empty block on a devnet)."""
        while self.block_number() <= block:
            if self.chain_id in (31337, 1337):
                self.mine()
                continue
            if time.monotonic() > deadline:
                raise ChainError(f"no block after {block} arrived on {self.shown_url}")
            time.sleep(self.poll_s * 10)

    def claim_syncer_fee(self, task_id: bytes) -> int:
        """Once the run is Sealed or Cancelled, move this account's accrued syncer fees of ``task_id``
        to its withdrawable balance; returns the amount (atto-units).

        Raises:
            ChainRevert: ``Registry__NoSyncerFee`` (nothing accrued or already claimed),
                ``Registry__WrongStatus`` (neither Sealed nor Cancelled).
        """
        res = self.transact("claimSyncerFee", _b32(task_id))
        return int(res.event("SyncerFeeClaimed")["amount"])

    # -- registry: lifecycle --------------------------------------------------------------

    def task_params(self, spec, spec_cid: str, initial_weights_root: bytes | None = None) -> dict[str, Any]:
        """``TaskParams`` of ``postTask`` from a validated `tenzro_operator.spec.TaskSpec`.

        ``initial_weights_root`` defaults to the weights root (receipt encoding v1) of
        ``metadata.protocol.initial_weights``.
        """
        from tenzro_operator.spec import spec_hash

        p = spec.require_protocol()
        if initial_weights_root is None:
            from tenzro_operator.receipt import weights_root

            initial_weights_root = weights_root([w.sha256_bytes for w in p.initial_weights])
        return {
            "taskId": spec.task_id_bytes, "specHash": spec_hash(spec), "specCid": spec_cid,
            "initialWeightsRoot": _b32(initial_weights_root), "trainerCount": spec.trainer_count,
            "quorum": spec.quorum, "fragmentCount": spec.architecture.fragment_count,
            "innerSteps": spec.inner_steps, "maxRounds": spec.max_rounds, "graceWindowMs": spec.grace_window_ms,
            "aggregation": spec.aggregation_rule_id, "tier": spec.registry_tier,
            "minStake": p.min_stake_atto, "rewardPool": spec.reward_pool_atto,
            "fragmentSizes": list(p.fragment_sizes), "enrollmentSeconds": spec.enrollment_seconds,
            "syncerFeeBps": spec.syncer_fee_bps, "syncerBond": spec.syncer_bond_atto,
            "normScreenSq": p.norm_screen_sq_bits, "challengeSeconds": spec.challenge_seconds,
        }

    def _struct(self, method: str, index: int, values: dict[str, Any]) -> tuple:
        """Order a dict by the ABI components of input ``index`` of ``method``."""
        fn_abi = next(i for i in self.registry.abi if i.get("type") == "function" and i["name"] == method)
        comps = fn_abi["inputs"][index]["components"]
        missing = [c["name"] for c in comps if c["name"] not in values]
        if missing:
            raise ChainError(f"{method}: missing struct fields {missing}")
        return tuple(values[c["name"]] for c in comps)

    def post_task_params(self, params: dict[str, Any], approve: bool = True) -> TxResult:
        """``postTask`` with explicit ``TaskParams``; with ``approve`` the reward pool is authorized
        by a permit in the same transaction (`spend`), or approved first for a token without one."""
        struct = self._struct("postTask", 0, params)
        if approve and params["rewardPool"] > 0:
            return self.spend(params["rewardPool"], "postTask", struct)
        return self.transact("postTask", struct)

    def post_task(self, spec, spec_cid: str, approve: bool = True,
                  initial_weights_root: bytes | None = None) -> TxResult:
        """Approve the reward pool and post the task (the caller becomes the sponsor); with the
        spec's ``enrollment_allowlist`` (a tier 1 run, which nobody can enroll in before) its
        addresses are allowed next (`allow_trainers`). Returns the post's result.

        Raises:
            SpecError: the spec has no ``metadata.protocol``.
            ChainRevert: e.g. ``Registry__TaskExists``, ``Registry__QuorumExceedsTrainers``.
        """
        res = self.post_task_params(self.task_params(spec, spec_cid, initial_weights_root), approve)
        if spec.enrollment_allowlist:
            self.allow_trainers(spec.task_id_bytes, spec.enrollment_allowlist)
        return res

    def allow_trainers(self, task_id: bytes, trainers: Sequence[str]) -> TxResult:
        """``allowTrainers``: the sponsor of a tier 1 (Allowlist) run allows ``trainers`` to enroll.

        Raises:
            ChainRevert: ``Registry__NotSponsor``, ``Registry__WrongStatus`` (enrollment is over),
                ``Registry__UnsupportedTier`` (an Open run has no list).
        """
        return self.transact("allowTrainers", _b32(task_id), [to_checksum_address(t) for t in trainers])

    def enroll_trainer(self, task_id: bytes, stake: int, did: str, approve: bool = True) -> TxResult:
        """Stake ``stake`` atto-units and enroll; ``TrainerEnrolled`` carries index and shard.

        With ``approve`` the stake is authorized in the same transaction by an ERC-2612 permit
        when the token supports it (`spend`), else approved first; either way no allowance is left.
        """
        if approve:
            return self.spend(stake, "enrollTrainer", _b32(task_id), stake, did)
        return self.transact("enrollTrainer", _b32(task_id), stake, did)

    def close_enrollment(self, task_id: bytes) -> TxResult:
        """Open round 0 with the trainers enrolled so far (anyone, once the run's enrollment
        deadline has passed with >= K enrolled); ``RoundOpened`` carries the deadline.

        Raises:
            ChainRevert: ``Registry__EnrollmentStillOpen`` (before the deadline),
                ``Registry__NotEnoughEnrolled``, ``Registry__WrongStatus``.
        """
        return self.transact("closeEnrollment", _b32(task_id))

    def cancel_task(self, task_id: bytes) -> TxResult:
        """Cancel an Enrolling run: the sponsor at any time, anyone once the enrollment deadline
        has passed with fewer than K enrolled. Pool and stakes are credited back (``TaskCancelled``).

        Raises:
            ChainRevert: ``Registry__NotSponsor`` (someone else before the deadline),
                ``Registry__RunCanTrain`` (someone else, >= K enrolled), ``Registry__WrongStatus``.
        """
        return self.transact("cancelTask", _b32(task_id))

    def cancel_stalled_run(self, task_id: bytes) -> TxResult:
        """Anyone ends a Training run that cannot go on (PROTOCOL.md §4, "A run that cannot go on"):
        its syncer is replaceable and no other candidate could be elected. The silent syncer's bond
        is burned, stakes are refunded, the trainers' pot for the committed rounds is
        claimable with credit proofs, the rest of the pool goes to the sponsor (``StalledRunCancelled``).

        Raises:
            ChainRevert: ``Registry__WrongStatus`` (not Training), ``Registry__SyncerStillActive``,
                ``Registry__RunCanGoOn`` (a candidate could be elected: elect it instead),
                ``Registry__ChallengesPending``, ``Registry__ChallengeWindowOpen`` (root flow: the
                last committed round can still be proven wrong).
        """
        return self.transact("cancelStalledRun", _b32(task_id))

    def sign_outer_gradient(self, task_id: bytes, round: int, fragment: int, payload: SignedPayload,
                            base_root: bytes | None = None) -> SignedPayload:
        """EIP-712 signature of this client's account (the trainer) for a submission; ``base_root``
        defaults to the run's current weightsRoot (the open round's starting weights)."""
        if self.account is None:
            raise ChainError("signing needs an account")
        if base_root is None:
            base_root = self.get_run(task_id).weights_root
        return sign_outer_gradient(self.account, self.chain_id, self.registry.address, task_id, round, fragment,
                                   base_root, payload)

    def submit_outer_gradient(self, task_id: bytes, round: int, fragment: int, payload: SignedPayload, *,
                              base_root: bytes | None = None, wait: bool = True) -> TxResult | PendingTx:
        """Submit on-chain (the forced-inclusion path; signing with this account unless
        ``payload.signature`` is set, e.g. when relaying).

        With ``wait=False`` returns a `PendingTx` (several fragments can be in flight).
        """
        signed = payload if payload.signature else self.sign_outer_gradient(task_id, round, fragment, payload,
                                                                           base_root)
        pending = self.send("submitOuterGradient", _b32(task_id), int(round), int(fragment), signed.to_abi())
        return self.wait(pending) if wait else pending

    def prove(self, method: str, *args: Any) -> TxResult:
        """Send a proof (``proveAggregate``, ``proveBitmap``, ``proveOmission``, ``proveInvalid``,
        ``proveNormOutlier``) so that its bounty is this account's: first ``commitProof`` of
        ``keccak256(abi.encode(keccak256(calldata), this address))`` (about 44k gas, mined), then
        the proof itself, in a later block (PROTOCOL.md §5 "Bounties": a copy of the proof taken
        from the mempool convicts as well but pays its sender nothing). Raises as `transact`; a
        refused proof has cost the commitment's gas."""
        data = bytes.fromhex(self._fn(REGISTRY, method, *args)._encode_transaction_data()[2:])
        self.transact("commitProof", proof_commitment(data, self.address))
        return self.transact(method, *args)

    def prove_norm_outlier(self, task_id: bytes, round: int, fragment: int, trainer: str, payload: SignedPayload,
                           reference: tuple) -> TxResult:
        """``proveNormOutlier`` (root flow): ``trainer``'s live forced submission of (round, fragment)
        is over the norm screen against ``reference``, the ``NormReference`` tuple of the previous
        committed round (`tenzro_operator.root_check.RootRoundChecker.norm_reference`). Emits
        ``InvalidProven`` (the trainer slashed as by proveInvalid).

        Raises:
            ChainRevert: e.g. ``Registry__NotProven`` (not over the screen), ``Registry__NoNormReference``.
        """
        return self.prove("proveNormOutlier", _b32(task_id), int(round), int(fragment), to_checksum_address(trainer),
                             payload.to_abi(), reference)

    def prove_invalid(self, task_id: bytes, round: int, fragment: int, trainer: str, reason: SlashReason | int,
                      payload: SignedPayload, opening: ChunkOpening | None = None) -> TxResult:
        """``proveInvalid`` of a live forced submission: NonFinite / Malformed with the opening of a
        defective chunk (a norm outlier is `prove_norm_outlier`'s). The caller gets BOUNTY_BPS of
        the slash. Reverts ``Registry__NotProven`` when the evidence shows no defect,
        ``Registry__UnknownReason`` for another reason."""
        o = opening or ChunkOpening(0, b"")
        return self.prove("proveInvalid", _b32(task_id), int(round), int(fragment), to_checksum_address(trainer),
                             int(reason), payload.to_abi(), o.to_abi())

    def challenge_availability(self, task_id: bytes, round: int, fragment: int, trainer: str,
                               payload: SignedPayload, chunk_index: int = 0) -> TxResult:
        """``challengeAvailability``, paying ``challengeBond`` (`spend_approved`: `InsufficientTokens`
        before anything is sent when this account holds less): the trainer must open chunk
        ``chunk_index`` of its signed commitment within the task's challengeSeconds."""
        return self.spend_approved(self.challenge_bond(task_id), "challengeAvailability", _b32(task_id), int(round),
                                   int(fragment), to_checksum_address(trainer), payload.to_abi(), int(chunk_index))

    def answer_availability(self, task_id: bytes, round: int, fragment: int, trainer: str,
                            opening: ChunkOpening) -> TxResult:
        """``answerAvailability``: open the challenged chunk (the challenger's bond goes to the trainer)."""
        return self.transact("answerAvailability", _b32(task_id), int(round), int(fragment),
                             to_checksum_address(trainer), opening.to_abi())

    def expire_availability(self, task_id: bytes, round: int, fragment: int, trainer: str) -> TxResult:
        """``expireAvailability`` after an unanswered challenge's deadline (slashes the trainer)."""
        return self.transact("expireAvailability", _b32(task_id), int(round), int(fragment),
                             to_checksum_address(trainer))

    def slash_unrevealed(self, task_id: bytes, round: int, fragment: int, trainer: str) -> TxResult:
        """``slashUnrevealed`` (anyone, within the committed round's challenge window): `trainer`'s
        forced commitment of (round, fragment) in the opening the round was committed in was never
        revealed; it loses 5 % of its remaining stake, burned (the caller gets nothing).

        Raises:
            ChainRevert: ``Registry__NotCommitted`` (revealed, never made, or slashed already),
                ``Registry__RoundNotCommitted``, ``Registry__ChallengeWindowClosed``, ``Registry__WrongStatus``.
        """
        return self.transact("slashUnrevealed", _b32(task_id), int(round), int(fragment),
                             to_checksum_address(trainer))

    def availability_challenge(self, task_id: bytes, round: int, fragment: int, trainer: str) -> dict[str, Any]:
        """``availabilityChallenge``: ``{challenger, deadline, chunkIndex, payloadSumsq, payloadRoot, bond}``
        (challenger is the zero address when none is pending)."""
        (out,) = self.call_named("availabilityChallenge", _b32(task_id), int(round), int(fragment),
                                 to_checksum_address(trainer)).values()
        return dict(out)

    # -- registry: the root flow (PROTOCOL.md §5) ---------------------------------------------

    def use_root_flow(self, task_id: bytes, initial_fragments_root: bytes,
                      outer: tuple[int, int, bool, int]) -> TxResult:
        """``useRootFlow`` (the sponsor, before anyone enrolls): ``outer`` = (lr bits, momentum
        bits, nesterov, TrimmedMean alpha_bps) (`tenzro_operator.root_flow.outer_rule`).

        Raises:
            ChainRevert: ``Registry__OuterRuleNotProvable``, ``Registry__NotSponsor``,
                ``Registry__WrongStatus`` (not Enrolling, or someone enrolled already).
        """
        return self.transact("useRootFlow", _b32(task_id), _b32(initial_fragments_root), tuple(outer))

    def root_state(self, task_id: bytes) -> tuple[bool, bytes, bytes, int]:
        """``rootState``: (in the root flow, initial fragments root, credits root, claim deadline s)."""
        enabled, initial, credits, deadline = self.call("rootState", _b32(task_id))
        return bool(enabled), bytes(initial), bytes(credits), int(deadline)

    def is_root_flow(self, task_id: bytes) -> bool:
        return self.root_state(task_id)[0]

    def commit_phase(self, task_id: bytes) -> tuple[int, int]:
        """``commitPhase``: (the open round's commit phase closes at, seconds; unrevealed on-chain
        commitments)."""
        closes, unrevealed = self.call("commitPhase", _b32(task_id))
        return int(closes), int(unrevealed)

    def commit_round(self, task_id: bytes, round: int, fragments_root: bytes, accepted_bitmaps: Sequence[int],
                     previous_credits: Sequence[int], fragment_hashes: Sequence[bytes], transcript_hash: bytes,
                     transcript_cid: str) -> TxResult:
        """``commitRound`` (the elected syncer): the open round by root.

        Raises:
            ChainRevert: ``Registry__CommitPhaseOpen``, ``Registry__RevealsPending``,
                ``Registry__ChallengesPending``, ``Registry__QuorumNotMet``,
                ``Registry__WrongPreviousCredits``, ``Registry__WrongRound``, ``Registry__NotSyncer``.
        """
        return self.transact("commitRound", (_b32(task_id), int(round), _b32(fragments_root),
                                             [int(b) for b in accepted_bitmaps], [int(c) for c in previous_credits],
                                             [_b32(h) for h in fragment_hashes], _b32(transcript_hash),
                                             transcript_cid))

    def seal_root_run(self, task_id: bytes) -> TxResult:
        """``sealRootRun`` (anyone) after the last round's challenge window.

        Raises:
            ChainRevert: ``Registry__ChallengeWindowOpen``, ``Registry__ChallengesPending``,
                ``Registry__WrongStatus``.
        """
        return self.transact("sealRootRun", _b32(task_id))

    def claim_reward(self, task_id: bytes, index: int, credits: int, proof: Sequence[bytes]) -> TxResult:
        """``claim`` (anyone, for any trainer): trainer ``index``'s share of the pool (atto-units,
        withdrawable) for its cumulative ``credits``.

        Raises:
            ChainRevert: ``Registry__BadCreditProof``, ``Registry__AlreadyClaimed``, ``Registry__WrongStatus``.
        """
        return self.transact("claim", _b32(task_id), int(index), int(credits), [_b32(p) for p in proof])

    def claimed(self, task_id: bytes, index: int) -> bool:
        return bool(self.call("claimed", _b32(task_id), int(index)))

    def prove_aggregate(self, claim: tuple, opening: tuple, signatures: Sequence[bytes]) -> TxResult:
        """``proveAggregate`` (anyone, no bond, within the round's challenge window): one coordinate
        of a committed round recomputed from the committed roots (`tenzro_operator.root_check`).
        On a mismatch the committer's bond is slashed (10 % to this account, withdrawable) and
        the run goes back to the round before (``RoundProvenWrong``).

        Raises:
            ChainRevert: ``Registry__NoMismatch`` (the round is right there),
                ``Registry__RoundNotCommitted`` (another proof won the race, or no such round),
                ``Registry__ChallengeWindowClosed``, ``Registry__WrongRoots``, ``Registry__NotSignedBy``.
        """
        return self.prove("proveAggregate", claim, opening, [bytes(s) for s in signatures])

    def prove_omission(self, claim: tuple, bitmaps: Sequence[int], fragment: int, index: int) -> TxResult:
        """``proveOmission`` (anyone, no bond, within the round's challenge window): trainer
        ``index``'s forced submission of ``fragment`` is live on-chain but bit ``fragment`` of its
        committed bitmap is clear (``bitmaps``: the round's committed bitmaps, the claim opens
        them). The conviction is `prove_aggregate`'s.

        Raises:
            ChainRevert: ``Registry__NoMismatch`` (not live, or credited), ``Registry__RoundNotCommitted``,
                ``Registry__ChallengeWindowClosed``, ``Registry__WrongRoots``, ``Registry__BadFragment``.
        """
        return self.prove("proveOmission", claim, [int(b) for b in bitmaps], int(fragment), int(index))

    def challenge_weights(self, task_id: bytes, round: int, fragment: int, momentum: bool, chunk_index: int) -> TxResult:
        """``challengeWeights`` (anyone, within committed round ``round``'s challenge window; approves
        exactly ``challengeBond`` first): chunk ``chunk_index`` of fragment ``fragment``'s new weights
        (``momentum`` False) or momentum as the round's fragment leaf commits them (PROTOCOL.md §5
        "Weights availability").

        Raises:
            ChainRevert: ``Registry__RoundNotCommitted``, ``Registry__ChallengeWindowClosed``,
                ``Registry__BadFragment``, ``Registry__BadOpening``, ``Registry__ChallengePending``.
        """
        bond = self.challenge_bond(task_id)
        self.ensure_allowance(bond)
        return self.transact("challengeWeights", _b32(task_id), int(round), int(fragment), bool(momentum),
                             int(chunk_index))

    def answer_weights(self, task_id: bytes, round: int, fragment: int, momentum: bool, roots: tuple,
                       opening: tuple) -> TxResult:
        """``answerWeights`` (anyone, by the challenge's deadline): ``roots`` the round's ``RoundRoots``,
        ``opening`` the ``WeightsOpening`` (leaf tuple, leaf path, the round's F fragment hashes, the
        chunk's `ChunkOpening` ABI tuple); the challenger's bond goes to the sender.

        Raises:
            ChainRevert: ``Registry__NoChallenge``, ``Registry__ChallengeDeadline``, ``Registry__WrongRoots``,
                ``Registry__BadLeaf``, ``Registry__WrongModelHash``, ``Registry__BadOpening``.
        """
        leaf, path, hashes, chunk = opening
        return self.transact("answerWeights", _b32(task_id), int(round), int(fragment), bool(momentum),
                             (_b32(roots[0]), _b32(roots[1]), int(roots[2]), _b32(roots[3])),
                             (leaf, [_b32(h) for h in path], [_b32(h) for h in hashes], chunk))

    def expire_weights(self, claim: tuple, fragment: int, momentum: bool, chunk_index: int) -> TxResult:
        """``expireWeights`` (anyone) after an unanswered weights challenge's deadline: convicts the
        round's committer (kind 5). ``claim``: the ``RoundClaim`` of the round.

        Raises:
            ChainRevert: ``Registry__NoChallenge``, ``Registry__ChallengeDeadline``, ``Registry__WrongRoots``.
        """
        return self.transact("expireWeights", claim, int(fragment), bool(momentum), int(chunk_index))

    def commit_submission(self, task_id: bytes, round: int, fragment: int, commitment: bytes) -> TxResult:
        """``commitSubmission`` (the trainer itself, in the commit phase): the first half of a
        forced submission in the root flow; ``submit_outer_gradient`` reveals it after the phase."""
        return self.transact("commitSubmission", _b32(task_id), int(round), int(fragment), _b32(commitment))

    def withdraw(self) -> TxResult:
        """Pull everything credited to this account; the amount is in the ``Withdrawn`` event."""
        return self.transact("withdraw")

    # -- registry: views ------------------------------------------------------------------

    def get_run(self, task_id: bytes) -> RunView:
        """``getRun``.

        Raises:
            ChainRevert: ``Registry__UnknownTask`` when no such run was posted.
        """
        d = self.call_named("getRun", _b32(task_id))
        return _from_abi_dict(RunView, next(iter(d.values())))

    def run_exists(self, task_id: bytes) -> bool:
        """True iff a run with this task id was posted."""
        try:
            self.get_run(task_id)
        except ChainRevert as exc:
            if exc.error_name == "Registry__UnknownTask":
                return False
            raise
        return True

    def list_runs(self, offset: int = 0, limit: int = 100) -> tuple[list[bytes], int]:
        """One page of task ids in posting order, and the total number of runs."""
        ids, total = self.call("listRuns", offset, limit)
        return [bytes(i) for i in ids], int(total)

    def all_runs(self, start: int = 0, page: int = 100) -> list[bytes]:
        """Every task id from posting index ``start`` on, paging through ``listRuns`` (ids are
        append-only, so a poller passes how many it already has)."""
        out: list[bytes] = []
        while True:
            ids, total = self.list_runs(start + len(out), page)
            out.extend(ids)
            if not ids or start + len(out) >= total:
                return out

    def get_receipt(self, task_id: bytes) -> TrainingReceipt:
        """The sealed receipt with its serialized bytes (reverts unless the run is Sealed)."""
        d = self.call_named("getReceipt", _b32(task_id))
        values = list(d.values())
        rec = dict(values[0])
        rec["serialized"] = bytes(values[1])
        return _from_abi_dict(TrainingReceipt, rec)

    def get_round(self, task_id: bytes, round: int) -> RoundRecord:
        d = self.call_named("getRound", _b32(task_id), int(round))
        return _from_abi_dict(RoundRecord, next(iter(d.values())))

    def trainer_stats(self, task_id: bytes, trainer: str | None = None) -> TrainerStats:
        """``trainerMetrics`` of ``trainer`` (default this account)."""
        d = self.call_named("trainerMetrics", _b32(task_id), to_checksum_address(trainer or self.address))
        return _from_abi_dict(TrainerStats, next(iter(d.values())))

    def trainers_of(self, task_id: bytes) -> list[str]:
        """Trainers in enrollment order (index i trains shard i)."""
        return [to_checksum_address(a) for a in self.call("trainersOf", _b32(task_id))]

    def submissions_of(self, task_id: bytes, round: int, trainer: str) -> tuple[int, int]:
        """Fragment bitmaps ``(submitted, rejected)`` of a trainer's forced (on-chain) submissions
        in a round (bit f = fragment f); a committed round's accepted set is in its bitmaps."""
        s, r = self.call("submissionsOf", _b32(task_id), int(round), to_checksum_address(trainer))
        return int(s), int(r)

    def withdrawable(self, address: str | None = None) -> int:
        return int(self.call("withdrawable", to_checksum_address(address or self.address)))

    def syncer_info(self, address: str | None = None) -> SyncerInfo:
        """``syncerInfo`` of ``address`` (default this account): stake, active tasks, registered,
        locked (bonds), a `SyncerInfo` (a tuple: ``syncer_info()[2]`` is ``registered``)."""
        s, n, r, locked = self.call("syncerInfo", to_checksum_address(address or self.address))
        return SyncerInfo(int(s), int(n), bool(r), int(locked))

    def syncer_weight(self, address: str | None = None) -> tuple[int, int]:
        """``syncerWeight`` of ``address`` (default this account): its draw weight in elections
        requested from now on (atto-units; 0 while leaving or not a candidate) and the first block
        its weight may change again (a top-up, an exit; 0: now)."""
        w, from_block = self.call("syncerWeight", to_checksum_address(address or self.address))
        return int(w), int(from_block)

    def syncer_fee_of(self, task_id: bytes, syncer: str | None = None) -> int:
        """Fees accrued to ``syncer`` (default this account) in run ``task_id``, not yet claimed,
        atto-units."""
        return int(self.call("syncerFeeOf", _b32(task_id), to_checksum_address(syncer or self.address)))

    def burned(self) -> int:
        """Atto-units burned by slashing so far (kept by the registry for ever)."""
        return int(self.call("burned"))

    def challenge_bond(self, task_id: bytes) -> int:
        """``challengeBond``: the bond an availability challenge of the run pulls, atto-units."""
        return int(self.call("challengeBond", _b32(task_id)))

    def challenge_bonds_held(self) -> int:
        """Bonds of pending availability challenges held by the registry, atto-units."""
        return int(self.call("challengeBondsHeld"))

    def min_syncer_fee_per_round(self) -> int:
        """Smallest syncer pay per round (``rewardPool * syncerFeeBps / 10000 / maxRounds``) a task
        may offer, atto-units."""
        return int(self.call("minSyncerFeePerRound"))

    def run_binding(self, task_id: bytes) -> tuple[bytes, str, bytes, int]:
        """``runBinding``: ``(sealed run root (zero while not Sealed), sponsor, spec hash, total
        credits)``, what a RewardEscrow checks before paying on a run."""
        root, sponsor, spec_hash, credits = self.call("runBinding", _b32(task_id))
        return bytes(root), to_checksum_address(sponsor), bytes(spec_hash), int(credits)

    def syncer_candidates(self) -> list[str]:
        return [to_checksum_address(a) for a in self.call("syncerCandidates")]

    def min_syncer_stake(self) -> int:
        return int(self.call("minSyncerStake"))

    def syncer_timeout(self) -> int:
        """Seconds after the later of a round deadline and the syncer's election before a silent
        syncer may be replaced."""
        return int(self.call("syncerTimeout"))

    def outer_gradient_digest(self, task_id: bytes, round: int, fragment: int, base_root: bytes,
                              payload: SignedPayload) -> bytes:
        """The registry's own EIP-712 digest (to check `sign_outer_gradient` against)."""
        return bytes(self.call("outerGradientDigest", _b32(task_id), int(round), int(fragment), _b32(base_root),
                               payload.to_abi()))

    # -- verifier -------------------------------------------------------------------------

    def verify_receipt(self, serialized: bytes, run_root: bytes, address: str | None = None) -> bool:
        """Call the receipt verifier (default the precompile address on devnets) with raw calldata
        ``serialized || run_root``; True iff it returns exactly ``0x01``."""
        to = to_checksum_address(address or self.deployment.verifier_address or "")
        out = self._rpc("eth_call verifier", lambda: self.w3.eth.call(
            {"to": to, "data": "0x" + (bytes(serialized) + _b32(run_root)).hex()}))
        return bytes(out) == b"\x01"

    # -- devnet helpers -------------------------------------------------------------------

    def nudge_devnet(self, deadline: int) -> None:
        """On a devnet (chain id 31337 / 1337) blocks are mined only for transactions, so the head's
        timestamp can stay at or before a deadline (unix seconds) long after it passed, and a
        transaction that needs it passed would be refused at estimation; mine one empty block
        (anvil stamps it with the current time). On other chains new blocks come by themselves."""
        if self.chain_id in (31337, 1337) and self.block_timestamp("latest") <= deadline:
            self.mine()

    def mine(self, seconds: int = 0, blocks: int = 1) -> None:
        """Devnet only (anvil): advance time by ``seconds`` and mine ``blocks`` blocks."""
        if seconds:
            self._rpc("evm_increaseTime", lambda: self.w3.provider.make_request("evm_increaseTime", [seconds]))
        for _ in range(blocks):
            self._rpc("evm_mine", lambda: self.w3.provider.make_request("evm_mine", []))

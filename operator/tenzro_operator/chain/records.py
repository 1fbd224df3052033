"""The registry's enums, the typed views its getters return, transaction results, and the
constants every part of the chain client shares (contract names, the zero address, devnet chain
ids). Plain data: imports nothing of the client."""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, NamedTuple, Sequence

from eth_abi import encode as abi_encode
from eth_utils import keccak, to_checksum_address

from tenzro_operator.errors import ChainError

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
DEVNET_CHAIN_IDS = (31337, 1337)  # anvil / hardhat-style local chains: devnet-only helpers work there
ELECTION_WINDOW_BLOCKS = 256  # TrainingRegistry.ELECTION_WINDOW_BLOCKS: blocks an election request can be resolved in


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
        return (b32(self.payload_root), int(self.payload_sumsq), self.cid, b32(self.payload_hash),
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
        return (int(self.chunk_index), bytes(self.chunk), [b32(h) for h, _ in self.proof],
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


def from_abi_dict(cls, d: dict[str, Any]):
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


def b32(v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray)) and len(v) == 32:
        return bytes(v)
    if isinstance(v, str) and re.fullmatch(r"0x[0-9a-fA-F]{64}", v):
        return bytes.fromhex(v[2:])
    raise ValueError(f"expected 32 bytes (0x + 64 hex digits), got {v!r}")

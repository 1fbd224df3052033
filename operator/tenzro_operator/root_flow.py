"""The root flow on the operator side (contracts/PROTOCOL.md §5): the messages trainers send the
syncer over pubsub, the opt-in of a run, its fragment states and its credits.

A root-flow round, as the daemons run it:

1. **Commit phase** (until ``closes = roundDeadline - min(challengeSeconds, graceWindowSeconds /
   2)``, `ChainClient.commit_phase`): a trainer pins its pseudo-gradients, signs each (the
   EIP-712 ``OuterGradient`` of §4) and publishes only a `CommitMessage` per fragment on the
   task's submission topic: ``forced_commitment(structHash, trainer)``, which shows nothing of the
   payload, signed by the trainer (EIP-712 ``SubmissionCommitment``,
   `chain.submission_commitment_digest`), so nobody else can fill its slots. The syncer records
   the commitments it receives before ``closes`` whose signature recovers to the trainer they name
   (at most `MAX_COMMITMENTS` per trainer and fragment).
2. **Reveal phase** (after ``closes``): the trainer publishes a `RevealMessage` per fragment (the
   struct's fields and the signature). The syncer accepts a reveal only when its signer is the
   enrolled trainer it names, its base root is the round's input weights root and its commitment
   arrived in the commit phase: a copier sees a payload only after the phase, too late to commit
   to it (attack 6). Pubsub is best effort, so a trainer publishes again every poll until the
   round is committed.
3. The syncer validates each payload (IPFS fetch, hash, decode, §2 commitment),
   aggregates in trainer-index order, applies the outer step and calls ``commitRound`` with the
   fragments root of `fragment_states`, one accepted bitmap per trainer, the cumulative
   credits before the round (`cumulative_credits`) and one unendorsed bitmap per trainer: the
   accepted submissions it found no work in (forced ones it could not leave out; their credit is
   kept apart and paid only up to the endorsed, `credits.paid_credits`). The transcript lists every accepted
   submission with its signature and pins the new weights and momentum, so anyone can rebuild
   the round and prove it wrong.
4. After the last round's challenge window anyone seals (``sealRootRun``), and each trainer
   claims ``floor(pool x paid / totalCredits)`` with a Merkle proof of its credits word
   (`credits_proof`), paid = `credits.paid_credits` of the word.

Messages are JSON objects (UTF-8, at most `MAX_MESSAGE_BYTES`): bytes32 values as ``0x`` + 64
hex digits, addresses as ``0x`` + 40, the signature as ``0x`` + 130.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Annotated, Any, Callable, Literal, Mapping, Sequence

import torch
from eth_account import Account
from eth_utils import keccak
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from tenzro_operator.chain import (
    ChainClient,
    SignedPayload,
    registry_domain_separator,
    sign_submission_commitment,
    submission_commitment_digest,
)
from tenzro_operator.credits import credit_word
from tenzro_operator.errors import TenzroError
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.commitment import ChunkTree, flatten_fragment

__all__ = ["MAX_COMMITMENTS", "MAX_MESSAGE_BYTES", "CommitMessage", "RevealMessage", "RootFlowError",
           "committed_round", "committed_rounds", "committed_weights", "credits_proof",
           "cumulative_credits", "fragment_states", "fragment_vectors", "initial_fragments_root", "outer_rule",
           "parse_message", "recover_signer"]

log = logging.getLogger("tenzro.root_flow")

MAX_MESSAGE_BYTES = 4096  # bytes: a reveal is about 700
MAX_COMMITMENTS = 8  # signed commitments the syncer keeps per (trainer, fragment) and round: a trainer's own bound

Hex32 = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{64}$")]
Address = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{40}$")]
Signature = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{130}$")]


class RootFlowError(TenzroError):
    """A root-flow message or state that cannot be used (says what and why)."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Hex32
    round: int = Field(ge=0, lt=2**32)
    fragment: int = Field(ge=0, lt=2**16)
    trainer: Address

    def encode(self) -> bytes:
        """The bytes published on the submission topic."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()


class CommitMessage(_Message):
    """A trainer's commitment to one submission: ``commitment = forced_commitment(structHash,
    trainer)`` (`tenzro_trainer.round_commitment.forced_commitment`), the same word its on-chain
    ``commitSubmission`` would carry, and the trainer's signature over it (EIP-712
    ``SubmissionCommitment(bytes32 taskId,uint32 round,uint16 fragment,bytes32 commitment)``,
    `chain.submission_commitment_digest`). Signed so that only the trainer fills its own
    `MAX_COMMITMENTS` slots: unsigned words sent by anyone else took them (issue #24)."""

    type: Literal["commit"] = "commit"
    commitment: Hex32
    signature: Signature

    @classmethod
    def signed(cls, account, chain_id: int, registry: str, reveal: "RevealMessage") -> "CommitMessage":
        """The commitment to ``reveal``, signed by ``account`` (the trainer ``reveal`` names)."""
        word = reveal.commitment()
        sig = sign_submission_commitment(account, chain_id, registry, _bytes(reveal.task), reveal.round,
                                         reveal.fragment, word)
        return cls(task=reveal.task, round=reveal.round, fragment=reveal.fragment, trainer=reveal.trainer,
                   commitment="0x" + word.hex(), signature="0x" + sig.hex())

    def word(self) -> bytes:
        """The commitment word (32 bytes)."""
        return _bytes(self.commitment)

    def digest(self, chain_id: int, registry: str) -> bytes:
        """The 32-byte EIP-712 digest its signature signs."""
        return submission_commitment_digest(chain_id, registry, _bytes(self.task), self.round, self.fragment,
                                            self.word())

    def signer(self, chain_id: int, registry: str) -> str:
        """The address that signed it (lower-case), or "" for a signature that recovers to none."""
        return recover_signer(self.digest(chain_id, registry), _bytes(self.signature))


class RevealMessage(_Message):
    """A trainer's signed submission (the fields of the EIP-712 ``OuterGradient`` struct, §4)."""

    type: Literal["reveal"] = "reveal"
    base_root: Hex32
    payload_root: Hex32
    payload_sumsq: int = Field(ge=0, lt=2**32)
    cid: str = Field(min_length=1, max_length=512)
    payload_hash: Hex32
    signature: Signature

    @classmethod
    def of(cls, task_id: bytes, round_: int, fragment: int, trainer: str, base_root: bytes,
           signed: SignedPayload) -> "RevealMessage":
        return cls(task="0x" + task_id.hex(), round=round_, fragment=fragment, trainer=trainer.lower(),
                   base_root="0x" + base_root.hex(), payload_root="0x" + signed.payload_root.hex(),
                   payload_sumsq=signed.payload_sumsq, cid=signed.cid, payload_hash="0x" + signed.payload_hash.hex(),
                   signature="0x" + signed.signature.hex())

    def signed_payload(self) -> SignedPayload:
        return SignedPayload(_bytes(self.payload_root), self.payload_sumsq, self.cid, _bytes(self.payload_hash),
                             _bytes(self.signature))

    def outer_gradient(self) -> rc.OuterGradient:
        return rc.OuterGradient(_bytes(self.task), self.round, self.fragment, _bytes(self.base_root),
                                _bytes(self.payload_root), self.payload_sumsq, self.cid, _bytes(self.payload_hash))

    def struct_hash(self) -> bytes:
        """The EIP-712 struct hash (32 bytes): the accepted set's slot holds it."""
        return self.outer_gradient().struct_hash()

    def commitment(self) -> bytes:
        """The commitment this reveal opens (32 bytes)."""
        return rc.forced_commitment(self.struct_hash(), self.trainer)

    def digest(self, chain_id: int, registry: str) -> bytes:
        """The 32-byte EIP-712 ``OuterGradient`` digest its signature signs (`outer_gradient_digest`,
        from the struct hash: keccak only)."""
        return keccak(b"\x19\x01" + registry_domain_separator(chain_id, registry.lower()) + self.struct_hash())

    def signer(self, chain_id: int, registry: str) -> str:
        """The address that signed the struct (lower-case), or "" for a signature that recovers to none."""
        return recover_signer(self.digest(chain_id, registry), _bytes(self.signature))


def recover_signer(digest: bytes, signature: bytes) -> str:
    """The address (lower-case) whose key made the 65-byte ``signature`` over the 32-byte
    ``digest``, or "" when it recovers to none (eth-keys, on libsecp256k1 through coincurve:
    about 0.1 ms)."""
    try:
        return Account._recover_hash(digest, signature=signature).lower()
    except Exception:  # noqa: BLE001 - eth-keys raises several types for a malformed signature
        return ""


def _bytes(h: str) -> bytes:
    return bytes.fromhex(h[2:])


def parse_message(data: bytes) -> CommitMessage | RevealMessage:
    """Decode one pubsub message of the submission topic.

    Raises:
        RootFlowError: too large, not JSON, an unknown type or a bad field (named).
    """
    if len(data) > MAX_MESSAGE_BYTES:
        raise RootFlowError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RootFlowError(f"message is not JSON: {exc}") from None
    kind = obj.get("type") if isinstance(obj, dict) else None
    model = {"commit": CommitMessage, "reveal": RevealMessage}.get(kind)
    if model is None:
        raise RootFlowError(f"message type {kind!r} is neither 'commit' nor 'reveal'")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise RootFlowError(f"{kind} message: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None


# ----------------------------------------------------------------------------- the run's state


def outer_rule(spec) -> tuple[int, int, bool, int]:
    """``OuterRule`` of a spec (``useRootFlow``): float32 lr and momentum as binary32 bit
    patterns, Nesterov, TrimmedMean's trim in basis points (0 for the other rules)."""
    from tenzro_operator.task_runtime import outer_config

    cfg = outer_config(spec)
    return (rc.f32_bits(cfg.lr), rc.f32_bits(cfg.momentum), bool(cfg.nesterov),
            int(spec.aggregation_params.get("alpha_bps", 0)))


def fragment_vectors(state: Mapping[str, torch.Tensor], fragments: Sequence[Sequence[str]]) -> list[torch.Tensor]:
    """One float32 (n_f,) vector per fragment, its tensors in the commitment's order (`flatten_fragment`)."""
    return [flatten_fragment({n: state[n] for n in names}) for names in fragments]


def fragment_weights_roots(state: Mapping[str, torch.Tensor], fragments: Sequence[Sequence[str]]) -> list[bytes]:
    """Each fragment's weights root: the §2 root hash (32 bytes) of its flat vector
    (`fragment_vectors`). In the root flow these are a round's ``fragmentHashes`` (the leaves'
    ``weightsRoot``, PROTOCOL.md §5 "The receipt names the proven model"), so a downloader checks
    a weights blob by the root of its decoded values, never by the blob's SHA-256."""
    return [ChunkTree(v).root[0] for v in fragment_vectors(state, fragments)]


def chunk_weights_root(state: Mapping[str, torch.Tensor], fragments: Sequence[Sequence[str]]) -> bytes:
    """The RunRoot weights root (contracts/RECEIPT.md) over `fragment_weights_roots`: what a
    root-flow ``RoundCommitted`` event's ``weightsRoot`` (and the run's after it) must be."""
    from tenzro_operator.receipt import weights_root

    return weights_root(fragment_weights_roots(state, fragments))


def initial_fragments_root(state: Mapping[str, torch.Tensor], fragments: Sequence[Sequence[str]]) -> bytes:
    """§6's initial fragments root of a run: each fragment's initial weights, momentum +0."""
    return rc.fragments_root([rc.FragmentState.initial(f, v).leaf
                              for f, v in enumerate(fragment_vectors(state, fragments))])


def fragment_states(outers: Sequence, accepted: Mapping[int, Mapping[int, bytes]], enrolled: int) -> list:
    """The fragment states after a round (`rc.FragmentState`, one per fragment).

    Args:
        outers: the fragments' `OuterOptimizer`s after the outer step (weights and momentum).
        accepted: ``{fragment: {trainer index: struct hash}}`` of the accepted submissions.
        enrolled: the run's enrolled count (the accepted sets' width).
    """
    out = []
    for f, o in enumerate(outers):
        w = flatten_fragment(dict(zip(o.names, o.params)))
        m = flatten_fragment(dict(zip(o.names, o.momentum)))
        out.append(rc.FragmentState.build(f, w, m, rc.AcceptedSet(accepted.get(f, {}), enrolled)))
    return out


# ----------------------------------------------------------------------------- credits


def committed_rounds(chain: ChainClient, task_id: bytes, from_block: int, before_round: int) -> dict[int, dict]:
    """``round -> RoundCommitted args`` of the rounds below ``before_round`` (the run's open round):
    the last event of each round, so a round discarded by a fraud proof and committed again counts
    once, as committed again."""
    out: dict[int, dict] = {}
    for ev in chain.get_logs(from_block, chain.block_number(), ["RoundCommitted"], task_id=task_id):
        r = int(ev["args"]["round"])
        if r < before_round:
            out[r] = dict(ev["args"])
    return out


def cumulative_credits(rounds: Mapping[int, Mapping[str, Any]], sizes: Sequence[int], enrolled: int) -> list[int]:
    """Each trainer's cumulative credits word over ``rounds`` (`committed_rounds`): the sum over
    rounds of `credit_word` of its accepted and unendorsed bitmaps, as ``commitRound`` computes it.

    Raises:
        RootFlowError: a round missing between 0 and the last one, or a bitmap list of the wrong length.
    """
    credits = [0] * enrolled
    for r in range(len(rounds)):
        if r not in rounds:
            raise RootFlowError(f"round {r} has no RoundCommitted event (rounds read: {sorted(rounds)})")
        bitmaps = list(rounds[r]["acceptedBitmaps"])
        unendorsed = list(rounds[r].get("unendorsedBitmaps") or []) or [0] * len(bitmaps)
        if len(bitmaps) != enrolled or len(unendorsed) != enrolled:
            raise RootFlowError(f"round {r} commits {len(bitmaps)} accepted and {len(unendorsed)} unendorsed bitmaps "
                                f"for {enrolled} enrolled trainers")
        for i, (b, u) in enumerate(zip(bitmaps, unendorsed)):
            credits[i] += credit_word(b, u, sizes)
    return credits


def credits_proof(credits: Sequence[int], index: int, root: bytes) -> list[bytes]:
    """The Merkle path of trainer ``index``'s credits leaf (``claim``'s proof).

    Raises:
        RootFlowError: ``credits`` do not give the registry's credits ``root``.
    """
    tree = rc.credits_tree(credits)
    if tree.root != root:
        raise RootFlowError(f"the credits read from the chain give root 0x{tree.root.hex()}, the registry "
                            f"holds 0x{root.hex()}")
    return tree.path(index)


def committed_round(chain: ChainClient, task_id: bytes, from_block: int, r: int, *, wait_s: float = 0.0,
                    sleep: Callable[[float], None] = time.sleep, poll_s: float = 0.5) -> dict:
    """Round r's last ``RoundCommitted`` event (its args; `committed_rounds`). Called once the
    registry shows round r committed, a node that does not return the event yet lags behind the
    one that answered (a node behind a load balancer, a reorg's tail): with ``wait_s`` > 0 the logs
    are read again every ``poll_s`` seconds (``sleep``: a daemon's, which a stop interrupts) for up
    to ``wait_s`` seconds.

    Raises:
        RootFlowError: round r has no ``RoundCommitted`` event (still none after ``wait_s``).
    """
    deadline = time.monotonic() + wait_s
    while True:
        rounds = committed_rounds(chain, task_id, from_block, r + 1)
        if r in rounds:
            return rounds[r]
        if time.monotonic() >= deadline:
            raise RootFlowError(f"no RoundCommitted event for round {r} of task 0x{task_id.hex()} yet")
        log.info("round %d: the node does not return its RoundCommitted event yet (a lagging node): reading again", r)
        sleep(poll_s)


def committed_weights(ipfs, event: Mapping[str, Any]) -> tuple[list[str], list[bytes]]:
    """A committed round's weights as (fragment CIDs, sha256 digests), from the transcript its
    ``RoundCommitted`` event (args, `committed_round`) names and hashes; the caller checks the
    digests against the weights root it trusts (the next round's base, or the receipt's final
    model hash).

    Raises:
        TranscriptError: the transcript does not hash to the committed value.
    """
    from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript

    return RoundTranscript.parse(ipfs.cat(event["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                 bytes(event["transcriptHash"])).weights_refs()

"""The round transcript: what the syncer did in one round, pinned to IPFS.

Its sha256 (over the canonical JSON bytes) is the `transcriptHash` that
`commitRound` commits and that enters the round digest and the run root
(contracts/RECEIPT.md). With the transcripts and the payloads they name,
anyone can replay a run: fetch each accepted payload, check its sha256,
aggregate with the same rule in the same order, apply the outer optimizer and
compare the new weights and momentum with the committed roots (`root_check.py`).

Canonical JSON: keys sorted, separators (",", ":"), UTF-8, no NaN; lists in a
fixed order (fragments by index, submissions by trainer address, lowercase hex).
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tenzro_operator.errors import TenzroError

TRANSCRIPT_VERSION = 1


MAX_TRANSCRIPT_BYTES = 32 << 20  # bytes read per transcript: one lists M*F <= 2048 entries, far smaller


class TranscriptError(TenzroError):
    """A transcript fetched for replay is malformed or does not hash to the committed value."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Submission(_Strict):
    """One trainer's pseudo-gradient for one fragment, as delivered to the syncer (off-chain or
    forced on-chain); an accepted one carries the rest of the signed EIP-712 struct, so that anyone
    can open the accepted set's slot and prove the round wrong (contracts/PROTOCOL.md §5)."""

    trainer: str = Field(description="trainer address, lowercase 0x-hex")
    cid: str
    sha256: str = Field(description="payloadHash posted on-chain, 0x-hex")
    base_root: str | None = Field(default=None, description="root flow: the signed baseRoot, 0x-hex")
    payload_root: str | None = Field(default=None, description="root flow: the §2 chunk root, 0x-hex")
    payload_sumsq: int | None = Field(default=None, description="root flow: the §2 sum of squares, binary32 bits")
    signature: str | None = Field(default=None, description="root flow: the trainer's EIP-712 signature, 0x-hex")


class Rejection(Submission):
    """A submission the syncer refused, with the SlashReason name (or ``LossIncrease``: a root-flow
    payload left out by loss-improvement scoring; ``NearCopy`` / ``NoContribution``: one the run's
    credit gate did not credit, `tenzro_operator.roles.syncer_credit`) and a human-readable detail."""

    reason: Literal["HashMismatch", "Malformed", "NonFinite", "NormOutlier", "Unavailable", "LossIncrease",
                    "NearCopy", "NoContribution"]
    detail: str


class BlobRef(_Strict):
    cid: str
    sha256: str


class FragmentRecord(_Strict):
    """One fragment's round: inputs accepted and rejected, and the new global weights.

    `aggregated` is False when no submission was accepted: the weights are carried over unchanged.
    """

    fragment: int
    accepted: list[Submission]
    rejected: list[Rejection]
    weights: BlobRef
    aggregated: bool
    momentum: BlobRef | None = Field(default=None, description="root flow: the outer momentum after the round")


class RoundTranscript(_Strict):
    """Everything needed to check round `round` of task `task_id`."""

    version: int = TRANSCRIPT_VERSION
    task_id: str
    round: int
    rule: dict
    outer: dict
    input_weights_root: str
    weights_root: str
    accepted_count: int
    fragments: list[FragmentRecord]

    def canonical_bytes(self) -> bytes:
        """The bytes that are pinned and hashed."""
        obj = self.model_dump(mode="json", exclude_none=True)  # a rejection carries no signed fields
        for fr in obj["fragments"]:
            fr["accepted"].sort(key=lambda s: s["trainer"])
            fr["rejected"].sort(key=lambda s: s["trainer"])
        obj["fragments"].sort(key=lambda fr: fr["fragment"])
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()

    def weights_refs(self) -> tuple[list[str], list[bytes]]:
        """The new global weights in fragment order: (CIDs, sha256 digests, 32 bytes each)."""
        frs = sorted(self.fragments, key=lambda x: x.fragment)
        return [fr.weights.cid for fr in frs], [bytes.fromhex(fr.weights.sha256[2:]) for fr in frs]

    def hash(self) -> bytes:
        """sha256 of `canonical_bytes()`: the round's transcriptHash (32 bytes)."""
        return hashlib.sha256(self.canonical_bytes()).digest()

    @classmethod
    def parse(cls, data: bytes, expected_hash: bytes | None = None) -> "RoundTranscript":
        """Parse pinned bytes; checks their sha256 against `expected_hash` when given.

        Raises:
            TranscriptError: hash mismatch, invalid JSON or fields (says which).
        """
        if expected_hash is not None and hashlib.sha256(data).digest() != expected_hash:
            raise TranscriptError(f"transcript sha256 {hashlib.sha256(data).hexdigest()} != committed "
                                  f"{expected_hash.hex()}")
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise TranscriptError(f"malformed transcript: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from exc

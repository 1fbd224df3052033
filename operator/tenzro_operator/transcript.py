"""The round transcript: what the syncer did in one round, pinned to IPFS.

Its sha256 (over the canonical JSON bytes) is the `transcriptHash` that
`finalizeRound` commits and that enters the round digest and the run root
(contracts/RECEIPT.md). With the transcripts and the payloads they name,
anyone can replay a run: fetch each accepted payload, check its sha256,
aggregate with the same rule in the same order, apply the outer optimizer and
compare the new weights' hashes with the committed ones (`replay.py`).

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


class TranscriptError(TenzroError):
    """A transcript fetched for replay is malformed or does not hash to the committed value."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Submission(_Strict):
    """One trainer's pseudo-gradient for one fragment, as posted on-chain."""

    trainer: str = Field(description="trainer address, lowercase 0x-hex")
    cid: str
    sha256: str = Field(description="payloadHash posted on-chain, 0x-hex")


class Rejection(Submission):
    """A submission the syncer refused, with the SlashReason name and a human-readable detail."""

    reason: Literal["HashMismatch", "Malformed", "NonFinite", "NormOutlier", "Unavailable"]
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
        obj = self.model_dump(mode="json")
        for fr in obj["fragments"]:
            fr["accepted"].sort(key=lambda s: s["trainer"])
            fr["rejected"].sort(key=lambda s: s["trainer"])
        obj["fragments"].sort(key=lambda fr: fr["fragment"])
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()

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

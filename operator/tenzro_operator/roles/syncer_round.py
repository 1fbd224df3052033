"""One open round at the syncer: each submission (`_Sub`: a forced one read from the chain, or an
off-chain reveal, and what the syncer made of it), the round's state (`_RoundState`), and the
rejection reasons that decide what the syncer does on-chain about an invalid submission (prove
it, challenge its availability, or leave it).

Data only: it imports none of the roles' modules (every part of the syncer imports it).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch

from tenzro_operator.chain import SignedPayload, SlashReason
from tenzro_operator.transcript import Submission
from tenzro_trainer.commitment import ChunkTree

log = logging.getLogger("tenzro.syncer")

_REASON_OF_REJECT = {"names": "Malformed", "shape": "Malformed", "dtype": "Malformed", "non_finite": "NonFinite",
                     "norm": "NormOutlier"}
# what the syncer does on-chain about an invalid submission: prove it (evidence the registry
# checks), or challenge its availability (anything it cannot fetch, decode or match)
_PROVE = {"NonFinite": SlashReason.NON_FINITE}  # a norm outlier: proveNormOutlier
_CHALLENGE = ("Unavailable", "HashMismatch", "Malformed")
# Reverts of a report or a new availability challenge that mean there is nothing (more) to do for
# the submission: another report or challenge came first (a stale read), or protocol v3's bounds
# closed it (PROTOCOL.md §4: challenges open until max(roundDeadline, the syncer's election) +
# challengeSeconds, at most MAX_AVAILABILITY_CHALLENGES per submission).
_STALE = ("Registry__NoSuchSubmission", "Registry__ChallengePending")
_CLOSED = ("Registry__DeadlinePassed", "Registry__ChallengeLimit")
_UNUSABLE = "unusable"  # answered, yet neither its CID nor a whole answer on-chain gives the payload


@dataclass
class _Sub:
    """One submission of the open round (a forced one on-chain, or an off-chain reveal) and what
    the syncer made of it."""

    fragment: int
    trainer: str  # checksummed
    signed: SignedPayload  # the trainer's signed commitment, from the event
    block: int = 0  # the block of its GradientSubmitted event (0: off-chain)
    reason: str | None = None  # None = structurally valid
    detail: str = ""
    tensors: dict[str, torch.Tensor] | None = None
    tree: ChunkTree | None = None  # commitment of the decoded vector (kept for a non-finite proof)
    flat: torch.Tensor | None = None
    reported: bool = False  # proven invalid or challenged on-chain (or found so already)
    offchain: bool = False  # delivered over pubsub or the endpoint, not on-chain (nothing to report)
    closed: str = ""  # the revert that ended its challenges (_CLOSED), or _UNUSABLE: not challenged again
    unprovable: bool = False  # a forced norm outlier the registry would not convict (accepted instead)
    unpaid: bool = False  # a challenge's bond this account could not pay (logged once; tried every poll)
    # why an accepted forced submission is not endorsed ("" endorsed): the check it failed, which
    # leaves an off-chain one out; its credit is paid only up to the trainer's endorsed credit
    unendorsed: str = ""

    def withhold_endorsement(self, r: int, why: str) -> None:
        """Accept this forced submission of round r without the syncer's endorsement, for ``why``
        (the first reason found stands); logged."""
        if not self.unendorsed:
            self.unendorsed = why
            log.warning("round %d: forced trainer=%s fragment=%d accepted, not endorsed: %s", r, self.key,
                        self.fragment, why)

    @property
    def owes_report(self) -> bool:
        """Found invalid and not acted on yet (`SubmissionReports.report`; a norm outlier is reported
        at the commit, by `finalize`)."""
        return self.reason not in (None, "NormOutlier") and not self.reported

    @property
    def cid(self) -> str:
        return self.signed.cid

    @property
    def payload_hash(self) -> bytes:
        return self.signed.payload_hash

    @property
    def key(self) -> str:
        return self.trainer.lower()

    def submission(self, extra: dict | None = None) -> Submission:
        """The transcript's record; ``extra``: the root flow's signed-struct fields."""
        return Submission(trainer=self.key, cid=self.cid, sha256="0x" + self.payload_hash.hex(), **(extra or {}))


@dataclass
class _RoundState:
    round: int
    subs: dict[tuple[int, str], _Sub] = field(default_factory=dict)
    quorum_since: float | None = None
    closes: int = 0  # root flow: the commit phase's last second (chain time)
    settled: bool = False  # root flow: no forced submission can arrive any more (`_root_inputs_settled`)
    challenged: bool = False  # the last collect sent an availability challenge (`ready` waits a step)
    first_block: int = 0  # the first block that can hold an event of this round's opening
    commitments: set[tuple[int, str]] = field(default_factory=set)  # on-chain forced commitments (fragment, trainer)
    t_start: float = field(default_factory=time.perf_counter)
    split: dict[str, float] = field(default_factory=lambda: {"fetch_s": 0.0, "validate_s": 0.0})

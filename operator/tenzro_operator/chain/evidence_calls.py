"""The chain client's calls about trainers' submissions: signing and forcing one, proofs and
availability challenges against it, and slashing a forced commitment never revealed."""

from __future__ import annotations

from typing import Any

from eth_utils import to_checksum_address

from tenzro_operator.chain.deployment import REGISTRY
from tenzro_operator.chain.records import (
    ChunkOpening,
    PendingTx,
    SignedPayload,
    SlashReason,
    TxResult,
    b32,
    proof_commitment,
)
from tenzro_operator.chain.signing import sign_outer_gradient
from tenzro_operator.errors import ChainError


class TrainerEvidenceCalls:
    """Calls of `ChainClient` about trainers' submissions and the evidence against them."""

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
        pending = self.send("submitOuterGradient", b32(task_id), int(round), int(fragment), signed.to_abi())
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
        return self.prove("proveNormOutlier", b32(task_id), int(round), int(fragment), to_checksum_address(trainer),
                             payload.to_abi(), reference)

    def prove_invalid(self, task_id: bytes, round: int, fragment: int, trainer: str, reason: SlashReason | int,
                      payload: SignedPayload, opening: ChunkOpening | None = None) -> TxResult:
        """``proveInvalid`` of a live forced submission: NonFinite / Malformed with the opening of a
        defective chunk (a norm outlier is `prove_norm_outlier`'s). The caller gets BOUNTY_BPS of
        the slash. Reverts ``Registry__NotProven`` when the evidence shows no defect,
        ``Registry__UnknownReason`` for another reason."""
        o = opening or ChunkOpening(0, b"")
        return self.prove("proveInvalid", b32(task_id), int(round), int(fragment), to_checksum_address(trainer),
                             int(reason), payload.to_abi(), o.to_abi())

    def challenge_availability(self, task_id: bytes, round: int, fragment: int, trainer: str,
                               payload: SignedPayload, chunk_index: int = 0) -> TxResult:
        """``challengeAvailability``, paying ``challengeBond`` (`spend_approved`: `InsufficientTokens`
        before anything is sent when this account holds less): the trainer must open chunk
        ``chunk_index`` of its signed commitment within the task's challengeSeconds."""
        return self.spend_approved(self.challenge_bond(task_id), "challengeAvailability", b32(task_id), int(round),
                                   int(fragment), to_checksum_address(trainer), payload.to_abi(), int(chunk_index))

    def answer_availability(self, task_id: bytes, round: int, fragment: int, trainer: str,
                            opening: ChunkOpening) -> TxResult:
        """``answerAvailability``: open the challenged chunk (the challenger's bond goes to the trainer)."""
        return self.transact("answerAvailability", b32(task_id), int(round), int(fragment),
                             to_checksum_address(trainer), opening.to_abi())

    def expire_availability(self, task_id: bytes, round: int, fragment: int, trainer: str) -> TxResult:
        """``expireAvailability`` after an unanswered challenge's deadline (slashes the trainer)."""
        return self.transact("expireAvailability", b32(task_id), int(round), int(fragment),
                             to_checksum_address(trainer))

    def slash_unrevealed(self, task_id: bytes, round: int, fragment: int, trainer: str) -> TxResult:
        """``slashUnrevealed`` (anyone, within the committed round's challenge window): `trainer`'s
        forced commitment of (round, fragment) in the opening the round was committed in was never
        revealed; it loses 5 % of its remaining stake, burned (the caller gets nothing).

        Raises:
            ChainRevert: ``Registry__NotCommitted`` (revealed, never made, or slashed already),
                ``Registry__RoundNotCommitted``, ``Registry__ChallengeWindowClosed``, ``Registry__WrongStatus``.
        """
        return self.transact("slashUnrevealed", b32(task_id), int(round), int(fragment),
                             to_checksum_address(trainer))

    def availability_challenge(self, task_id: bytes, round: int, fragment: int, trainer: str) -> dict[str, Any]:
        """``availabilityChallenge``: ``{challenger, deadline, chunkIndex, payloadSumsq, payloadRoot, bond}``
        (challenger is the zero address when none is pending)."""
        (out,) = self.call_named("availabilityChallenge", b32(task_id), int(round), int(fragment),
                                 to_checksum_address(trainer)).values()
        return dict(out)

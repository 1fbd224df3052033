"""The chain client's calls of the registry's rounds (PROTOCOL.md §5): the run's flow settings,
commit phases and forced commitments, round commits, slot and weights challenges, proofs of a
wrong round, the seal, claims and withdrawals."""

from __future__ import annotations

from typing import Sequence

from tenzro_operator.chain.records import TxResult, b32


class RoundCalls:
    """Calls of `ChainClient` of the registry's rounds: commits, challenges, proofs, seal, claims."""

    def use_root_flow(self, task_id: bytes, initial_fragments_root: bytes,
                      outer: tuple[int, int, bool, int]) -> TxResult:
        """``useRootFlow`` (the sponsor, before anyone enrolls): ``outer`` = (lr bits, momentum
        bits, nesterov, TrimmedMean alpha_bps) (`tenzro_operator.root_flow.outer_rule`).

        Raises:
            ChainRevert: ``Registry__OuterRuleNotProvable``, ``Registry__NotSponsor``,
                ``Registry__WrongStatus`` (not Enrolling, or someone enrolled already).
        """
        return self.transact("useRootFlow", b32(task_id), b32(initial_fragments_root), tuple(outer))

    def root_state(self, task_id: bytes) -> tuple[bool, bytes, bytes, int]:
        """``rootState``: (in the root flow, initial fragments root, credits root, claim deadline s)."""
        enabled, initial, credits, deadline = self.call("rootState", b32(task_id))
        return bool(enabled), bytes(initial), bytes(credits), int(deadline)

    def is_root_flow(self, task_id: bytes) -> bool:
        return self.root_state(task_id)[0]

    def commit_phase(self, task_id: bytes) -> tuple[int, int]:
        """``commitPhase``: (the open round's commit phase closes at, seconds; unrevealed on-chain
        commitments)."""
        closes, unrevealed = self.call("commitPhase", b32(task_id))
        return int(closes), int(unrevealed)

    def commit_round(self, task_id: bytes, round: int, fragments_root: bytes, accepted_bitmaps: Sequence[int],
                     previous_credits: Sequence[int], fragment_hashes: Sequence[bytes], transcript_hash: bytes,
                     transcript_cid: str, unendorsed_bitmaps: Sequence[int] = ()) -> TxResult:
        """``commitRound`` (the elected syncer): the open round by root. ``previous_credits`` are
        the credits words before the round (`root_flow.cumulative_credits`); ``unendorsed_bitmaps``
        (none, or one per enrolled trainer, each within its accepted bitmap) mark the accepted
        submissions the syncer found no work in (PROTOCOL.md §5 "Endorsed credit").

        Raises:
            ChainRevert: ``Registry__CommitPhaseOpen``, ``Registry__RevealsPending``,
                ``Registry__ChallengesPending``, ``Registry__QuorumNotMet``,
                ``Registry__WrongPreviousCredits``, ``Registry__WrongRound``, ``Registry__NotSyncer``,
                ``Registry__BadBitmap``, ``Registry__UnendorsedLength``.
        """
        return self.transact("commitRound", (b32(task_id), int(round), b32(fragments_root),
                                             [int(b) for b in accepted_bitmaps], [int(c) for c in previous_credits],
                                             [b32(h) for h in fragment_hashes], b32(transcript_hash),
                                             transcript_cid, [int(u) for u in unendorsed_bitmaps]))

    def seal_root_run(self, task_id: bytes) -> TxResult:
        """``sealRootRun`` (anyone) after the last round's challenge window.

        Raises:
            ChainRevert: ``Registry__ChallengeWindowOpen``, ``Registry__ChallengesPending``,
                ``Registry__WrongStatus``.
        """
        return self.transact("sealRootRun", b32(task_id))

    def claim_reward(self, task_id: bytes, index: int, credits: int, proof: Sequence[bytes]) -> TxResult:
        """``claim`` (anyone, for any trainer): trainer ``index``'s share of the pool (atto-units,
        withdrawable) for its cumulative credits word ``credits`` (`root_flow.paid_credits` of it).

        Raises:
            ChainRevert: ``Registry__BadCreditProof``, ``Registry__AlreadyClaimed``, ``Registry__WrongStatus``.
        """
        return self.transact("claim", b32(task_id), int(index), int(credits), [b32(p) for p in proof])

    def sweep(self, task_id: bytes) -> TxResult:
        """``sweep`` (anyone) after the claim deadline: what is left of a sealed run's pool
        (unclaimed rewards, unendorsed credit left unpaid, the floor dust) goes to the sponsor
        (withdrawable; ``PoolSwept``).

        Raises:
            ChainRevert: ``Registry__ClaimPeriodOpen``, ``Registry__WrongStatus``.
        """
        return self.transact("sweep", b32(task_id))

    def claimed(self, task_id: bytes, index: int) -> bool:
        return bool(self.call("claimed", b32(task_id), int(index)))

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
        return self.transact("challengeWeights", b32(task_id), int(round), int(fragment), bool(momentum),
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
        return self.transact("answerWeights", b32(task_id), int(round), int(fragment), bool(momentum),
                             (b32(roots[0]), b32(roots[1]), int(roots[2]), b32(roots[3])),
                             (leaf, [b32(h) for h in path], [b32(h) for h in hashes], chunk))

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
        return self.transact("commitSubmission", b32(task_id), int(round), int(fragment), b32(commitment))

    def withdraw(self) -> TxResult:
        """Pull everything credited to this account; the amount is in the ``Withdrawn`` event."""
        return self.transact("withdraw")

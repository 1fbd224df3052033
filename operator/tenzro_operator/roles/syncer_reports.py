"""What the syncer does on-chain about a forced submission it found invalid (contracts/PROTOCOL.md
§4): prove a non-finite payload (``proveInvalid``, opening the chunk that holds the value) or a
norm outlier (``proveNormOutlier``), challenge the availability of one it cannot fetch, decode or
match with its commitment (the whole payload, ``challengeAvailability``), check an answered one
again, expire a challenge nobody answered (``expireAvailability``); and, after its commit, slash
every forced commitment of the round that was never revealed (``slashUnrevealed``, §5).

Part of `tenzro_operator.roles.syncer.SyncerDaemon`; imports nothing of the other roles, nor the
syncer's module.
"""

from __future__ import annotations

import logging
import time

from tenzro_operator.chain import ZERO_ADDRESS, ChunkOpening, RunView
from tenzro_operator.errors import ChainRevert, InsufficientTokens, ServiceUnavailable
from tenzro_operator.evidence import non_finite_opening
from tenzro_operator.roles.syncer_round import _CHALLENGE, _CLOSED, _PROVE, _REASON_OF_REJECT, _STALE, _UNUSABLE, _Sub
from tenzro_operator.whole_answer import answered_vector
from tenzro_trainer.aggregation import validate_payload
from tenzro_trainer.commitment import ChunkTree
from tenzro_trainer.compression.wire import unflatten
from tenzro_trainer.errors import PayloadRejected


log = logging.getLogger("tenzro.syncer")


class SubmissionReports:
    """The syncer's on-chain acts against invalid submissions (see the module docstring)."""

    def report(self, sub: _Sub) -> None:
        """Act on-chain on an invalid submission, with evidence (PROTOCOL.md §4): ``proveInvalid``
        for a non-finite value (the opened chunk) or a norm outlier (every signed sum of the
        fragment), else ``challengeAvailability`` of its first chunk. A submission the chain
        already shows rejected, or already challenged, counts as done; so does one the registry no
        longer lets anyone act on (`Registry__DeadlinePassed`: past max(roundDeadline, the syncer's
        election) + challengeSeconds;
        `Registry__ChallengeLimit`: its challenges are used up), logged.

        Raises:
            ChainRevert: any other refusal of the registry (reported again on the next poll).
        """
        if sub.reported or sub.offchain:  # nothing on-chain to act on: the submission is simply not accepted
            sub.reported = True
            return
        rs = self._round
        t0 = time.perf_counter()
        try:
            if sub.reason == "NormOutlier":
                ref = self._norm_reference(sub.fragment)
                res = self.chain.prove_norm_outlier(self.task_id, rs.round, sub.fragment, sub.trainer, sub.signed,
                                                    ref[0])
                ev = res.event("InvalidProven")
                log.warning("proved forced trainer=%s fragment=%d a norm outlier against round %d's accepted sums: "
                            "slashed %d atto (bounty %d)", sub.trainer, sub.fragment, rs.round - 1, ev["slashed"],
                            ev["bounty"])
            elif sub.reason in _PROVE:
                res = self.chain.prove_invalid(self.task_id, rs.round, sub.fragment, sub.trainer,
                                               _PROVE[sub.reason], sub.signed, non_finite_opening(sub.tree, sub.flat))
                ev = res.event("InvalidProven")
                log.warning("proved invalid trainer=%s fragment=%d reason=%s: slashed %d atto (bounty %d)",
                            sub.trainer, sub.fragment, sub.reason, ev["slashed"], ev["bounty"])
            else:
                # the whole payload (PROTOCOL.md §4 "Whole payload", issue #23 attack 5). A forced
                # payload counts against the syncer only once it is wholly public; after a one-chunk
                # challenge a trainer could answer that chunk alone, withhold the rest, and leave
                # this syncer to be convicted whether it aggregates the payload or omits it.
                ev = self._challenge(sub).event("AvailabilityChallenged")
                log.warning("challenged availability of the whole payload trainer=%s fragment=%d (%s) until %d",
                            sub.trainer, sub.fragment, sub.reason, ev["deadline"])
        except InsufficientTokens as exc:  # the bond: nothing sent; reported again on the next poll
            (log.debug if sub.unpaid else log.error)(
                "trainer=%s fragment=%d (%s): cannot pay the availability challenge's bond, the round's commit "
                "waits for it: %s", sub.trainer, sub.fragment, sub.reason, exc)
            sub.unpaid = True
            return
        except ChainRevert as exc:
            if sub.reason == "NormOutlier" and exc.error_name not in _STALE:
                # not convicted: the submission stays live, so it must be aggregated (finalize screens again)
                log.error("trainer=%s fragment=%d: the registry refuses the norm-outlier proof (%s): accepting it",
                          sub.trainer, sub.fragment, exc.error_name)
                sub.unprovable, sub.reason, sub.detail = True, None, ""
                return
            if exc.error_name in _CLOSED:
                sub.closed = exc.error_name
                log.warning("trainer=%s fragment=%d (%s): not reported, the registry refuses (%s)", sub.trainer,
                            sub.fragment, sub.reason, exc.error_name)
            elif exc.error_name not in _STALE:
                raise
        sub.tree = sub.flat = None
        sub.reported = True
        rs.split["chain_s"] = rs.split.get("chain_s", 0.0) + time.perf_counter() - t0

    def _rechallenge_answered(self) -> None:
        """A challenged forced submission whose trainer answered is live again, and the registry
        would refuse a commit that leaves it out: fetch and check it again (`_revalidate`), and if
        it is still not fetchable from IPFS read it from the whole-payload answer's on-chain bytes
        (`_use_whole_answer`: this syncer's challenge, or anyone's that took the submission's one
        whole-payload place). One that neither gives stays live, logged once (PROTOCOL.md §4,
        residual).

        Raises:
            ChainRevert: any other refusal of the registry.
        """
        rs = self._round
        for sub in rs.subs.values():
            if sub.offchain or not (sub.reported and sub.reason in _CHALLENGE) or sub.closed == _UNUSABLE:
                continue
            pending = self.chain.availability_challenge(self.task_id, rs.round, sub.fragment, sub.trainer)
            if str(pending["challenger"]).lower() != ZERO_ADDRESS:
                continue
            if self.chain.submissions_of(self.task_id, rs.round, sub.trainer)[1] >> sub.fragment & 1:
                continue  # expired: rejected and slashed
            if self._revalidate(sub) or self._use_whole_answer(sub):
                continue
            sub.closed = _UNUSABLE
            log.error("trainer=%s fragment=%d: its payload is not usable here (%s) and no whole-payload answer "
                      "on-chain holds it: it stays live", sub.trainer, sub.fragment, sub.reason)

    def _challenge(self, sub: _Sub):
        """``challengeAvailability`` of the whole payload of ``sub`` (its bond from this account's
        wallet); the round's commit then waits a step (`ready`). Returns the transaction result."""
        res = self.chain.challenge_availability(self.task_id, self._round.round, sub.fragment, sub.trainer,
                                                sub.signed, ChunkOpening.WHOLE_PAYLOAD)
        self._round.challenged = True
        return res

    def _revalidate(self, sub: _Sub) -> bool:
        """A challenged submission was answered, so its bytes exist: fetch and check it again (the
        first fetch may have met this syncer's own node restarting, or a slow network). True when
        it is valid now: it joins the round's inputs, and an honest trainer loses no credit to a
        fault of the syncer's side."""
        before = (sub.reason, sub.detail)
        sub.reason = sub.detail = None
        try:
            self.validate(sub)
        except BaseException:  # this syncer's own node is down: the rejection stands for now
            sub.reason, sub.detail = before
            raise
        dup = next((o for o in self._round.subs.values()
                    if o is not sub and o.reason is None and o.payload_hash == sub.payload_hash), None)
        if sub.reason is None and dup is None:
            log.info("trainer=%s fragment=%d: the payload is retrievable and valid now: accepted", sub.trainer,
                     sub.fragment)
            return True
        if sub.reason is None:
            sub.reason, sub.detail = before
        return False

    def _use_whole_answer(self, sub: _Sub) -> bool:
        """Use the bytes of a whole-payload answer on-chain (`whole_answer`) that commits to
        ``sub``'s signed payload root: accept the payload when it passes the payload checks; when
        it holds a NaN or infinity, prove that on-chain from the answered vector (`report`:
        ``proveInvalid`` NonFinite, opening the chunk), so the submission is rejected and leaving
        it out is no omission (issue #23: a trainer withholding a NaN payload and answering its
        whole challenge left it live, an omission to prove whether the syncer took it or not).
        True when either happened; False when no whole answer commits to it. Its CID may never
        answer: the answer made the payload public. The norm screen comes later, at the commit."""
        signed = sub.signed
        vec = answered_vector(self.chain, self.task_id, self._run_start, self._round.round, sub.fragment, sub.trainer,
                              self.runtime.sizes[sub.fragment], signed.payload_root, signed.payload_sumsq)
        if vec is None:
            return False
        layout = self.runtime.layouts[sub.fragment]
        tensors = unflatten(vec, {name: shape for name, (shape, _) in layout.items()})
        try:
            norm = validate_payload(tensors, layout)
        except PayloadRejected as exc:
            # the vector has the layout's sizes, so only its values can fail (NaN / inf)
            sub.reason, sub.detail = _REASON_OF_REJECT.get(exc.reason, "Malformed"), str(exc)
            sub.flat, sub.tree, sub.reported, sub.closed = vec, ChunkTree(vec), False, None
            log.error("trainer=%s fragment=%d: its whole-payload answer on-chain fails the payload checks (%s): "
                      "proving it %s", sub.trainer, sub.fragment, exc, sub.reason)
            self.report(sub)  # a refusal raises: the next poll reports it again
            return True
        sub.tensors, sub.tree, sub.flat, sub.reason, sub.detail = tensors, None, None, None, ""
        log.warning("trainer=%s fragment=%d: payload not fetchable from IPFS, read from its whole-payload answer "
                    "on-chain: accepted (norm %.4g)", sub.trainer, sub.fragment, norm)
        return True

    def expire_lapsed(self, run: RunView) -> None:
        """Root flow: expire each availability challenge of the open round whose answer window
        has passed (``expireAvailability``, anyone's to send: the submission is rejected, its
        trainer slashed, the bond and the bounty go to the challenger). The registry takes no commit
        while one is pending, so one left unanswered, this syncer's whole-payload demand of a
        withheld payload or a sybil's, would hold the round until this syncer is replaced; the
        commit waits a step after it (``run`` showed it open).

        Raises:
            ChainRevert: a refusal other than a challenge already closed.
        """
        if run.open_challenges:
            self._expire_challenges(self._round.first_block, self._round.round, wait=False)

    def _expire_challenges(self, from_block: int, round_: int | None, wait: bool) -> None:
        """Expire the availability challenges named by ``AvailabilityChallenged`` events from
        ``from_block`` on (of round ``round_`` only, unless None) that are still pending: each once
        its deadline has passed in chain time, waited out first when ``wait``, else skipped.

        Raises:
            ChainRevert: a refusal other than a challenge already closed.
        """
        for ev in self.chain.get_logs(from_block, self.chain.block_number(), ["AvailabilityChallenged"],
                                      task_id=self.task_id):
            a = ev["args"]
            r, f, trainer = int(a["round"]), int(a["fragment"]), a["trainer"]
            if (round_ is not None and r != round_) or (not wait and self.chain_now() <= int(a["deadline"])):
                continue
            pending = self.chain.availability_challenge(self.task_id, r, f, trainer)
            if str(pending["challenger"]).lower() == ZERO_ADDRESS:
                continue  # answered or expired already
            deadline = int(pending["deadline"])
            while wait and self.chain_now() <= deadline:
                self.check_stop()
                self.sleep(min(self.poll_s, max(0.1, deadline + 1 - self.chain_now())))
            if self.chain_now() <= deadline:
                continue  # a later challenge took its place: not lapsed yet
            self.nudge_devnet(deadline)
            try:
                res = self.chain.expire_availability(self.task_id, r, f, trainer)
            except ChainRevert as exc:
                if exc.error_name not in ("Registry__NoChallenge", "Registry__ChallengeDeadline"):
                    raise
                continue
            log.warning("availability challenge unanswered: trainer=%s round=%d fragment=%d expired, slashed %d atto",
                        trainer, r, f, res.event("InvalidProven")["slashed"])

    def root_slash_unrevealed(self, r: int, rs) -> int:
        """After this syncer committed round r: ``slashUnrevealed`` every on-chain forced
        commitment of the round's opening that was never revealed (``rs.commitments`` less the
        round's ``GradientSubmitted``; PROTOCOL.md §5, "Commit never reveal"). The registry burns
        the slash: a duty, not a gain. A refusal (revealed after all, slashed by another first, a
        commitment of an opening a rewind cut) or an outage is logged and left. Returns the
        commitments slashed."""
        revealed = {(s.fragment, s.key) for s in rs.subs.values() if not s.offchain}
        slashed = 0
        for f, trainer in sorted(rs.commitments - revealed):
            try:
                res = self.chain.slash_unrevealed(self.task_id, r, f, trainer)
            except (ChainRevert, ServiceUnavailable) as exc:
                log.info("round %d: trainer %s's forced commitment of fragment %d was not slashed: %s", r, trainer,
                         f, exc)
                continue
            slashed += 1
            self._tally("unrevealed_slashed", 1)
            log.warning("round %d: trainer %s committed fragment %d on-chain and never revealed it: slashed %d atto "
                        "(burned; tx %s)", r, trainer, f, int(res.event("TrainerSlashed")["amount"]), res.tx_hash)
        return slashed

"""A round from the trainer's side, delivery to commit (contracts/PROTOCOL.md §5; the wire and
phases in `tenzro_operator.root_flow`): the commit phase of each opening of a round (`closes_of`),
the wait for the syncer's ``commitRound`` while the round's submissions are delivered (`root_wait`:
a run sent back by a fraud proof forgets what was delivered; the accepted fragments are counted,
and a fragment left out silently switches the forced path on, `ForcedPath.check_left_out`), the
weights a committed round's transcript pins (`root_commit_weights`), and the ``copycat`` fault's
round (`copy_round`). `root_prepare` opens a run's root-flow state: the outbox, the phases, the
commits and the forced path (`ForcedPath.load_forced`).

A part of `TrainerDaemon` (`tenzro_operator.roles.trainer`). Must not import
`tenzro_operator.roles.trainer` (it imports this module), the syncer's modules (``roles.syncer*``)
or anything of `tenzro_operator.cli`.
"""

from __future__ import annotations

import logging

from tenzro_operator.chain import RunStatus, RunView
from tenzro_operator.ipfs.pubsub import submission_topic
from tenzro_operator.root_flow import (
    CommitMessage,
    RevealMessage,
    RootFlowError,
    committed_round,
    committed_weights,
    parse_message,
)

__all__ = ["RoundFollowing"]

log = logging.getLogger("tenzro.trainer")


class RoundFollowing:
    """`TrainerDaemon`'s rounds from delivery to commit (see the module docstring)."""

    _closes: dict  # round -> (its opening's roundOpenedAt, the commit phase's last second), chain time
    _copy_sub = None  # fault copycat: the subscription it copies from
    _committed: dict  # {round: its RoundCommitted args}, the last round root_wait saw committed

    def root_prepare(self) -> None:
        """Open the run's root-flow state (called by `prepare`): no outbox, phases or commits yet;
        the forced path as the config's ``force_onchain`` sets it, then as a previous life of this
        trainer in this run saved it (`ForcedPath.load_forced`)."""
        self._outbox, self._closes, self._committed, self._onchain, self._onchain_at = {}, {}, {}, {}, {}
        self.forced = bool(getattr(self.config, "force_onchain", False))
        self.load_forced()

    def closes_of(self, r: int, opened_at: int) -> int:
        """The commit phase end (chain seconds) of round r's opening at ``opened_at`` (the run's
        ``round_opened_at``; a rewind reopens a round later, with a phase of its own)."""
        if self._closes.get(r, (None,))[0] != opened_at:
            self._closes[r] = (opened_at, self.chain.commit_phase(self.task_id)[0])
        return self._closes[r][1]

    def root_wait(self, r: int) -> bool:
        """Deliver round r's submissions until the syncer commits the round (or the run leaves
        Training), answering the availability challenges of its forced submissions meanwhile (a
        whole-payload one included: an unanswered one loses the submission and 5 % of the stake);
        count the fragments its bitmap accepted. A run sent back by a fraud proof
        below round r, or to round r itself (a new opening), forgets what it delivered (the
        rounds are trained again). Returns True."""
        while True:
            run = self.chain.get_run(self.task_id)
            opening = self._closes.get(r, (run.round_opened_at,))[0]  # the opening delivered to
            reopened = run.current_round == r and opening != run.round_opened_at
            if run.status == RunStatus.TRAINING and (run.current_round < r or reopened):
                # a fraud proof discarded rounds: train the open round again from its (reverted) weights
                log.warning("the run went back to round %d (a round was proven wrong): training it again",
                            run.current_round)
                self._outbox.clear()
                self._closes.clear()
                self._onchain.clear()  # the reopened rounds start with no on-chain submission
                self.save_forced()
                self._skipped = {x for x in self._skipped if x < run.current_round}
                return True
            if run.status != RunStatus.TRAINING or run.current_round > r:
                break
            if r in self._outbox and self.chain_now() <= run.round_deadline:
                self.publish(r, run.round_opened_at)
            if self._onchain.get(r):  # a forced submission can be challenged until the commit: answer it
                self.answer_challenges()
            self.sleep(self.poll_s)
        delivered = dict(self._outbox.pop(r, []))
        if self._onchain.pop(r, None) is not None:
            self.save_forced()
        try:  # a cancelled run may not have committed round r; any other run past it did
            self._committed = {} if run.status == RunStatus.CANCELLED else {r: self._committed_event(r)}
        except RootFlowError:  # the run left Training without committing round r
            self._committed = {}
        bitmap = int(self._committed[r]["acceptedBitmaps"][self.index]) if self._committed else 0
        log.info("round %d committed: %d fragment(s) of this trainer accepted", r, self.count_accepted(bitmap))
        unendorsed = list(self._committed[r].get("unendorsedBitmaps") or []) if self._committed else []
        mine = int(unendorsed[self.index]) if unendorsed else 0
        if mine:  # PROTOCOL.md section 5 "Endorsed credit": paid only up to this trainer's endorsed credit
            log.warning("round %d: the syncer accepted fragment bitmap %#x of this trainer without endorsing it "
                        "(paid only up to its endorsed credit; the syncer's log says why)", r, mine)
            self.summary["unendorsed"] = self.summary.get("unendorsed", 0) + self.count_accepted(mine)
        self.check_left_out(r, delivered, bitmap)
        return True

    def root_commit_weights(self, r: int) -> dict:
        """Round r's committed weights (``fragmentCids`` / ``fragmentHashes``) from its transcript
        (`committed_weights`; the caller checks them against the run's weights root), from the
        event `root_wait` read, else read now.

        Raises:
            RootFlowError: round r has no ``RoundCommitted`` event yet (the step is retried).
        """
        ev = self._committed.get(r) or self._committed_event(r)
        cids, hashes = committed_weights(self.ipfs, ev)
        return {"fragmentCids": cids, "fragmentHashes": hashes}

    def _committed_event(self, r: int, wait_s: float = 30.0) -> dict:
        """Round r's ``RoundCommitted`` args once the registry shows the round committed, read again
        for up to ``wait_s`` seconds while the node lags (`committed_round`): a lagging node is no
        failure of this trainer's.

        Raises:
            RootFlowError: still no event after ``wait_s`` (the step fails and is retried).
        """
        return committed_round(self.chain, self.task_id, self.events.start_block, r, wait_s=wait_s,
                               sleep=self.sleep, poll_s=self.poll_s)

    def copy_round(self, run: RunView) -> str:
        """FAULT INJECTION (``fault: {kind: copycat}``; tests and demos only): the copying attack of
        the Protocol v2 issue. Trains nothing; for every reveal of another trainer in the open round
        it publishes a commitment to the same payload signed as its own, then that reveal. Its
        commitments come after the commit phase (a payload is first public in a reveal), so an
        honest syncer never credits it. Returns ``"next"``."""
        if self._copy_sub is None:
            self._copy_sub = self.ipfs.pubsub_subscribe(submission_topic(self.task_id))
            self._copied = set()
        topic, me = submission_topic(self.task_id), self.account.address.lower()
        while (msg := self._copy_sub.get(timeout_s=0)) is not None:
            try:
                m = parse_message(msg.data)
            except RootFlowError:
                continue
            if not isinstance(m, RevealMessage) or m.trainer == me or m.round != run.current_round \
                    or (m.round, m.fragment, m.trainer) in self._copied:
                continue
            base = bytes.fromhex(m.base_root[2:])
            signed = self.chain.sign_outer_gradient(self.task_id, m.round, m.fragment, m.signed_payload(),
                                                    base_root=base)
            mine = RevealMessage.of(self.task_id, m.round, m.fragment, me, base, signed)
            self.ipfs.pubsub_publish(topic, CommitMessage.signed(self.account, self.chain.chain_id,
                                                                 self.chain.registry.address, mine).encode())
            self.ipfs.pubsub_publish(topic, mine.encode())
            self._copied.add((m.round, m.fragment, m.trainer))
            log.warning("FAULT INJECTION: copied trainer %s's fragment %d of round %d as this trainer's", m.trainer,
                        m.fragment, m.round)
        self.sleep(self.poll_s)
        return "next"

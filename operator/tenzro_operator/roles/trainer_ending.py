"""How a run ends for a trainer (contracts/PROTOCOL.md §5): after the last round the run is
sealed once its last challenge window has passed (anyone may), and this trainer claims its reward
with a Merkle proof of its cumulative credits (`root_finish`). A run whose syncer went silent is
moved on by the trainer itself (Protocol v3, "every run ends"; `end_stalled_run`: the syncer
election, else ``cancelStalledRun``), and a cancelled run pays its committed rounds by the same
claims.

A part of `TrainerDaemon` (`tenzro_operator.roles.trainer`). Must not import
`tenzro_operator.roles.trainer` (it imports this module), the syncer's modules (``roles.syncer*``)
or anything of `tenzro_operator.cli`.
"""

from __future__ import annotations

import logging
import time

from tenzro_operator.chain import RunStatus, RunView
from tenzro_operator.credits import paid_credits
from tenzro_operator.errors import ChainError, ChainRevert
from tenzro_operator.root_flow import committed_rounds, credits_proof, cumulative_credits

__all__ = ["RunEnding"]

log = logging.getLogger("tenzro.trainer")


class RunEnding:
    """The end of a run for `TrainerDaemon`: a silent syncer, the seal, the claim (see the module
    docstring)."""

    #: seconds between two attempts at moving a run whose syncer went silent (each is a call and
    #: maybe a transaction; a replacement or a cancel needs only one to land)
    STALL_RETRY_S = 30.0
    #: seconds a trainer waits past ``syncerReplaceableAt`` before it moves the run on itself: a
    #: stand-in syncer replaces a silent one at once; a trainer gives a slow honest syncer (a loaded
    #: host) this long before a cancel could end a run that would still have finished
    STALL_GRACE_S = 300

    def end_stalled_run(self, run: RunView) -> bool:
        """Protocol v3, "every run ends": once the run's syncer is replaceable (``syncerReplaceableAt``
        passed, chain time, plus `STALL_GRACE_S`), anyone moves the run on. First ``cancelStalledRun`` (it succeeds only
        when no candidate could be elected: the silent syncer's bond burned, stakes back, the committed
        rounds' pot to their trainers); when the registry answers ``Registry__RunCanGoOn``, the
        two-step election instead, so a run without a stand-in syncer daemon still gets its next
        syncer. At most one attempt every `STALL_RETRY_S` seconds. True once the run is Cancelled.

        Raises:
            ChainRevert: a refusal other than the ones a live run gives (still active, can go on,
                challenges pending, challenge window open, not Training any more).
        """
        if not run.syncer_replaceable_at or self.chain_now() <= run.syncer_replaceable_at + self.STALL_GRACE_S:
            return False
        now = time.monotonic()
        if now - getattr(self, "_stall_tried_at", -self.STALL_RETRY_S) < self.STALL_RETRY_S:
            return False
        self._stall_tried_at = now
        try:
            ev = self.chain.cancel_stalled_run(self.task_id).event("StalledRunCancelled")
        except ChainRevert as exc:
            if exc.error_name == "Registry__RunCanGoOn":
                log.warning("the run's syncer %s is silent past its deadline: running the syncer election", run.syncer)
                try:
                    log.info("syncer election chose %s", self.chain.run_syncer_election(self.task_id))
                except ChainError as again:  # another party's election landed first, or no block came
                    log.info("syncer election did not happen: %s", again)
                return False
            if exc.error_name in ("Registry__SyncerStillActive", "Registry__ChallengesPending",
                                  "Registry__ChallengeWindowOpen", "Registry__WrongStatus"):
                return False
            raise
        log.warning("the run's syncer went silent and no candidate can take it: cancelled the stalled run after %d "
                    "committed round(s); stake refunded, %d atto pot for the committed rounds", ev["committedRounds"],
                    ev["trainersPot"])
        return True

    def root_finish(self, run: RunView) -> str:
        """After the last round: seal once the last challenge window has passed (anyone may), then
        claim this trainer's reward; after a stalled run's cancel (`end_stalled_run`), claim its share
        of the committed rounds' pot. Returns ``"done"`` once claimed (or nothing is owed)."""
        if run.status == RunStatus.COMPLETED:
            try:
                self.chain.seal_root_run(self.task_id)
                log.info("sealed the run")
            except ChainRevert as exc:
                if exc.error_name not in ("Registry__ChallengeWindowOpen", "Registry__ChallengesPending",
                                          "Registry__WrongStatus"):
                    raise
                self.nudge_devnet(self.chain_now())
                self.sleep(self.poll_s)
                return "next"
        if run.status not in (RunStatus.COMPLETED, RunStatus.SEALED, RunStatus.CANCELLED):
            return "done"
        if self.chain.claimed(self.task_id, self.index):
            log.info("reward already claimed")
            return "done"
        rounds = committed_rounds(self.chain, self.task_id, self.events.start_block, run.max_rounds)
        credits = cumulative_credits(rounds, self.runtime.sizes, run.enrolled_count)
        if paid_credits(credits[self.index]) == 0:
            log.info("no paid credits in this run (credits word %d): nothing to claim", credits[self.index])
            return "done"
        proof = credits_proof(credits, self.index, self.chain.root_state(self.task_id)[2])
        try:
            ev = self.chain.claim_reward(self.task_id, self.index, credits[self.index], proof).event("RewardClaimed")
        except ChainRevert as exc:
            if exc.error_name != "Registry__AlreadyClaimed":
                raise
            return "done"
        log.info("claimed %d atto for %d paid credits (withdrawable)", ev["reward"], paid_credits(ev["credits"]))
        self.summary["claimed_atto"] = self.summary.get("claimed_atto", 0) + int(ev["reward"])
        return "done"

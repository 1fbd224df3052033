"""The availability loop of issue #23 attack 1 as a trainer fault (``fault: {kind: challenge_loop}``,
off unless configured; for tests and ``make demo-adversarial``).

The trainer forces its payloads on-chain (publicly fetchable: the syncer accepts them) and plays
its own sybil: it challenges chunk after chunk of its own submissions (``challengeAvailability``,
its own bond, which its answer pays back to it, so the loop costs it gas only) and answers each
challenge in the last ``LATE_S`` seconds of its window, so that one is pending, and the round's
commit held back, for as long as the registry lets it. Protocol v3 bounds it (contracts/PROTOCOL.md
§4 "Bound of time", "Bound of count"): at most ``MAX_AVAILABILITY_CHALLENGES`` chunk challenges per
submission, none opened after max(roundDeadline, the syncer's election) + challengeSeconds; the
loop ends at the registry's refusal, which it logs (``ended``).
"""

from __future__ import annotations

import logging
from typing import Callable

from tenzro_operator.chain import ZERO_ADDRESS, SignedPayload
from tenzro_operator.errors import ChainRevert, InsufficientTokens
from tenzro_operator.roles.challenges import ChallengeAnswerer

log = logging.getLogger("tenzro.trainer")

LATE_S = 4  # answer this many chain seconds before the challenge's deadline
# the registry's refusals that end the loop on a submission (its bounds, or the submission gone)
ENDS = ("Registry__ChallengeLimit", "Registry__DeadlinePassed", "Registry__NoSuchSubmission",
        "Registry__WrongRound", "Registry__WrongStatus")


class ChallengeLoop:
    """One trainer's availability loop over its own forced submissions.

    Args:
        chain: the trainer's `ChainClient`. task_id: the run. start_block: the run's first block.
        answerer: the trainer's `ChallengeAnswerer` (it builds the openings).
        now: chain time, seconds (the daemon's ``chain_now``).
    """

    def __init__(self, chain, task_id: bytes, start_block: int, answerer: ChallengeAnswerer,
                 now: Callable[[], int]) -> None:
        self.chain, self.task_id, self.answerer, self.now = chain, task_id, answerer, now
        self._next_block = start_block  # the next block to read this trainer's submissions from
        self._mine: dict[tuple[int, int], dict] = {}  # (round, fragment) -> its latest GradientSubmitted args
        self.sent: dict[tuple[int, int], int] = {}  # (round, fragment) -> challenges this trainer opened
        self.ended: dict[tuple[int, int], str] = {}  # (round, fragment) -> the refusal that ended its loop

    def step(self, round_: int) -> None:
        """Answer a pending challenge of this trainer's round ``round_`` submissions once its window
        is nearly over; challenge the next chunk of one with none pending.

        Raises:
            ChainRevert: a refusal other than those that end the loop (`ENDS`).
        """
        me = self.chain.address
        head = self.chain.block_number()
        for ev in self.chain.get_logs(self._next_block, head, ["GradientSubmitted"], task_id=self.task_id):
            if ev["args"]["trainer"] == me:
                self._mine[(int(ev["args"]["round"]), int(ev["args"]["fragment"]))] = ev["args"]
        self._next_block = head + 1
        for key, a in sorted(self._mine.items()):
            if key[0] != round_ or key in self.ended:
                continue
            pending = self.chain.availability_challenge(self.task_id, *key, me)
            if str(pending["challenger"]).lower() != ZERO_ADDRESS:
                if self.now() >= int(pending["deadline"]) - LATE_S:
                    self.answerer.note(*key)
                    self.answerer.poll()
                continue
            chunk = self.sent.get(key, 0)
            try:
                self.chain.challenge_availability(self.task_id, *key, me, SignedPayload.from_event(a), chunk)
            except (ChainRevert, InsufficientTokens) as exc:
                name = getattr(exc, "error_name", type(exc).__name__)
                if isinstance(exc, ChainRevert) and name not in ENDS:
                    raise
                self.ended[key] = name
                log.warning("FAULT INJECTION: the availability loop on round %d fragment %d ends after %d "
                            "challenge(s): the registry refuses another (%s)", *key, chunk, name)
                continue
            self.sent[key] = chunk + 1
            log.warning("FAULT INJECTION: challenged chunk %d of its own submission of round %d fragment %d "
                        "(answered at the last seconds)", chunk, *key)

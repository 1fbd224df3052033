"""The syncer against protocol v3's bounds (issue #23), with a scripted chain, no devnet: a report the
registry refuses because the challenge window is over (`Registry__DeadlinePassed`) or the
submission's challenges are used up (`Registry__ChallengeLimit`) is settled, logged once, and not
retried every poll; any other refusal still raises. An answered submission the syncer still cannot
use is never challenged again. The fees of a
Cancelled run (`cancelStalledRun` keeps committed rounds' fees) are claimed as after a seal."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from tenzro_operator.chain import ZERO_ADDRESS, RunStatus, SignedPayload
from tenzro_operator.errors import ChainRevert
from tenzro_operator.roles.syncer import SyncerDaemon, _Sub

TRAINER = "0x" + "ab" * 20
CLOSED = ["Registry__DeadlinePassed", "Registry__ChallengeLimit"]


class ScriptedChain:
    """Answers the syncer's reads as an answered, unchallenged submission; every
    ``challenge_availability`` raises ``refusal`` and is counted."""

    def __init__(self, refusal: str) -> None:
        self.refusal, self.challenges = refusal, 0

    def challenge_availability(self, *args):
        self.challenges += 1
        raise ChainRevert(self.refusal, function="challengeAvailability")

    def availability_challenge(self, task_id, round, fragment, trainer):
        return {"challenger": ZERO_ADDRESS}  # the last challenge was answered

    def submissions_of(self, task_id, round, trainer):
        return (1, 0)  # submitted, not rejected


def _syncer(chain) -> SimpleNamespace:
    """The attributes `SyncerDaemon.report` and `_rechallenge_answered` read, one open round."""
    sub = _Sub(0, TRAINER, SignedPayload(b"\x01" * 32, 0, "bafyx", b"\x02" * 32), reason="Unavailable")
    ns = SimpleNamespace(chain=chain, task_id=b"\x07" * 32, _round=SimpleNamespace(round=3, subs={(0, sub.key): sub},
                                                                                split={}),
                         runtime=SimpleNamespace(sizes=[64]), _revalidate=lambda s: False, sub=sub)
    ns._challenge = lambda s: SyncerDaemon._challenge(ns, s)
    return ns


@pytest.mark.parametrize("refusal", CLOSED)
def test_a_report_the_registry_no_longer_takes_is_settled(refusal, caplog):
    """Before: `report` re-raised both reverts, so the syncer's collect failed on every poll until
    the run's end."""
    chain = ScriptedChain(refusal)
    s = _syncer(chain)
    with caplog.at_level(logging.WARNING):
        SyncerDaemon.report(s, s.sub)
    assert (s.sub.reported, s.sub.closed, chain.challenges) == (True, refusal, 1)
    assert refusal in caplog.text
    SyncerDaemon.report(s, s.sub)  # done: nothing sent again
    assert chain.challenges == 1


def test_a_report_refused_for_another_reason_still_raises():
    s = _syncer(ScriptedChain("Registry__WrongRound"))
    with pytest.raises(ChainRevert, match="Registry__WrongRound"):
        SyncerDaemon.report(s, s.sub)
    assert not s.sub.reported  # reported again on the next poll


def test_an_answered_payload_it_still_cannot_use_is_logged_once_and_never_challenged_again(caplog):
    """A forced submission answered (so live again) that the syncer can neither fetch nor read from a
    whole-payload answer on-chain: it stays live, is logged once, and no further challenge is sent
    (the whole-payload challenge was the one; the registry would refuse another anyway)."""
    chain = ScriptedChain("Registry__ChallengePending")  # any challenge sent would be counted
    s = _syncer(chain)
    s.sub.reported = True
    s._use_whole_answer = lambda sub: False
    with caplog.at_level(logging.ERROR):
        SyncerDaemon._rechallenge_answered(s)
        SyncerDaemon._rechallenge_answered(s)
    assert (chain.challenges, s.sub.closed) == (0, "unusable")
    assert caplog.text.count("no whole-payload answer on-chain holds it") == 1


def test_an_answered_payload_readable_from_its_whole_answer_is_used():
    chain = ScriptedChain("Registry__ChallengePending")
    s = _syncer(chain)
    s.sub.reported = True
    s._use_whole_answer = lambda sub: True
    SyncerDaemon._rechallenge_answered(s)
    assert (chain.challenges, s.sub.closed) == (0, "")


@pytest.mark.parametrize("status", [RunStatus.SEALED, RunStatus.CANCELLED])
def test_fees_are_claimed_once_the_run_ended(status):
    """Before: only a Sealed run's fees were claimed; a run ended by cancelStalledRun left the
    fees of its committed rounds unclaimed by the daemon."""
    claimed, tally = [], {}
    s = SimpleNamespace(check_stop=lambda: None, task_id=b"\x07" * 32,
                        chain=SimpleNamespace(get_run=lambda tid: SimpleNamespace(status=status)),
                        claim_fee=lambda: claimed.append(1) or 5, root_close=lambda: None,
                        _tally=lambda key, n: tally.update({key: tally.get(key, 0) + n}))
    assert SyncerDaemon.step(s) == "done"
    assert claimed == [1]
    # a run another account sealed first (a trainer, to claim) still ended sealed; a cancelled one did not
    assert tally == ({"runs_sealed": 1} if status == RunStatus.SEALED else {})

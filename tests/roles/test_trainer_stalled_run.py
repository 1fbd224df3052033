"""Protocol v3, "every run ends", from the trainer's side (issue #23): once the run's syncer is
replaceable, a trainer moves the run on: it cancels a run no candidate can take (stake back, the
committed rounds' pot claimable) and runs the election when one can. A unit test of
`TrainerDaemon.end_stalled_run`: the chain is a stand-in that answers as the registry does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tenzro_operator.errors import ChainRevert
from tenzro_operator.roles.trainer import TrainerDaemon

SILENT = "0x" + "5" * 40


class _Chain:
    def __init__(self, cancel_refusal: str | None = None):
        self.cancel_refusal, self.cancels, self.elections = cancel_refusal, 0, 0

    def cancel_stalled_run(self, task_id):
        self.cancels += 1
        if self.cancel_refusal:
            raise ChainRevert(self.cancel_refusal)
        return SimpleNamespace(event=lambda name: {"committedRounds": 2, "trainersPot": 10**18})

    def run_syncer_election(self, task_id):
        self.elections += 1
        return "0x" + "e" * 40


def _trainer(chain, now: int):
    return SimpleNamespace(chain=chain, task_id=b"\x01" * 32, chain_now=lambda: now,
                           STALL_RETRY_S=TrainerDaemon.STALL_RETRY_S, STALL_GRACE_S=TrainerDaemon.STALL_GRACE_S)


LATE = 100 + TrainerDaemon.STALL_GRACE_S + 1  # chain time past the syncer's deadline and the trainers' grace


def _run(replaceable_at: int):
    return SimpleNamespace(syncer=SILENT, syncer_replaceable_at=replaceable_at)


def test_a_syncer_still_in_time_or_in_the_trainers_grace_is_left_alone():
    chain = _Chain()
    for now in (100, LATE - 1):  # before its deadline; late, but a stand-in's business, not yet a trainer's
        assert TrainerDaemon.end_stalled_run(_trainer(chain, now=now), _run(replaceable_at=100)) is False
    assert chain.cancels == chain.elections == 0


def test_a_run_nobody_can_take_is_cancelled(caplog):
    chain = _Chain()
    assert TrainerDaemon.end_stalled_run(_trainer(chain, now=LATE), _run(replaceable_at=100)) is True
    assert chain.cancels == 1 and chain.elections == 0
    assert "cancelled the stalled run after 2 committed round(s)" in caplog.text


def test_a_run_a_candidate_can_take_gets_its_election_once_per_retry_period():
    chain = _Chain("Registry__RunCanGoOn")
    t = _trainer(chain, now=LATE)
    assert TrainerDaemon.end_stalled_run(t, _run(replaceable_at=100)) is False
    assert TrainerDaemon.end_stalled_run(t, _run(replaceable_at=100)) is False  # within STALL_RETRY_S: no call
    assert (chain.cancels, chain.elections) == (1, 1)


@pytest.mark.parametrize("refusal", ["Registry__ChallengesPending", "Registry__ChallengeWindowOpen",
                                     "Registry__SyncerStillActive", "Registry__WrongStatus"])
def test_a_live_run_s_refusals_are_waited_out(refusal):
    chain = _Chain(refusal)
    assert TrainerDaemon.end_stalled_run(_trainer(chain, now=LATE), _run(replaceable_at=100)) is False
    assert chain.elections == 0


def test_any_other_refusal_is_raised():
    with pytest.raises(ChainRevert):
        TrainerDaemon.end_stalled_run(_trainer(_Chain("Registry__Paused"), now=LATE), _run(replaceable_at=100))

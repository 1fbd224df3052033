"""The run read model's folds (`tenzro_operator.views.run`) on hand-made root-flow events: commits,
a rewind by a fraud proof and the round committed again, slot challenges and their outcomes,
credits per trainer as the registry sums them, and the run's phase with the time it next changes.
The same read model against a sealed run on a devnet: tests/run_view_checks.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tenzro_operator.chain import RunStatus, RunView
from tenzro_operator.views.run import (
    RunViewError,
    fold_root_rounds,
    fold_root_trainers,
    phase_of,
    quorum_met,
)

B32 = bytes(32)
TIMES = {10: 1_000, 20: 1_100, 30: 1_200, 40: 1_300}


def _ev(name: str, block: int, **args) -> dict:
    return {"event": name, "args": {"taskId": B32, **args}, "block_number": block, "tx_hash": f"0x{block:064x}",
            "log_index": 0}


def _commit(r: int, block: int, bitmaps: list[int], total: int, tag: int) -> dict:
    return _ev("RoundCommitted", block, round=r, fragmentsRoot=bytes([tag]) * 32, weightsRoot=bytes([tag + 1]) * 32,
               creditsRoot=bytes([tag + 2]) * 32, totalCredits=total, acceptedBitmaps=bitmaps,
               transcriptHash=bytes([tag + 3]) * 32, transcriptCid=f"bafy-{tag}")


def _fold(events):
    return fold_root_rounds(events, TIMES.__getitem__, fragment_count=2, quorum=2, challenge_seconds=30)


def test_commits_fold_into_rounds_with_their_window_and_counts():
    rounds = _fold([_ev("RoundOpened", 5, round=0, weightsRoot=B32, openedAt=900, deadline=960),
                    _commit(0, 10, [0b11, 0b01, 0b00], 30, 1),
                    _ev("RoundOpened", 10, round=1, weightsRoot=B32, openedAt=1_000, deadline=1_060)])
    r0, r1 = rounds[0], rounds[1]
    assert (r0.status, r0.opened_at, r0.committed_at, r0.challenge_window_ends_at) == ("committed", 900, 1_000, 1_030)
    assert (r0.accepted_count, r0.quorum_met, r0.accepted_bitmaps) == (3, False, [0b11, 0b01, 0b00])
    assert r0.weights_root == "0x" + "02" * 32 and r0.transcript_cid == "bafy-1" and r0.total_credits == 30
    assert r0.to_json()["seconds"] == 100 and r0.to_json()["finalized"] is True
    assert (r1.status, r1.committed_at, r1.deadline) == ("open", None, 1_060)


def test_a_rewind_discards_rounds_until_they_are_committed_again():
    events = [_commit(0, 10, [0b11, 0b11], 40, 1), _commit(1, 20, [0b11, 0b10], 70, 10),
              _ev("RoundProvenWrong", 30, round=1, kind=1, fragment=0, position=7, prover="0xP", syncer="0xS",
                  slashed=100, bounty=10),
              _ev("RoundsDiscarded", 30, fromRound=1, toRound=2)]
    rounds = _fold(events)
    assert rounds[1].status == "discarded" and rounds[1].weights_root is None and not rounds[1].live
    assert rounds[1].discarded_commits[0]["weights_root"] == "0x" + "0b" * 32
    assert rounds[1].proven_wrong[0]["kind_name"] == "aggregate" and rounds[1].proven_wrong[0]["slashed"] == "100"
    # credits count only the live rounds: round 0's bitmaps, 10 coordinates per fragment
    assert fold_root_trainers(rounds, [10, 10], 2) == [(2, 20), (2, 20)]
    rounds = _fold(events + [_commit(1, 40, [0b01, 0b11], 70, 20)])
    assert rounds[1].status == "committed" and rounds[1].committed_at == 1_300 and rounds[1].proven_wrong
    assert rounds[1].weights_root == "0x" + "15" * 32 and len(rounds[1].discarded_commits) == 1
    assert fold_root_trainers(rounds, [10, 5], 2) == [(3, 25), (4, 30)]


def test_slot_challenges_get_their_outcome():
    ch = dict(round=0, challenger="0xC", deadline=1_050, bond=7)
    rounds = _fold([_commit(0, 10, [0b11, 0b11], 40, 1),
                    _ev("SlotChallenged", 20, fragment=0, index=1, **ch),
                    _ev("SlotChallenged", 20, fragment=1, index=0, **ch),
                    _ev("SlotChallenged", 20, fragment=1, index=1, **ch),
                    _ev("SlotAnswered", 30, round=0, fragment=0, index=1, structHash=B32, answerer="0xA"),
                    _ev("RoundProvenWrong", 40, round=0, kind=4, fragment=1, position=0, prover="0xC", syncer="0xS",
                        slashed=1, bounty=1)])
    assert [c["outcome"] for c in rounds[0].challenges] == ["answered", "expired: round proven wrong", "pending"]


def test_credits_refuse_a_bitmap_list_of_the_wrong_length():
    rounds = _fold([_commit(0, 10, [0b11], 20, 1)])
    with pytest.raises(RunViewError, match="1 bitmaps for 2 enrolled"):
        fold_root_trainers(rounds, [10, 10], 2)


def test_quorum_is_per_fragment():
    assert quorum_met([0b11, 0b11], 2, 2) and not quorum_met([0b11, 0b01], 2, 2) and quorum_met([], 0, 3)


def _run(status: RunStatus, **kw) -> RunView:
    return RunView(status=status, challenge_seconds=30, **kw)


def test_phase_names_the_next_change_and_its_time():
    assert phase_of(_run(RunStatus.ENROLLING, enrollment_deadline=500), 100) == \
        ("ENROLLING", 500, "enrollment closes")
    assert phase_of(_run(RunStatus.TRAINING, current_round=2, round_deadline=900), 100)[1:] == \
        (900, "round 2's deadline")
    # a completed run waits for its last round's challenge window (sealable after it)
    assert phase_of(_run(RunStatus.COMPLETED), 1_020, last_commit_at=1_000)[1] == 1_031
    assert phase_of(_run(RunStatus.COMPLETED), 1_031, last_commit_at=1_000)[1:] == (None, "sealable now")
    assert phase_of(_run(RunStatus.COMPLETED), 0)[1:] == (None, "sealable now")
    sealed = _run(RunStatus.SEALED)
    assert phase_of(sealed, 10, claim_deadline=99)[1] == 100
    assert phase_of(sealed, 100, claim_deadline=99)[1] is None
    assert phase_of(sealed, 100, claim_deadline=99, swept=True)[1:] == (None, "final")
    assert phase_of(sealed, 100)[1:] == (None, "final")


def test_trainer_lookup_names_the_run():
    from tenzro_operator.views.run import RunReadModel, TrainerRow

    view = RunReadModel(task_id=b"\x01" * 32, run=SimpleNamespace(), head_block=1, now=1, phase="SEALED",
                        next_change_at=None, next_change="final", trainers=[TrainerRow(trainer="0xAbC", index=0)],
                        rounds=[])
    assert view.trainer("0xabc").index == 0
    with pytest.raises(RunViewError, match="0x0101"):
        view.trainer("0xdef")

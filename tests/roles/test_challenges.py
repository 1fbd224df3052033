"""An honest trainer daemon answers availability challenges of its forced submissions
(contracts/PROTOCOL.md §4, §5 "Forced inclusion"): a hostile party challenges a valid one while
the round is open; the trainer opens the chunk from its own pinned payload, so the challenger's
bond becomes the trainer's and nobody is slashed."""

from __future__ import annotations

import time

import pytest
from roles_stack import (
    TRAINERS,
    accepted_counts,
    events,
    fail_first_fetch,
    post_small_task,
    syncer_daemon,
    trainer_daemon,
)
from stack import TOKEN
from tenzro_operator.chain import RunStatus, SignedPayload


def _paid(client, tid, trainer: str) -> int:
    """What the run credited ``trainer``: its stake back at the seal and its claimed reward."""
    refund = sum(e["args"]["stakeRefund"] for e in events(client, tid, "PayoutCredited")
                 if e["args"]["account"] == trainer)
    return refund + sum(e["args"]["reward"] for e in events(client, tid, "RewardClaimed")
                        if e["args"]["trainer"] == trainer)

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slow
def test_trainer_daemon_answers_a_challenge_and_keeps_the_bond(dev, runner, tmp_path):
    # M = 3, K = 2: the third trainer (enrolled by hand) never submits, so round 0 stays open until
    # its deadline (the syncer waits for it) and the challenge lands while the honest forced
    # submission is still live
    tid = post_small_task(dev, trainers=3, quorum=2, fragments=2, rounds=1, grace_window_ms=30_000,
                          challenge_window_ms=10_000)
    idle = dev.client(TRAINERS[2])
    idle.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{idle.address}")
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=60.0, evaluate=False))
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0", force_onchain=True))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    client = dev.client()
    honest = dev.client(TRAINERS[0]).address
    before = client.withdrawable(honest)  # the devnet is shared with other tests of the session

    deadline = time.monotonic() + 180
    ev = None
    while ev is None:
        assert time.monotonic() < deadline, "no submission to challenge"
        ev = next((e for e in events(client, tid, "GradientSubmitted")
                   if e["args"]["trainer"] == honest and e["args"]["fragment"] == 1), None)
        time.sleep(0.3)
    hostile = dev.client(TRAINERS[3])
    bond = hostile.call("challengeBond", tid)
    hostile.challenge_availability(tid, 0, 1, honest, SignedPayload.from_event(ev["args"]), 2)

    results = runner.join(240)
    assert results == {"syncer": 0, "honest0": 0, "honest1": 0}, results
    assert client.get_run(tid).status == RunStatus.SEALED
    (answer,) = events(client, tid, "AvailabilityAnswered")
    assert (answer["args"]["trainer"], answer["args"]["round"], answer["args"]["fragment"]) == (honest, 0, 1)
    assert client.trainer_stats(tid, honest).slashed == 0
    assert accepted_counts(client, tid)[honest] == 2  # answered: live, so the syncer had to accept it
    assert not events(client, tid, "InvalidProven")
    # the challenger's bond went to the honest trainer, beside its stake and its reward
    assert client.withdrawable(honest) == before + _paid(client, tid, honest) + bond


@pytest.mark.slow
def test_a_payload_the_syncer_could_not_fetch_is_accepted_once_its_trainer_answers(dev, runner, tmp_path):
    """The syncer's first fetch of an honest forced payload fails (its own node restarting, a slow
    network): it rejects the payload ``Unavailable`` and demands it whole; the trainer daemon answers
    from its pinned copy, so the bytes exist; the syncer fetches again, accepts the payload and the
    trainer is credited for every fragment: a fault on the syncer's side costs an honest trainer
    nothing (and earns it the challenge bond)."""
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1, grace_window_ms=30_000,
                          challenge_window_ms=10_000)
    client = dev.client()
    honest = dev.client(TRAINERS[0]).address
    before = client.withdrawable(honest)
    sync = syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, fetch_retries=1)
    failed = fail_first_fetch(sync, client, tid, honest)
    runner.start("syncer", sync)
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0", force_onchain=True,
                                           publish_pubsub=False))  # delivered on-chain only
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    assert runner.join(240) == {"syncer": 0, "honest0": 0, "honest1": 0}
    assert len(failed) == 1
    assert client.get_run(tid).status == RunStatus.SEALED
    assert [e["args"]["trainer"] for e in events(client, tid, "AvailabilityChallenged")] == [honest]
    assert [e["args"]["trainer"] for e in events(client, tid, "AvailabilityAnswered")] == [honest]
    assert events(client, tid, "TrainerSlashed") == []
    accepted = accepted_counts(client, tid)
    for idx in TRAINERS[:2]:
        who = dev.client(idx).address
        assert (accepted[who], client.trainer_stats(tid, who).slashed) == (2, 0)
    assert client.withdrawable(honest) == before + _paid(client, tid, honest) + client.call("challengeBond", tid)

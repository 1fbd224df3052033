"""A root-flow syncer proves a forced norm outlier against the previous round's accepted sums
(``proveNormOutlier``, contracts/PROTOCOL.md §4, issue #23 attack 6). Before, the operator's
syncer screened only off-chain submissions in the root flow and had to aggregate every forced
one: a trainer forcing its update x100 was credited and weighed in the robust rule. Now the
forced payload is judged against a reference the round's own submitters cannot move, proven
on-chain (the trainer slashed) and left out; the run seals."""

from __future__ import annotations

import pytest
from roles_stack import TRAINERS, events, post_small_task, syncer_daemon, trainer_daemon
from tenzro_operator.chain import RunStatus, SlashReason
from tenzro_operator.root_flow import committed_rounds

pytestmark = pytest.mark.timeout(400)


@pytest.mark.slow
def test_a_forced_norm_outlier_is_proven_against_the_previous_rounds_accepted_sums(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=3, quorum=2, fragments=2, rounds=2, grace_window_ms=20_000,
                          challenge_window_ms=10_000)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, straggler_wait_s=30.0))
    for k in range(2):
        runner.start(f"t{k}", trainer_daemon(dev, TRAINERS[k], tid, tmp_path / f"t{k}"))
    # trainer 2 delivers on the forced path only; honest in round 0, its update x100 in round 1
    runner.start("booster", trainer_daemon(dev, TRAINERS[2], tid, tmp_path / "t2", force_onchain=True,
                                           publish_pubsub=False, fault={"kind": "scale100", "rounds": [1]}))
    results = runner.join(360)
    client = dev.client()
    assert results == {"syncer": 0, "t0": 0, "t1": 0, "booster": 0}, results
    assert client.get_run(tid).status == RunStatus.SEALED
    booster = dev.client(TRAINERS[2]).address
    proofs = [e["args"] for e in events(client, tid, "InvalidProven")]
    assert {(a["trainer"], int(a["round"]), int(a["reason"])) for a in proofs} == \
        {(booster, 1, int(SlashReason.NORM_OUTLIER))}
    assert len(proofs) == 2  # both fragments of round 1
    assert client.trainer_stats(tid, booster).slashed > 0
    i = client.trainers_of(tid).index(booster)
    rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
    assert [int(rounds[r]["acceptedBitmaps"][i]) for r in (0, 1)] == [3, 0]  # credited in round 0, not in 1
    assert events(client, tid, "RoundProvenWrong") == []

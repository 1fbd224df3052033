"""Overlap on the devnet (issue 10): with ``overlap_steps`` in the spec, trainers run the next
round's first inner steps while the syncer settles the round they delivered, rebase them on the
committed weights, and the run seals with every submission accepted and a receipt that replays."""

from __future__ import annotations

import pytest

from roles_stack import TRAINERS, accepted_counts, post_small_task, read_jsonl, syncer_daemon, trainer_daemon
from tenzro_operator.chain import RunStatus

pytestmark = pytest.mark.timeout(400)


@pytest.mark.slow
def test_trainers_take_early_steps_while_a_round_settles_and_the_run_seals(dev, runner, tmp_path):
    h = 6
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=3, inner_steps=h, overlap_steps=h)
    # the syncer waits after quorum: time in which the trainers' early steps run
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=2.0))
    for k in range(2):
        runner.start(f"t{k}", trainer_daemon(dev, TRAINERS[k], tid, tmp_path / f"t{k}"))
    assert runner.join(300) == {"syncer": 0, "t0": 0, "t1": 0}
    client = dev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    accepted = accepted_counts(client, tid)
    for k in range(2):
        who = dev.client(TRAINERS[k]).address
        assert (accepted[who], client.trainer_stats(tid, who).slashed) == (6, 0)
        rows = read_jsonl(tmp_path / f"t{k}" / "trainer-rounds.jsonl")
        assert [r["round"] for r in rows] == [0, 1, 2]
        assert rows[0]["early_steps"] == 0  # nothing to overlap before round 0
        assert all(1 <= r["early_steps"] <= h and r["early_s"] > 0 for r in rows[1:]), rows
        assert all(r["steps"] == h for r in rows)  # early + the rest = H, never more
    from tenzro_operator.replay import verify_receipt

    report = verify_receipt(client, dev.ipfs(), tid)
    assert report.ok, report.first_mismatch

"""A root-flow syncer slow to get ready loses no honest commitment (issue 25, found by cutting a
trainer's host in `make demo-hosts`).

Round 0 opens when the enrollment closes, the same block that elects the syncer; the elected
syncer then rebuilds its state (`restore`: the weights fetched and evaluated), which a slow or
stalled IPFS fetch can stretch past round 0's commit phase. Before, the syncer subscribed to the
submission topic only when it began collecting, and judged each message at the chain time it read
it: the trainers' commitments, published (and republished) during the commit phase, were either
never received or refused as late, and round 0 was committed with nothing accepted. Now it
subscribes once elected, before `restore`, and judges each message at the time it arrived."""

from __future__ import annotations

import time

import pytest
from roles_stack import TRAINERS, events, post_small_task, syncer_daemon, trainer_daemon
from tenzro_operator.chain import RunStatus
from tenzro_operator.root_flow import committed_rounds

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slow
def test_commitments_sent_while_the_syncer_gets_ready_are_taken(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1, grace_window_ms=16_000,
                          challenge_window_ms=6_000)
    client = dev.client()
    sync = syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, straggler_wait_s=30.0)
    restore, waited = sync.restore, []

    def slow_restore():
        # a restore that outlasts round 0's commit phase, as the stalled weights fetch did
        closes = client.commit_phase(tid)[0]
        while sync.chain_now() <= closes + 1:
            time.sleep(0.5)
        waited.append(closes)
        restore()

    sync.restore = slow_restore
    runner.start("syncer", sync)
    for k in range(2):
        runner.start(f"t{k}", trainer_daemon(dev, TRAINERS[k], tid, tmp_path / f"t{k}"))
    assert runner.join(240) == {"syncer": 0, "t0": 0, "t1": 0}
    assert waited, "the slow restore ran"
    assert client.get_run(tid).status == RunStatus.SEALED
    (bitmaps,) = [list(r["acceptedBitmaps"]) for r in committed_rounds(client, tid, client.deployment.deploy_block,
                                                                         1).values()]
    assert bitmaps == [3, 3], bitmaps  # both trainers, both fragments, off-chain: nothing had to be forced
    assert events(client, tid, "GradientSubmitted") == []

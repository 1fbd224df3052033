"""A trainer daemon whose inner loop is one torchrun job of 2 gloo ranks (``devices: 2``,
`tenzro_trainer.worker_group.TorchrunWorker`) trains a root-flow round on the devnet beside an
in-process trainer, and the syncer accepts and credits its submissions. Its restart checkpoint is
the sharded one (``format: fsdp2-full``); a restart with another kind of worker starts the inner state
fresh with a warning instead of crashing, and the job is gone once the daemon is done."""

from __future__ import annotations

import logging

import pytest
import torch

from roles_stack import TRAINERS, post_small_task, syncer_daemon, trainer_daemon
from tenzro_operator.chain import RunStatus
from tenzro_operator.daemon import load_state_file
from tenzro_operator.root_flow import committed_rounds
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.worker_group import TorchrunWorker, _pid_alive

pytestmark = pytest.mark.timeout(400)


@pytest.mark.slow
def test_a_two_rank_trainer_daemon_is_credited_on_the_root_flow(dev, runner, tmp_path, caplog):
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1, grace_window_ms=60_000,
                          challenge_window_ms=4_000)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=30.0, evaluate=False))
    multi = trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0", devices=2)
    runner.start("t0", multi)
    runner.start("t1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    results = runner.join(360)
    assert results == {"syncer": 0, "t0": 0, "t1": 0}, results

    client = dev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    rounds = committed_rounds(client, tid, client.deployment.deploy_block, 1)
    trainers = [a.lower() for a in client.trainers_of(tid)]
    me = trainers.index(dev.client(TRAINERS[0]).address.lower())
    assert list(rounds[0]["acceptedBitmaps"])[me] == 0b11  # both fragments of the 2-rank trainer accepted
    assert multi.summary["rounds_trained"] == 1

    # the daemon ended its job; its checkpoint is the sharded one
    assert isinstance(multi.worker, TorchrunWorker) and not multi.worker.alive
    assert not any(_pid_alive(p) for p in multi.worker.pids)
    saved = load_state_file(multi.state_path)
    assert saved["inner"]["format"] == "fsdp2-full" and saved["round"] == 0

    # a restart with devices: 1 cannot load it: a warning and a fresh in-process inner state
    multi.config.devices = 1
    with caplog.at_level(logging.WARNING, logger="tenzro.trainer"):
        multi.build_worker()
    assert isinstance(multi.worker, InnerTrainer)
    assert "format fsdp2-full but devices=1 wants in-process" in caplog.text
    assert "restored inner state" not in caplog.text

    # and with devices: 2 again, the job resumes it
    multi.config.devices = 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tenzro.trainer"):
        multi.build_worker()
    try:
        assert isinstance(multi.worker, TorchrunWorker) and multi.worker.alive
        assert "restored inner state after round 0" in caplog.text
        # the sampler is where round 0 left it (a fresh one would draw round 0's batches again)
        assert torch.equal(multi.worker.state_dict()["data"]["generator"], saved["inner"]["data"]["generator"])
    finally:
        multi.close_worker()
    assert not any(_pid_alive(p) for p in multi.worker.pids)

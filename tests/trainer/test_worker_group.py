"""`TorchrunWorker`: the daemon's inner loop as one torchrun job of N gloo ranks on the CPU, kept
across calls. It computes what one process computes (the tolerance of test_sharded.py: 1 % of the
largest movement AdamW can make in the round), resumes its checkpoint on another world size, and
fails loudly, never silently or by hanging: a rank that raises is named, a killed job is reported
by the next call, and close() leaves no process behind.
"""

import os
import signal

import pytest
import torch

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data import WindowDataset
from tenzro_trainer.errors import ConfigError, TrainerError
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.sharded_round import build_split, initial_state
from tenzro_trainer.worker_group import TorchrunWorker, WorkerFailed, _pid_alive
from test_sharded import BATCH, H, LR, TOL, max_diff, reference  # noqa: F401 - reference is a fixture

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def setup():
    cfg = ModelConfig.preset("cpu-test", "timesfm")
    return cfg, build_split(cfg, None)


def worker(setup, nproc: int, **kw) -> TorchrunWorker:
    """A worker on the same data as the `reference` (every series, sampler seed 0, one thread a rank)."""
    cfg, split = setup
    return TorchrunWorker(cfg, InnerConfig(steps=H, batch_size=BATCH, lr=LR, seed=0), split, None, data_seed=0,
                          nproc=nproc, threads=1, **kw)


def test_two_ranks_run_the_round_one_process_runs_and_relay_progress(setup, reference):
    start, ref = reference
    steps = []
    with worker(setup, 2) as w:
        assert w.world == 2 and w.device == "cpu"
        res = w.run(start, on_step=lambda i, n: steps.append((i, n)))
        local = w.local_state()
    assert steps == [(i, H) for i in range(1, H + 1)]
    assert max_diff(ref.state, start) > 100 * TOL  # the round moved the weights: the tolerance is not vacuous
    assert max_diff(res.state, ref.state) <= TOL
    assert all(torch.equal(local[k], res.state[k]) for k in res.state)
    assert res.mean_loss == pytest.approx(ref.mean_loss, rel=1e-5)
    assert len(res.step_times) == H and res.samples == H * BATCH


def test_overlap_finish_round_matches_the_in_process_worker(setup):
    """One early step from the worker's own weights, rebased on new global weights, then the rest of
    H (`InnerTrainer.finish_round`, as roles/overlap.py drives it): the same as in process."""
    cfg, split = setup
    start = initial_state(cfg, 0)
    moved = {k: v + 0.01 for k, v in start.items()}  # the "committed" weights of the previous round
    inner = InnerConfig(steps=H, batch_size=BATCH, lr=LR, seed=0)
    ref_worker = InnerTrainer(cfg, inner, WindowDataset(split, seed=0))
    ref_worker.load_global(start)
    ref = ref_worker.finish_round([ref_worker.run(None, steps=1)], start, moved)
    with worker(setup, 2) as w:
        early = w.run(start, steps=1)
        res = w.finish_round([early], start, moved)
    assert len(res.step_times) == H
    assert max_diff(res.state, ref.state) <= TOL
    assert res.mean_loss == pytest.approx(ref.mean_loss, rel=1e-5)


def test_a_two_rank_checkpoint_resumes_on_one_rank(setup, reference):
    start, ref = reference
    with worker(setup, 2) as w:
        w.run(start, steps=H // 2)
        ckpt = w.state_dict()
    assert ckpt["format"] == "fsdp2-full"
    with worker(setup, 1) as w1:
        with pytest.raises(ConfigError, match="not a sharded inner checkpoint"):
            w1.load_state_dict({"model": {}})  # an InnerTrainer checkpoint: refused, the job stays up
        w1.load_state_dict(ckpt)
        res = w1.run(None, steps=H - H // 2)
    assert max_diff(res.state, ref.state) <= TOL


def test_a_rank_that_raises_is_named_and_the_job_torn_down(setup):
    w = worker(setup, 2)
    try:
        with pytest.raises(WorkerFailed, match=r"fault failed on rank 1: RuntimeError: injected") as err:
            w._call("fault", rank=1, message="injected")
        assert err.value.ranks[0] == 1 and isinstance(err.value, TrainerError)
        assert not w.alive and not any(_pid_alive(p) for p in w.pids)
        with pytest.raises(WorkerFailed, match="torchrun worker is gone .*rank 1"):
            w.run(None, steps=1)
    finally:
        w.close()


def test_a_killed_rank_gives_a_clear_error_on_the_next_call(setup):
    w = worker(setup, 2)
    try:
        os.kill(w.pids[2], signal.SIGKILL)  # rank 1
        w._proc.wait(timeout=60)  # torchrun notices and ends the job
        with pytest.raises(WorkerFailed, match=r"the job ended \(exit code \d+\) during run"):
            w.run(None, steps=1)
    finally:
        w.close()
    assert not any(_pid_alive(p) for p in w.pids)


def test_a_silent_job_times_out_instead_of_hanging(setup):
    w = worker(setup, 2, reply_timeout_s=2.0)
    try:
        os.kill(w.pids[1], signal.SIGSTOP)  # rank 0 frozen: alive, silent
        with pytest.raises(WorkerFailed, match="no word from rank 0 for 2 s during local_state"):
            w.local_state()
    finally:
        w.close()
    assert not any(_pid_alive(p) for p in w.pids)


def test_a_batch_smaller_than_the_ranks_fails_the_start_with_the_ranks_error(setup):
    cfg, split = setup
    with pytest.raises(WorkerFailed, match=r"start failed on rank [01]: ConfigError: batch_size 1 is smaller"):
        TorchrunWorker(cfg, InnerConfig(steps=1, batch_size=1), split, None, nproc=2, threads=1)


def test_close_leaves_no_process(setup):
    w = worker(setup, 2)

    def boom(i, n):
        raise KeyboardInterrupt  # e.g. a progress bar interrupted: the call ends, the job stays in step

    with pytest.raises(KeyboardInterrupt):
        w.run(None, steps=2, on_step=boom)
    assert w.run(None, steps=1).samples == BATCH
    assert len(w.pids) == 3 and all(_pid_alive(p) for p in w.pids)
    w.close()
    assert not any(_pid_alive(p) for p in w.pids)
    with pytest.raises(WorkerFailed, match="closed"):
        w.run(None, steps=1)
    w.close()  # idempotent


def test_the_job_ends_when_the_daemon_goes_away(setup):
    """The daemon's end of the connection closes (as when its process dies, SIGKILL included, with no
    atexit): rank 0 sees EOF and exits, and torchrun ends the job with every rank."""
    w = worker(setup, 2)
    try:
        w._conn.close()
        assert w._proc.wait(timeout=60) != 0
        assert not any(_pid_alive(p) for p in w.pids[1:])
    finally:
        w._conn = None
        w.close()

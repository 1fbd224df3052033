"""The sharded (FSDP2) inner loop computes what one process computes: `ShardedInnerTrainer` under
torchrun with gloo, 1 and 2 CPU ranks, against `InnerTrainer` on the same global batches.

Tolerance. One rank is bit-identical (the same kernels on the same batch). Two ranks reduce-scatter two
half-batch gradients where one process sums the batch in one kernel: the gradients differ by fp32
rounding (~1e-7 relative), and AdamW's normalised step ``m / (sqrt(v) + eps)`` turns that into at most
a fraction of lr on coordinates whose gradient is near zero. We allow 1 % of the largest movement
AdamW can make in the round (H * lr per coordinate): measured 1.3e-6 against 1.2e-5 for H=4,
lr=3e-4. A wrong share of the loss (an unweighted or unaveraged rank) moves weights by ~lr per step
and fails it.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data import WindowDataset
from tenzro_trainer.errors import ConfigError
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.sharded_round import build_split, initial_state

H, BATCH, LR = 4, 16, 3e-4
TOL = 0.01 * H * LR


def torchrun(nproc: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "-m", "tenzro_trainer.sharded_round", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def run_round(tmp_path, nproc: int, *extra: str, name: str | None = None) -> tuple[dict, dict]:
    out = tmp_path / (name or f"n{nproc}")
    proc = torchrun(nproc, "--steps", str(H), "--batch", str(BATCH), "--lr", str(LR), "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load_file(str(out / "state.safetensors")), json.loads((out / "result.json").read_text())


@pytest.fixture(scope="module")
def reference():
    """One process, `InnerTrainer`, the same global batches: H steps from the seed-0 weights, on one
    thread as each rank (a thread count changes the order of a kernel's sums)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = ModelConfig.preset("cpu-test", "timesfm")
    start = initial_state(cfg, 0)
    worker = InnerTrainer(cfg, InnerConfig(steps=H, batch_size=BATCH, lr=LR, seed=0),
                          WindowDataset(build_split(cfg, None), seed=0))
    result = worker.run(start)
    torch.set_num_threads(threads)
    return start, result


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_one_rank_is_bit_identical_to_the_plain_inner_loop(tmp_path, reference):
    _, ref = reference
    state, result = run_round(tmp_path, 1)
    assert result["world"] == 1
    assert all(torch.equal(state[k], ref.state[k]) for k in ref.state)
    assert result["mean_loss"] == pytest.approx(ref.mean_loss, rel=1e-7)


def test_two_gloo_ranks_match_one_process_on_the_same_global_batch(tmp_path, reference):
    start, ref = reference
    state, result = run_round(tmp_path, 2)
    assert result["world"] == 2
    moved = max_diff(ref.state, start)
    assert moved > 100 * TOL  # the round did move the weights: the tolerance is not vacuous
    assert max_diff(state, ref.state) <= TOL
    assert result["mean_loss"] == pytest.approx(ref.mean_loss, rel=1e-5)


def test_a_killed_two_rank_job_resumes_on_one_rank(tmp_path, reference):
    """H/2 steps on 2 ranks, checkpoint (rank 0, full state), then H/2 more on 1 rank from it: the
    same weights as H steps straight (the sampler and AdamW moments travel in the checkpoint)."""
    _, ref = reference
    ckpt = tmp_path / "ckpt.pt"
    half = str(H // 2)
    first = torchrun(2, "--steps", half, "--batch", str(BATCH), "--lr", str(LR), "--out", str(tmp_path / "a"),
                     "--checkpoint", str(ckpt))
    assert first.returncode == 0, first.stderr[-3000:]
    second = torchrun(1, "--steps", half, "--batch", str(BATCH), "--lr", str(LR), "--out", str(tmp_path / "b"),
                      "--resume", str(ckpt))
    assert second.returncode == 0, second.stderr[-3000:]
    assert max_diff(load_file(str(tmp_path / "b" / "state.safetensors")), ref.state) <= TOL


def test_a_batch_smaller_than_the_ranks_is_refused(tmp_path):
    proc = torchrun(2, "--steps", "1", "--batch", "1", "--out", str(tmp_path / "x"))
    assert proc.returncode != 0
    assert "smaller than the 2 ranks" in proc.stderr


def test_outside_torchrun_the_sharded_loop_says_so(monkeypatch):
    from tenzro_trainer.sharded import init_distributed

    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ConfigError, match="inside torchrun"):
        init_distributed("cpu")

import torch

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data import WindowDataset, shard_series
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.models import build_model

CFG = ModelConfig.preset("demo")


def _run(split, seed, rounds=2, steps=4):
    torch.manual_seed(123)
    state = build_model(CFG).state_dict()
    shard = shard_series(split.unique_ids, 4)[0]
    w = InnerTrainer(CFG, InnerConfig(steps=steps, batch_size=8, seed=seed), WindowDataset(split, shard, seed=seed))
    results = []
    for _ in range(rounds):
        res = w.run(state)
        results.append(res)
    return w, results


def test_cpu_bit_for_bit_reproducible(split):
    _, a = _run(split, seed=5)
    _, b = _run(split, seed=5)
    _, c = _run(split, seed=6)
    for ra, rb in zip(a, b):
        assert ra.mean_loss == rb.mean_loss
        assert all(torch.equal(ra.state[k], rb.state[k]) for k in ra.state)
    assert not all(torch.equal(a[-1].state[k], c[-1].state[k]) for k in a[-1].state)


def test_adamw_state_persists_across_rounds_and_restores(split):
    w, res = _run(split, seed=1, rounds=1)
    assert all(s["step"] == 4 for s in w.optimizer.state.values())
    saved = w.state_dict()
    global_state = res[0].state
    after = w.run(global_state)
    assert all(s["step"] == 8 for s in w.optimizer.state.values())  # moments kept, not reset
    shard = shard_series(split.unique_ids, 4)[0]
    w2 = InnerTrainer(CFG, InnerConfig(steps=4, batch_size=8, seed=1), WindowDataset(split, shard, seed=99))
    w2.load_state_dict(saved)
    again = w2.run(global_state)
    assert all(torch.equal(after.state[k], again.state[k]) for k in after.state)


def test_inner_steps_reduce_training_loss(split):
    torch.manual_seed(0)
    state = build_model(CFG).state_dict()
    w = InnerTrainer(CFG, InnerConfig(steps=30, batch_size=32, lr=1e-3), WindowDataset(split, seed=0))
    first = w.run(state, steps=5).mean_loss
    w.run(None, steps=30)
    last = w.run(None, steps=5).mean_loss
    assert last < first

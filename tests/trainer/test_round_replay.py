"""Exact replay (issue #26): a sampled trainer-round recomputes bit for bit on the CPU from the
committed weights, the trainer's shard and its inner state, and a lazy or copied payload does not."""

import torch

from tenzro_trainer.attacks import AttackView, build_attack
from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data.windows import WindowDataset, shard_series, train_heldout_split
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.models import build_model
from tenzro_trainer.outer import pseudo_gradient
from tenzro_trainer.replay import replay_round, reproduces


def test_an_honest_round_replays_bit_for_bit_and_lazy_or_copied_payloads_do_not(collection):
    mcfg, icfg = ModelConfig.preset("demo"), InnerConfig(steps=6, batch_size=16)
    split = train_heldout_split(collection, mcfg.context_len, mcfg.horizon)
    shard = shard_series(split.unique_ids, 4)[1]
    torch.manual_seed(0)
    w0 = {k: v.detach().clone() for k, v in build_model(mcfg).state_dict().items()}
    worker = InnerTrainer(mcfg, icfg, WindowDataset(split, shard, seed=7))
    worker.run(w0)  # round 1: the worker's inner state moves on
    w1 = {k: v + 0.001 for k, v in w0.items()}  # round 2's committed weights
    declared = worker.state_dict()  # the inner state it declares for round 2
    honest = pseudo_gradient(w1, worker.run(w1).state)

    replayed = replay_round(mcfg, icfg, WindowDataset(split, shard, seed=7), w1, declared)
    assert reproduces(honest, replayed)
    # a lazy trainer: 2 of H steps from the same state, scaled by H / 2
    lazy_worker = InnerTrainer(mcfg, icfg, WindowDataset(split, shard, seed=7))
    lazy_worker.load_state_dict(declared)
    own = pseudo_gradient(w1, lazy_worker.run(w1, steps=2).state)
    lazy = build_attack("lazy").forge(AttackView(round=2, fragment=0, n=8, f=1, honest=[], own=own,
                                                 inner_steps=icfg.steps))
    assert not reproduces(lazy, replayed)
    # a copy of the last aggregate (free rider), and of the honest update rescaled
    assert not reproduces({n: 0.5 * t for n, t in honest.items()}, replayed)
    assert not reproduces(pseudo_gradient(w0, w1), replayed)
    # the wrong shard does not reproduce either
    other = replay_round(mcfg, icfg, WindowDataset(split, shard_series(split.unique_ids, 4)[2], seed=7), w1, declared)
    assert not reproduces(honest, other)

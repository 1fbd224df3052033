"""Exact replay of one trainer-round on the CPU: the last word on whether a payload is the work it
claims (issue #26).

The inner loop is bit-for-bit reproducible on the CPU in fp32 (`tenzro_trainer.inner`: a seeded
sampler, no dropout, deterministic kernels, one thread here), so anyone holding the round's
committed input weights, the trainer's shard and the trainer's inner state at the round's start
(AdamW moments and the sampler's generator, `InnerTrainer.state_dict`; a fresh one in the
trainer's first round) recomputes its pseudo-gradient exactly, at the cost of one trainer's H
inner steps (1/M of the round's compute). A payload that does not reproduce (a lazy trainer's
scaled short run, a copied or replayed update, noise) is evidence: the syncer may leave it out
and the watcher may publish the mismatch.

What the replay trusts: the inner state the trainer declares for round r (from round 2 on, the
state its own round r-1 ended with, which a replay of every earlier round would pin down; a
trainer that commits a hash of it with its payload cannot change it afterwards).

Usage::

    replayed = replay_round(model_cfg, inner_cfg, WindowDataset(split, shard, seed=s), state, inner_state)
    ok = reproduces(payload, replayed, names)
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data.windows import WindowDataset
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.outer import pseudo_gradient


def replay_round(model_cfg: ModelConfig, inner_cfg: InnerConfig, data: WindowDataset, state: Mapping[str, Tensor],
                 inner_state: dict | None = None, init_seed: int = 0) -> dict[str, Tensor]:
    """The pseudo-gradient ``state - local`` (``{name: fp32 tensor}``, every tensor of the model) that
    H inner steps on ``data`` from the committed weights ``state`` give, on the CPU in fp32, with one
    torch thread; ``inner_state`` the trainer's `InnerTrainer.state_dict` at the round's start (None:
    a fresh optimizer and ``data`` as given). Raises ValueError for a non-CPU ``inner_cfg``."""
    if inner_cfg.device not in (None, "cpu"):
        raise ValueError(f"replay runs on the CPU, not {inner_cfg.device!r}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        worker = InnerTrainer(model_cfg, inner_cfg, data, init_seed=init_seed)
        if inner_state is not None:
            worker.load_state_dict(inner_state)
        local = worker.run(state).state
    finally:
        torch.set_num_threads(threads)
    return pseudo_gradient(dict(state), local)


def reproduces(payload: Mapping[str, Tensor], replayed: Mapping[str, Tensor], names: list[str] | None = None) -> bool:
    """Whether ``payload`` equals the replay bit for bit on the tensors ``names`` (default: the payload's)."""
    names = sorted(payload) if names is None else names
    return all(n in payload and torch.equal(payload[n].to(torch.float32), replayed[n]) for n in names)


__all__ = ["replay_round", "reproduces"]

"""Overlap (the one-step-delayed outer update): a worker's early steps are rebased onto the global
weights when they arrive, so its pseudo-gradient is still measured from the committed weights."""

import pytest
import torch

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data.windows import WindowDataset, train_heldout_split
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.models import build_model
from tenzro_trainer.simulate import SimConfig, simulate


def test_rebase_keeps_the_local_progress_as_an_offset_from_the_new_base(collection):
    cfg = ModelConfig.preset("demo")
    split = train_heldout_split(collection, cfg.context_len, cfg.horizon)
    torch.manual_seed(0)
    base = {k: v.detach().clone() for k, v in build_model(cfg).state_dict().items()}
    worker = InnerTrainer(cfg, InnerConfig(steps=4, batch_size=8), WindowDataset(split, seed=1))
    old_end = worker.run(base).state
    early = worker.run(None, steps=2).state  # round r+1 started before the new weights came
    new_base = {k: v + 0.01 * torch.randn_like(v) for k, v in base.items()}
    worker.rebase(old_end, new_base)
    now = worker.local_state()
    for k in base:
        assert torch.allclose(now[k] - new_base[k], early[k] - old_end[k], atol=1e-6)
    with pytest.raises(KeyError):
        worker.rebase({}, new_base)


def _cfg(**kw):
    return SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=6, batch_size=16), workers=3, rounds=3,
                     fragments=2, **kw)


def test_overlapped_run_learns_and_differs_only_after_the_first_round(collection):
    plain = simulate(_cfg(), collection)
    half = simulate(_cfg(overlap_steps=3), collection)
    full = simulate(_cfg(overlap_steps=6), collection)
    for res in (half, full):
        assert res.rounds[1]["heldout_loss"] == plain.rounds[1]["heldout_loss"]  # round 1 has nothing to overlap
        assert res.rounds[2]["heldout_loss"] != plain.rounds[2]["heldout_loss"]
        assert res.rounds[-1]["heldout_loss"] < res.rounds[0]["heldout_loss"]
    with pytest.raises(ValueError, match="overlap_steps"):
        simulate(_cfg(overlap_steps=7), collection)

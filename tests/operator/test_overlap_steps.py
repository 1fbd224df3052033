"""The trainer daemon's early inner steps (overlap): bounded by the spec's limit and the wait's
budget, rebased on the committed weights, the round's result covering all H steps."""

import pytest
import torch

from stack import small_dataset
from tenzro_operator.roles.overlap import EarlySteps
from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data.windows import WindowDataset, train_heldout_split
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.models import build_model


@pytest.fixture
def worker_and_base():
    cfg = ModelConfig.preset("demo")
    split = train_heldout_split(small_dataset(), cfg.context_len, cfg.horizon)
    torch.manual_seed(0)
    base = {k: v.detach().clone() for k, v in build_model(cfg).state_dict().items()}
    return (lambda: InnerTrainer(cfg, InnerConfig(steps=5, batch_size=8), WindowDataset(split, seed=3))), base


def test_early_steps_stop_at_the_limit_and_finish_the_round(worker_and_base):
    make, base = worker_and_base
    worker = make()
    end = worker.run(base).state  # round r's local end weights
    early = EarlySteps(round=1, base=end, limit=3)
    early.run_for(worker, budget_s=60.0, check_stop=lambda: None)
    assert early.steps == 3  # the limit, not the budget, stopped it
    early.run_for(worker, budget_s=60.0, check_stop=lambda: None)
    assert early.steps == 3
    committed = {k: v + 0.001 for k, v in base.items()}
    res = early.finish(worker, committed)
    assert len(res.step_times) == 5 and res.samples == 5 * 8  # 3 early + 2 after the rebase = H
    assert all(not torch.equal(res.state[k], committed[k]) for k in committed if committed[k].numel() > 1)


def test_a_short_wait_takes_one_step_and_a_stop_is_honoured(worker_and_base):
    make, base = worker_and_base
    worker = make()
    end = worker.run(base).state
    early = EarlySteps(round=1, base=end, limit=5)
    early.run_for(worker, budget_s=0.0, check_stop=lambda: None)
    assert early.steps == 1

    class Stop(Exception):
        pass

    def stop():
        raise Stop()

    with pytest.raises(Stop):
        early.run_for(worker, budget_s=60.0, check_stop=stop)
    assert early.steps == 1
    res = early.finish(worker, base)  # the whole round, H steps, from one early step
    assert len(res.step_times) == 5

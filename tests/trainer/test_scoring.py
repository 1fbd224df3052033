"""Loss-improvement scoring: an honest pseudo-gradient lowers the scoring batch's loss, its sign
flip raises it, the scores are reproducible, and the simulator leaves out what scores <= 0."""

import torch

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data.windows import WindowDataset, train_heldout_split
from tenzro_trainer.fragments import fragment_state, partition
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.models import build_model
from tenzro_trainer.outer import pseudo_gradient
from tenzro_trainer.scoring import loss_improvement, scoring_batch
from tenzro_trainer.simulate import SimConfig, simulate


def test_honest_update_scores_positive_and_its_sign_flip_negative(collection):
    cfg = ModelConfig.preset("demo")
    split = train_heldout_split(collection, cfg.context_len, cfg.horizon)
    torch.manual_seed(0)
    state = {k: v.detach().clone() for k, v in build_model(cfg).state_dict().items()}
    local = InnerTrainer(cfg, InnerConfig(steps=20, batch_size=32), WindowDataset(split, seed=1)).run(state).state
    names = partition(state, 1)[0]
    honest = pseudo_gradient(fragment_state(state, names), fragment_state(local, names))
    deltas = {"00000": honest, "00001": {n: -t for n, t in honest.items()}}
    batch = scoring_batch(split, round_index=3, size=64, salt="task")
    scores = loss_improvement(build_model(cfg), state, names, deltas, batch)
    assert scores["00000"] > 0 > scores["00001"]
    # the same batch and scores for every party; another round draws another batch
    assert torch.equal(batch, scoring_batch(split, round_index=3, size=64, salt="task"))
    assert not torch.equal(batch, scoring_batch(split, round_index=4, size=64, salt="task"))
    assert loss_improvement(build_model(cfg), state, names, deltas, batch) == scores


def test_simulator_scoring_leaves_out_a_sign_flipper(collection):
    base = dict(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=8, batch_size=16), workers=4, rounds=2,
                fragments=2, attackers={3: "sign_flip"})
    scored = simulate(SimConfig(**base, scoring=64), collection)
    unscored = simulate(SimConfig(**base), collection)
    assert [r["rejected"] for r in scored.rounds[1:]] == [2, 2]  # the attacker, both fragments, every round
    assert all(r["rejected"] == 0 for r in unscored.rounds[1:])  # the sign flip passes the norm screen
    assert scored.rounds[-1]["heldout_loss"] < unscored.rounds[-1]["heldout_loss"]

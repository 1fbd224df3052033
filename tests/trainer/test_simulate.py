import torch

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.simulate import SimConfig, simulate


def test_three_rounds_on_real_data_reduce_heldout_loss(collection):
    cfg = SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=12, batch_size=32), workers=3, rounds=3,
                    fragments=4)
    res = simulate(cfg, collection)
    losses = [r["heldout_loss"] for r in res.rounds]
    assert len(losses) == 4
    assert losses[-1] < losses[0]
    assert res.rounds[-1]["train_window_loss"] < res.rounds[0]["train_window_loss"]
    # one round = every fragment of the pseudo-gradient up + the new weights down, fp32
    assert res.rounds[1]["tensor_bytes_per_worker"] == 2 * 4 * res.num_params


def test_median_with_attacker_still_learns_and_norm_screen_rejects(collection):
    cfg = SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=8, batch_size=16), workers=5, rounds=2,
                    fragments=2, rule="CoordinateMedian", attackers={4: "sign_flip"})
    res = simulate(cfg, collection)
    assert res.rounds[-1]["heldout_loss"] < res.rounds[0]["heldout_loss"]
    cfg2 = SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=4, batch_size=16), workers=4, rounds=1,
                     fragments=2, rule="Mean", norm_multiple=10.0, attackers={3: "scale100", 2: "nan"})
    res2 = simulate(cfg2, collection)
    assert res2.rounds[1]["rejected"] == 2 * 2  # both bad workers, both fragments
    assert res2.rounds[1]["heldout_loss"] < res2.rounds[0]["heldout_loss"]


def test_dataset_hash_checked_before_training(collection):
    import pytest

    from tenzro_trainer.data import dataset_hash
    from tenzro_trainer.errors import DatasetHashMismatch

    cfg = SimConfig(inner=InnerConfig(steps=1, batch_size=4), workers=2, rounds=1, fragments=2,
                    dataset_hash="00" * 32)
    with pytest.raises(DatasetHashMismatch):
        simulate(cfg, collection)
    cfg.dataset_hash = dataset_hash(collection)
    assert len(simulate(cfg, collection).rounds) == 2


def test_shard_redundancy_gives_every_shard_r_workers(collection):
    """shards = workers / 2: workers i and i + 2 train the same shard (with their own sample streams),
    so every series is still trained when either is excluded; shards=None keeps one shard per worker."""
    from tenzro_trainer.simulate import _Eval, _samplers

    redundant = SimConfig(inner=InnerConfig(steps=1, batch_size=4), workers=4, rounds=1, shards=2)
    ev = _Eval(redundant, collection)
    samplers = _samplers(redundant, ev)
    assert [sorted(s.unique_ids) for s in samplers[:2]] == [sorted(s.unique_ids) for s in samplers[2:]]
    assert set(samplers[0].unique_ids) | set(samplers[1].unique_ids) == set(ev.split.unique_ids)
    assert not set(samplers[0].unique_ids) & set(samplers[1].unique_ids)
    assert not torch.equal(samplers[0].sample(4), samplers[2].sample(4))  # own sample streams
    plain = _samplers(SimConfig(inner=InnerConfig(steps=1, batch_size=4), workers=4, rounds=1), ev)
    assert len({tuple(sorted(s.unique_ids)) for s in plain}) == 4

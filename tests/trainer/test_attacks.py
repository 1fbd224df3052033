"""The simulator's Byzantine trainers: each forges what its definition says, from what it can see,
and the simulator treats an absent trainer and one whose payload validation rejects alike."""

import math

import pytest
import torch

from tenzro_trainer.attacks import ATTACK_NAMES, AttackView, alie_z, build_attack
from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.simulate import SimConfig, simulate


def _honest(k=5, p=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"w": torch.randn(p, generator=g) * 0.01 + 0.02, "b": torch.randn(3, generator=g) * 0.01} for _ in range(k)]


def _view(r=1, own=None, previous=None, honest=None):
    return AttackView(round=r, fragment=0, n=8, f=2, honest=honest or _honest(), own=own, previous=previous,
                      generator=torch.Generator().manual_seed(1))


def test_alie_z_is_the_papers_z_max():
    # s = floor(n/2 + 1) - f; z = Phi^-1((n - s) / n)
    assert alie_z(8, 2) == pytest.approx(0.3186, abs=1e-4)  # s = 3, Phi^-1(5/8)
    assert alie_z(8, 3) == pytest.approx(0.6745, abs=1e-4)  # s = 2, Phi^-1(6/8)
    assert alie_z(50, 24) > alie_z(50, 12)
    with pytest.raises(ValueError):
        alie_z(8, 0)


def test_alie_and_ipm_are_built_from_the_honest_payloads():
    honest = _honest()
    x = torch.stack([h["w"] for h in honest])
    alie = build_attack("alie").forge(_view(honest=honest))
    assert torch.allclose(alie["w"], x.mean(0) - alie_z(8, 2) * x.std(0))
    assert ((alie["w"] - x.mean(0)).abs() <= x.std(0)).all()  # within one sigma in every coordinate
    for name, eps in (("ipm0.1", 0.1), ("ipm100", 100.0)):
        out = build_attack(name).forge(_view(honest=honest))
        assert torch.allclose(out["w"], -eps * x.mean(0))
        assert torch.dot(out["w"], x.mean(0)) < 0  # the inner product with the honest mean is negative


def test_own_update_attacks_and_the_gaussian():
    own = {"w": torch.full((64,), 0.5), "b": torch.ones(3)}
    assert torch.equal(build_attack("sign_flip").forge(_view(own=own))["w"], -own["w"])
    assert torch.equal(build_attack("scale100").forge(_view(own=own))["b"], 100 * own["b"])
    assert all(build_attack(a).needs_training(1) for a in ("sign_flip", "scale100", "stale"))
    assert not any(build_attack(a).needs_training(1) for a in ("alie", "ipm0.1", "gaussian10", "free_rider", "nan"))
    honest = _honest()
    rms = math.sqrt(sum(float((t ** 2).sum()) for h in honest for t in h.values()) / (5 * 67))
    g = build_attack("gaussian10").forge(_view(honest=honest))
    got = math.sqrt(sum(float((t ** 2).sum()) for t in g.values()) / 67)
    assert got == pytest.approx(10 * rms, rel=0.25)
    assert torch.isnan(build_attack("nan").forge(_view())["w"]).all()
    assert build_attack("absent").forge(_view()) is None


def test_stale_replays_its_first_payload_and_the_free_rider_copies_the_last_aggregate():
    stale = build_attack("stale")
    first = {"w": torch.arange(64.0), "b": torch.zeros(3)}
    assert torch.equal(stale.forge(_view(1, own=first))["w"], first["w"])
    assert not stale.needs_training(2)
    assert torch.equal(stale.forge(_view(5, own=None))["w"], first["w"])  # round 5, nothing trained
    rider = build_attack("free_rider")
    assert not rider.forge(_view(1))["w"].any()  # nothing public yet: zeros
    prev = {"w": torch.ones(64), "b": torch.ones(3)}
    assert torch.equal(rider.forge(_view(2, previous=prev))["w"], prev["w"])


def test_unknown_attack_is_refused():
    with pytest.raises(ValueError, match="unknown attack"):
        build_attack("sybil")
    assert "alie" in ATTACK_NAMES and "absent" in ATTACK_NAMES


def _cfg(**kw):
    return SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=4, batch_size=16), workers=5, rounds=2,
                     fragments=2, norm_multiple=10.0, **kw)


def test_a_rejected_attacker_leaves_the_run_as_if_it_were_absent(collection):
    """NaN payloads are rejected by validation every round: the honest trajectory is the one
    without the attacker, bit for bit (the attack benchmark's reference is the absent run)."""
    absent = simulate(_cfg(attackers={3: "absent", 4: "absent"}), collection)
    nan = simulate(_cfg(attackers={3: "nan", 4: "nan"}), collection)
    assert [r["heldout_loss"] for r in nan.rounds] == [r["heldout_loss"] for r in absent.rounds]
    assert all(torch.equal(nan.state[k], absent.state[k]) for k in absent.state)
    assert [r["rejected"] for r in nan.rounds[1:]] == [4, 4] and [r["rejected"] for r in absent.rounds[1:]] == [0, 0]


def test_scoring_on_the_trainers_shard_leaves_out_ipm_but_the_screen_does_not(collection):
    screened = simulate(_cfg(attackers={3: "ipm0.1", 4: "ipm0.1"}), collection)
    scored = simulate(_cfg(attackers={3: "ipm0.1", 4: "ipm0.1"}, scoring=64), collection)
    assert [r["rejected"] for r in screened.rounds[1:]] == [0, 0]  # small norm: the screen lets it in
    assert [r["rejected"] for r in scored.rounds[1:]] == [4, 4]  # it raises the loss: scored out
    # what the protocol would credit: both attackers' 2 fragments, then none
    assert [r["byzantine_accepted"] for r in screened.rounds[1:]] == [4, 4]
    assert [r["byzantine_accepted"] for r in scored.rounds[1:]] == [0, 0]

"""Credit for work only (issue #26): the attackers that the plain loss-improvement scoring pays
(free riders that read their public score, copies, boosted or lazy updates) and the credit gate
(`tenzro_trainer.credit`) that pays them nothing while it pays the honest trainers."""

import math

import pytest
import torch

from tenzro_trainer.attacks import AttackView, build_attack
from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.credit import CreditConfig, CreditGate
from tenzro_trainer.data.windows import train_heldout_split
from tenzro_trainer.scoring import ShardScorer
from tenzro_trainer.simulate import SimConfig, simulate


def _honest(k=5, p=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"w": torch.randn(p, generator=g) * 0.01 + 0.02, "b": torch.randn(3, generator=g) * 0.01} for _ in range(k)]


def _view(r=2, own=None, previous=None, honest=None, probes=None, index=7):
    return AttackView(round=r, fragment=0, n=8, f=2, honest=honest or _honest(), own=own, previous=previous,
                      generator=torch.Generator().manual_seed(1), probes=probes or {}, index=index)


# ---------------------------------------------------------------- the attackers


def test_free_rider_variants_and_the_lazy_trainer_forge_what_the_issue_says():
    prev = {"w": torch.linspace(-1, 1, 64), "b": torch.ones(3)}
    assert torch.equal(build_attack("free_rider_x2").forge(_view(previous=prev))["w"], 2 * prev["w"])
    noisy = build_attack("free_rider_noise").forge(_view(previous=prev))
    rms = math.sqrt(sum(float((t ** 2).sum()) for t in prev.values()) / 67)
    got = math.sqrt(sum(float(((noisy[n] - prev[n]) ** 2).sum()) for n in prev) / 67)
    assert got == pytest.approx(0.5 * rms, rel=0.3)
    # the signed rider sends whichever sign its own probe scores higher
    likes_minus = {7: lambda p: -float(p["b"].sum())}
    assert torch.equal(build_attack("free_rider_signed").forge(_view(previous=prev, probes=likes_minus))["b"],
                       -prev["b"])
    lazy = build_attack("lazy")
    own = {"w": torch.ones(64), "b": torch.ones(3)}
    assert lazy.needs_training(3) and lazy.steps == 2
    assert torch.equal(lazy.forge(_view(own=own))["w"], torch.full((64,), 12.0))  # H / 2 = 12
    late = build_attack("lazy_late")  # honest in round 1 (replayed in full by the gate), lazy after
    assert late.needs_training(1) and late.inner_steps(1) is None and late.inner_steps(2) == 2
    assert torch.equal(late.forge(_view(r=1, own=own))["w"], own["w"])
    assert torch.equal(late.forge(_view(r=2, own=own))["w"], torch.full((64,), 12.0))


def test_min_max_and_min_sum_stay_within_the_honest_spread_the_paper_allows():
    honest = _honest(k=6)
    x = torch.stack([torch.cat([h["b"], h["w"]]) for h in honest]).double()
    pair = torch.cdist(x, x)
    for kind in ("minmax", "minsum"):
        m = build_attack(kind).forge(_view(honest=honest))
        mv = torch.cat([m["b"], m["w"]]).double()
        d = torch.linalg.vector_norm(x - mv, dim=1)
        if kind == "minmax":
            assert float(d.max()) <= float(pair.max()) * (1 + 1e-6)
        else:
            assert float((d ** 2).sum()) <= float((pair ** 2).sum(dim=1).max()) * (1 + 1e-6)
        assert float(torch.linalg.vector_norm(mv - x.mean(0))) > 0  # it moved off the mean (gamma > 0)
    # tuned to pass scoring: a probe that refuses everything leaves the honest mean (gamma = 0)
    m = build_attack("minmax").forge(_view(honest=honest, probes={7: lambda p: -1.0}))
    assert torch.allclose(m["w"], torch.stack([h["w"] for h in honest]).mean(0))


def test_boosters_scale_as_far_as_their_probes_and_the_screen_allow():
    own = {"w": torch.ones(64) * 0.01, "b": torch.zeros(3)}
    assert torch.allclose(build_attack("boost_own").forge(_view(own=own))["w"], 8 * own["w"])
    capped = {7: lambda p: 1.0 if float(p["w"].abs().max()) < 0.03 else -1.0}
    assert torch.allclose(build_attack("boost_own").forge(_view(own=own, probes=capped))["w"], 2 * own["w"])
    honest = _honest()
    out = build_attack("boost_collude").forge(_view(honest=honest))
    norms = sorted(math.sqrt(sum(float((t ** 2).sum()) for t in h.values())) for h in honest)
    got = math.sqrt(sum(float((t ** 2).sum()) for t in out.values()))
    assert 5 * norms[0] < got <= 10 * norms[-1]  # boosted, yet under the x10 screen


# ---------------------------------------------------------------- the gate


class _FakeScorer:
    """Scores from a table: (own, other, half) per trainer index."""

    def __init__(self, table):
        self.table = table

    def contribution(self, r, index, state, names, tensors, reveal):
        return self.table[index]


def _p(*v):
    return {"w": torch.tensor(v, dtype=torch.float32)}


def test_the_gate_names_copies_outliers_and_updates_that_did_not_train_on_their_shard():
    scorer = _FakeScorer({0: (0.3, 0.1, 0.2), 1: (0.3, 0.1, 0.2), 2: (0.3, 0.1, 0.2), 3: (0.3, 0.1, 0.2),
                          4: (0.1, 0.2, 0.05), 5: (0.3, 0.1, 0.4), 6: (0.1, -0.5, 0.05)})
    gate = CreditGate(scorer, CreditConfig())
    payloads = {0: _p(1, 0, 0, 0), 1: _p(0, 1, 0, 0), 2: _p(0, 0, 1, 0), 3: _p(1.9, 1.9, 2, 2.1), 4: _p(0, 0, 0, 1),
                5: _p(-1, 0, 1, 0), 6: _p(0, -1, 0, 1)}
    previous = _p(1.0, 1.0, 1.0, 1.0)
    v = gate(2, 0, {}, ["w"], payloads, previous, reveal="r")
    assert v[3].reason == "NearCopy"  # |cos| to the last aggregate ~ 1
    assert v[4].reason == "NoContribution" and "data not assigned" in v[4].detail
    assert v[5].reason == "NoContribution" and "half" in v[5].detail  # overshoots
    assert v[6].reason == "NoContribution" and "raises the loss" in v[6].detail
    assert all(v[i].reason is None and v[i].credited and v[i].aggregated for i in (0, 1, 2))
    twins = gate(3, 0, {}, ["w"], {0: _p(1, 0, 0, 0), 1: _p(2, 0, 0, 0), 2: _p(0, 1, 0, 0)}, None, reveal="r")
    assert twins[0].reason == twins[1].reason == "NearCopy" and twins[2].reason is None
    big = gate(4, 0, {}, ["w"], {0: _p(1, 0, 0, 0), 1: _p(0, 1, 0, 0), 2: _p(0, 0, 0, 5)}, None, reveal="r")
    assert big[2].reason == "NormOutlier"


def test_credit_follows_a_trainers_history_so_one_lucky_round_pays_nothing():
    table = {0: (0.3, 0.1, 0.2), 1: (0.1, 0.2, 0.05)}
    gate = CreditGate(_FakeScorer(table), CreditConfig())
    g = torch.Generator().manual_seed(0)
    pays = lambda: {i: {"w": torch.randn(64, generator=g)} for i in (0, 1)}  # noqa: E731 (new work each round)
    for r in range(1, 7):  # trainer 1 fails six rounds running
        v = gate(r, 0, {}, ["w"], pays(), None, reveal=str(r))
        # the gate's first round is judged by replaying every trainer it credits (the audit would bar
        # a trainer 1 that did not train), not by the history, which it leaves as it was
        assert v[0].credited and v[1].credited == (r == 1) and gate.replays_all(r) == (r == 1)
        assert gate.audited(str(r), [0, 1], r) == ([0, 1] if r == 1 else gate.audited(str(r), [0, 1]))
    assert gate.average[(1, 0)] == pytest.approx(0.6 * 0.9 ** 5)  # five rounds of history, not six
    table[1] = (0.3, 0.1, 0.2)  # one lucky round
    v = gate(7, 0, {}, ["w"], pays(), None, reveal="7")
    assert v[1].reason is None and not v[1].credited and not v[1].aggregated
    table[0] = (0.1, 0.2, 0.05)  # an honest trainer's one unlucky round costs it nothing
    v = gate(8, 0, {}, ["w"], pays(), None, reveal="8")
    assert v[0].reason == "NoContribution" and v[0].credited and not v[0].aggregated


def test_a_trainer_replaying_its_own_earlier_payload_is_a_near_copy_and_new_work_is_not():
    """The stale attacker (`tenzro_trainer.attacks`: trains once, replays that update): its replay,
    rescaled or negated, of any earlier round is a NearCopy; payloads of new work pass, and the
    count sketch keeps their cosine to within 0.1."""
    gate = CreditGate(_FakeScorer({i: (0.3, 0.1, 0.2) for i in range(3)}), CreditConfig())
    g = torch.Generator().manual_seed(1)
    first = torch.randn(5000, generator=g)
    new = lambda: {"w": torch.randn(5000, generator=g)}  # noqa: E731
    v = gate(1, 0, {}, ["w"], {0: {"w": first}, 1: new(), 2: new()}, None, reveal="1")
    assert all(x.reason is None for x in v.values())
    for r, replay in ((2, first), (3, -3 * first), (4, first + 0.05 * torch.randn(5000, generator=g))):
        v = gate(r, 0, {}, ["w"], {0: {"w": replay}, 1: new(), 2: new()}, None, reveal=str(r))
        assert v[0].reason == "NearCopy" and "its own payload of round 1" in v[0].detail, v[0].detail
        assert v[1].reason is None and v[2].reason is None
    # another fragment keeps its own history: the same vector is new work there
    assert gate(5, 1, {}, ["w"], {0: {"w": first}, 1: new(), 2: new()}, None, reveal="5")[0].reason is None
    # the sketch keeps a cosine: a vector half new, half the old one
    half = 0.5 * first + 0.5 * torch.randn(5000, generator=g)
    true = float(torch.nn.functional.cosine_similarity(half.double(), first.double(), dim=0))
    sk = gate._sketch(half.double()), gate._sketch(first.double())
    assert abs(float(torch.nn.functional.cosine_similarity(*sk, dim=0)) - true) < 0.1


def test_the_contribution_batches_follow_the_reveal_and_are_reproducible(collection):
    cfg = ModelConfig.preset("demo")
    split = train_heldout_split(collection, cfg.context_len, cfg.horizon)
    from tenzro_trainer.models import build_model
    from tenzro_trainer.data.windows import shard_series

    shards = shard_series(split.unique_ids, 4)
    torch.manual_seed(0)
    state = {k: v.detach().clone() for k, v in build_model(cfg).state_dict().items()}
    names = sorted(state)[:2]
    delta = {n: 0.01 * torch.randn_like(state[n]) for n in names}
    a = ShardScorer(build_model(cfg), split, lambda i: shards[i], salt="t").contribution(1, 0, state, names, delta, "x")
    b = ShardScorer(build_model(cfg), split, lambda i: shards[i], salt="t").contribution(1, 0, state, names, delta, "x")
    c = ShardScorer(build_model(cfg), split, lambda i: shards[i], salt="t").contribution(1, 0, state, names, delta, "y")
    assert a == b and a != c


# ---------------------------------------------------------------- in the simulator


def _sim(attack, credit, rounds=4):
    return simulate(SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=12, batch_size=16),
                              workers=6, rounds=rounds, fragments=2, norm_multiple=10.0, rule="TrimmedMean",
                              rule_params={"alpha_bps": 2500}, scoring=64, attackers={4: attack, 5: attack},
                              credit=credit))


def test_plain_scoring_pays_a_free_rider_that_reads_its_public_score_and_the_gate_does_not(collection):
    paid = _sim("free_rider_signed", None)
    gated = _sim("free_rider_signed", {})
    assert sum(r["byzantine_accepted"] for r in paid.rounds[2:]) > 0  # the attack: credited by score > 0
    assert sum(r["byzantine_accepted"] for r in gated.rounds) == 0
    assert sum(r["honest_credited"] for r in gated.rounds) >= 0.75 * sum(r["honest_sent"] for r in gated.rounds)


def test_colluding_boosters_are_paid_by_plain_scoring_and_not_by_the_gate(collection):
    paid = _sim("boost_collude", None, rounds=2)
    gated = _sim("boost_collude", {}, rounds=2)
    assert sum(r["byzantine_accepted"] for r in paid.rounds) > 0
    assert sum(r["byzantine_accepted"] for r in gated.rounds) == 0  # one shared payload: near-copies


def test_the_audit_bars_a_lazy_trainer_by_exact_replay_and_never_an_honest_one(collection):
    alone = _sim("lazy", {"audit": 0})  # the gate's checks without the replay
    audited = _sim("lazy", {"audit": 6})  # every credited trainer's round replayed
    assert sum(r["byzantine_accepted"] for r in alone.rounds) > 0  # the attack: its scaled short run passes
    assert sum(r["byzantine_accepted"] for r in audited.rounds) == 0  # barred in the round it was credited
    assert audited.rounds[-1]["barred"] == 2 and audited.rounds[-1]["honest_barred"] == 0
    assert [r["honest_credited"] for r in audited.rounds] == [r["honest_credited"] for r in alone.rounds]
    one = _sim("lazy", {})  # the default: one trainer-round a round; a barred trainer stays barred
    barred = [r["barred"] for r in one.rounds]
    assert barred == sorted(barred) and barred[-1] >= 1 and one.rounds[-1]["honest_barred"] == 0
    assert one.rounds[-1]["byzantine_accepted"] <= 2 - barred[-1]


def test_the_first_round_is_judged_by_replaying_every_trainer_it_credits(collection):
    # a fresh model's first update helps all data alike, so the contribution test passes a lazy first
    # round as often as it fails an honest one; judged by one audit draw, the lazy trainers are paid
    # in round 1 and after; replayed all, both are barred in round 1 and no honest trainer is
    drawn = _sim("lazy", {"first_round_replay": False})
    replayed = _sim("lazy", {})
    assert drawn.rounds[1]["byzantine_accepted"] > 0
    assert replayed.rounds[1]["barred"] == 2 and sum(r["byzantine_accepted"] for r in replayed.rounds) == 0
    assert replayed.rounds[-1]["honest_barred"] == 0
    assert replayed.rounds[1]["honest_credited"] == replayed.rounds[1]["honest_sent"]
    # an adaptive lazy trainer, honest in round 1: that round's payloads are its own work (counted
    # apart from the forged ones) and credited; from round 2 it is judged by history and the draw
    late = _sim("lazy_late", {})
    assert late.rounds[1]["byzantine_genuine_sent"] == late.rounds[1]["byzantine_genuine_credited"] == 4
    assert late.rounds[1]["barred"] == 0 and sum(r["byzantine_genuine_sent"] for r in late.rounds[2:]) == 0
    assert sum(r["byzantine_genuine_sent"] for r in replayed.rounds) == 0


def test_the_audit_draw_follows_the_reveal_among_the_credited_only():
    gate = CreditGate(None, CreditConfig(audit=2))
    draws = [gate.audited(f"reveal-{k}", [5, 1, 3, 1]) for k in range(60)]
    assert all(len(d) == 2 and d == sorted(d) and set(d) <= {1, 3, 5} for d in draws)
    assert {tuple(d) for d in draws} == {(1, 3), (1, 5), (3, 5)}  # every pair comes up: not a fixed order
    assert gate.audited("reveal-0", [5, 1, 3]) == draws[0]  # anyone recomputes it from the reveal
    assert gate.audited("x", [4]) == [4] and gate.audited("x", []) == []
    # a trainer whose history sits near the credit line is drawn most; one with an honest history
    # still is, now and then (the floor)
    one = CreditGate(None, CreditConfig(audit=1))
    one.average.update({(1, 0): 0.98, (3, 0): 0.97, (5, 0): 0.62, (5, 1): 0.99})
    picks = [one.audited(f"reveal-{k}", [1, 3, 5])[0] for k in range(400)]
    assert picks.count(5) > 2 * (picks.count(1) + picks.count(3)) and picks.count(1) > 0 and picks.count(3) > 0


def test_the_audit_needs_dense_payloads_of_whole_rounds():
    for extra in ({"compression": {"kind": "topk", "k": 64, "chunk": 4096}}, {"overlap_steps": 2}):
        with pytest.raises(ValueError, match="audit"):
            simulate(SimConfig(workers=2, rounds=1, scoring=8, credit={}, **extra))

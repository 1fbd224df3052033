import pytest
import torch

from tenzro_trainer.aggregation import (
    CoordinateMedian,
    Krum,
    Mean,
    TrimmedMean,
    build_rule,
    screen_payloads,
    validate_payload,
)
from tenzro_trainer import canonical
from tenzro_trainer.errors import AggregationError, PayloadRejected


def U(*rows):
    return {f"t{i}": {"w": torch.tensor(r, dtype=torch.float32)} for i, r in enumerate(rows)}


HAND = U([1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [100.0, -100.0], [4.0, 40.0])


def test_mean_by_hand():
    assert torch.equal(Mean()(HAND)["w"], torch.tensor([22.0, 0.0]))


def test_trimmed_mean_by_hand():
    # K=5, 2000 bps -> trim 1 per end: [2,3,4] -> 3 and [10,20,30] -> 20
    assert torch.equal(TrimmedMean(2000)(HAND)["w"], torch.tensor([3.0, 20.0]))
    # 1999 bps trims 0 (floor(5*0.1999)=0): plain mean
    assert torch.equal(TrimmedMean(1999)(HAND)["w"], Mean()(HAND)["w"])
    assert torch.equal(TrimmedMean(4999)(U([1.0], [2.0], [30.0], [40.0]))["w"], torch.tensor([16.0]))  # trims 1 per end
    with pytest.raises(AggregationError, match="alpha_bps"):
        TrimmedMean(5000)


def test_median_by_hand():
    assert torch.equal(CoordinateMedian()(HAND)["w"], torch.tensor([3.0, 20.0]))
    even = U([1.0], [2.0], [10.0], [100.0])
    assert torch.equal(CoordinateMedian()(even)["w"], torch.tensor([6.0]))  # (2+10)/2


def test_krum_by_hand():
    # 1-D points 0, 1, 2, 10, 11 with f=1: each scores its K-f-2 = 2 nearest squared distances.
    # 0: 1+4=5; 1: 1+1=2; 2: 1+4=5; 10: 1+64=65; 11: 1+81=82 -> picks 1.
    pts = U([0.0], [1.0], [2.0], [10.0], [11.0])
    assert torch.equal(Krum(1)(pts)["w"], torch.tensor([1.0]))
    assert torch.equal(Krum(1, m=3)(pts)["w"], torch.tensor([1.0]))  # mean of 1, 0, 2
    with pytest.raises(AggregationError, match="at least 5"):
        Krum(1)(U([0.0], [1.0], [2.0], [3.0]))


def test_order_independent_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    ups = {f"0x{i:02x}": {"a": torch.randn(50, generator=g), "b": torch.randn(3, 4, generator=g)} for i in range(7)}
    shuffled = dict(reversed(list(ups.items())))
    for rule in (Mean(), TrimmedMean(2000), CoordinateMedian(), Krum(2)):
        x, y = rule(ups), rule(shuffled)
        assert all(torch.equal(x[k], y[k]) for k in x), rule


def test_rows_are_taken_in_ascending_key_order():
    # keys as protocol v2 callers give them (zero-padded trainer index), inserted out of order;
    # 2^24 + 1 is not a float32, so the order of the sum shows in the result
    ups = {"0002": {"w": torch.tensor([-(2.0**24)])}, "0000": {"w": torch.tensor([2.0**24])},
           "0001": {"w": torch.tensor([1.0])}}
    assert float(Mean()(ups)["w"]) == 0.0  # (2^24 + 1) - 2^24; insertion order would give 1/3
    ups["0003"] = ups.pop("0001")  # now the 1.0 is added last: (2^24 - 2^24) + 1
    assert float(Mean()(ups)["w"]) == float(torch.tensor(1.0) / torch.tensor(3.0))


def test_rules_reduce_through_canonical_on_the_stacked_rows():
    g = torch.Generator().manual_seed(3)
    vals = torch.tensor([0.0, -0.0, 1.0, -1.0, 1.5, 2.0**-149, -(2.0**-149), 3.0])
    ups = {f"{i:04d}": {"b": vals[torch.randint(0, 8, (5,), generator=g)],
                        "a": vals[torch.randint(0, 8, (2, 3), generator=g)]} for i in range(6)}
    x = torch.stack([torch.cat([ups[k]["a"].reshape(-1), ups[k]["b"]]) for k in sorted(ups)])  # names ascending
    pairs = [(Mean(), canonical.mean(x)), (TrimmedMean(2000), canonical.trimmed_mean(x, 2000)),
             (CoordinateMedian(), canonical.coordinate_median(x))]
    for rule, want in pairs:
        out = rule(ups)
        got = torch.cat([out["a"].reshape(-1), out["b"]])
        assert out["a"].shape == (2, 3) and torch.equal(got.view(torch.int32), want.view(torch.int32)), rule


def test_median_of_signed_zeros_follows_total_order():
    ups = U([0.0, -0.0], [-0.0, -0.0], [-0.0, 0.0])  # columns: +0 -0 -0 and -0 -0 +0
    assert torch.signbit(CoordinateMedian()(ups)["w"]).tolist() == [True, True]
    ups = U([0.0], [-0.0])  # even: fl(-0 + +0) / 2 = +0
    assert torch.signbit(CoordinateMedian()(ups)["w"]).tolist() == [False]


@pytest.mark.parametrize("attack", ["sign_flip", "scale100"])
def test_robust_rules_resist_attackers(attack):
    K, f, P = 7, 2, 2000
    g = torch.Generator().manual_seed(1)
    true = torch.randn(P, generator=g)
    honest = [true + 0.1 * torch.randn(P, generator=g) for _ in range(K - f)]
    honest_mean = torch.stack(honest).mean(0)
    bad = [-h if attack == "sign_flip" else 100 * h for h in honest[:f]]
    ups = {f"w{i}": {"d": v} for i, v in enumerate(honest + bad)}
    scale = honest_mean.norm()

    def err(rule):
        return float((rule(ups)["d"] - honest_mean).norm() / scale)

    assert err(Mean()) > 0.5
    for rule in (CoordinateMedian(), TrimmedMean(alpha_bps=2900), Krum(f=f)):  # 2900 bps of 7 trims 2
        assert err(rule) < 0.1, rule


def test_build_rule():
    assert isinstance(build_rule("TrimmedMean", {"alpha_bps": 1000}), TrimmedMean)
    assert build_rule("krum", {"f": "2"}).f == 2
    assert isinstance(build_rule("CoordinateMedian", {}), CoordinateMedian)
    with pytest.raises(AggregationError, match="unknown aggregation rule"):
        build_rule("Bulyan", {})


LAYOUT = {"a": ((2, 3), torch.float32), "b": ((4,), torch.float32)}


def _ok():
    return {"a": torch.ones(2, 3), "b": torch.ones(4)}


@pytest.mark.parametrize(
    "mutate, reason, tensor",
    [
        (lambda p: p.pop("b"), "names", "b"),
        (lambda p: p.update(c=torch.ones(1)), "names", "c"),
        (lambda p: p.update(a=torch.ones(3, 2)), "shape", "a"),
        (lambda p: p.update(b=torch.ones(4, dtype=torch.float64)), "dtype", "b"),
        (lambda p: p["a"].__setitem__((0, 1), float("nan")), "non_finite", "a"),
        (lambda p: p["b"].__setitem__(2, float("inf")), "non_finite", "b"),
    ],
)
def test_validation_rejects_and_says_why(mutate, reason, tensor):
    p = _ok()
    mutate(p)
    with pytest.raises(PayloadRejected) as exc:
        validate_payload(p, LAYOUT)
    assert exc.value.reason == reason and exc.value.tensor == tensor
    assert tensor in str(exc.value)


def test_norm_screen():
    assert validate_payload(_ok(), LAYOUT) == pytest.approx(10**0.5)
    with pytest.raises(PayloadRejected, match="exceeds 3 x median"):
        validate_payload({k: 10 * v for k, v in _ok().items()}, LAYOUT, norm_multiple=3, median_norm=10**0.5)
    payloads = {f"t{i}": _ok() for i in range(4)}
    payloads["t9"] = {k: 100 * v for k, v in _ok().items()}
    payloads["t8"] = {"a": torch.ones(2, 3)}
    accepted, rejected = screen_payloads(payloads, LAYOUT, norm_multiple=5)
    assert sorted(accepted) == ["t0", "t1", "t2", "t3"]
    assert rejected["t9"].reason == "norm" and rejected["t8"].reason == "names"


def test_trainer_key_orders_inputs_by_trainer_index_not_by_address():
    """PROTOCOL.md section 1 sums in ascending trainer index. Float addition is not associative:
    index order [1e8, -1e8, 1] sums to 1, the addresses' lexical order [1, 1e8, -1e8] to 0."""
    from tenzro_trainer.aggregation import trainer_key

    addresses = ["0xcc", "0xdd", "0xaa"]  # enrollment indices 0, 1, 2
    values = [1e8, -1e8, 1.0]
    by_index = {trainer_key(i): {"w": torch.tensor([v], dtype=torch.float32)} for i, v in enumerate(values)}
    by_address = {a: {"w": torch.tensor([v], dtype=torch.float32)} for a, v in zip(addresses, values)}
    assert [trainer_key(i) for i in (2, 10, 100, 255)] == sorted(trainer_key(i) for i in (100, 2, 255, 10))
    assert Mean()(by_index)["w"].item() == pytest.approx(1 / 3)
    assert Mean()(by_address)["w"].item() == 0.0
    with pytest.raises(ValueError):
        trainer_key(-1)


def test_centered_clip_bounds_what_far_inputs_move_and_keeps_history():
    from tenzro_trainer.aggregation import CenteredClip

    honest = [[1.0, 1.0], [1.1, 0.9], [0.9, 1.1], [1.0, 1.05]]
    far = [[1000.0, -1000.0]]
    rule = build_rule("centered_clip", {"tau": 0.5, "iters": 1})
    out = rule(U(*honest, *far))["w"]
    # the first center is the coordinate median (1.0, 1.0 here); the attacker moves it by at most tau / K
    assert torch.linalg.vector_norm(out - torch.tensor([1.0, 1.0])) <= 0.5 / 5 + 1e-6
    assert torch.allclose(rule.center, out)
    # history: the next round starts from this output, not from the new inputs' median
    nxt = rule(U([3.0, 3.0], [3.0, 3.0], [3.0, 3.0]))["w"]
    assert torch.linalg.vector_norm(nxt - out) <= 0.5 + 1e-6  # each input moves it by at most tau / K
    assert Mean()(U(*honest, *far))["w"].abs().max() > 100  # Mean is not robust
    with pytest.raises(AggregationError):
        CenteredClip(tau=0.0)
    assert repr(rule) == "CenteredClip(tau=0.5, iters=1)"

"""tenzro_trainer.canonical against an independent numpy float32 reference of PROTOCOL.md section 1.

numpy's float32 ufuncs are single, correctly rounded IEEE-754 operations (no fusion across ufunc
calls), so the reference below is the protocol's definition written out op by op. Its sort uses
numpy's lexicographic sort on (value, sign bit), not the int32 key trick of the implementation.
Inputs are random bit patterns over every exponent (subnormals included), ties and +-0.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tenzro_trainer import canonical
from tenzro_trainer.errors import AggregationError

F32 = np.float32


# ------------------------------------------------------------------ reference (numpy, from PROTOCOL.md)


def ref_sort(x: np.ndarray) -> np.ndarray:
    """Columns ascending in IEEE totalOrder: by value, and -0 (sign bit set) before +0."""
    order = np.lexsort((~np.signbit(x), x), axis=0)
    return np.take_along_axis(x, order, axis=0)


@np.errstate(over="ignore", invalid="ignore")
def ref_mean(x: np.ndarray) -> np.ndarray:
    acc = np.zeros(x.shape[1], dtype=F32)  # +0
    for row in x:
        acc = acc + row
    return acc / F32(x.shape[0])


def ref_trimmed_mean(x: np.ndarray, alpha_bps: int) -> np.ndarray:
    n = x.shape[0]
    b = n * alpha_bps // 10000
    return ref_mean(ref_sort(x)[b : n - b])


@np.errstate(over="ignore", invalid="ignore")
def ref_median(x: np.ndarray) -> np.ndarray:
    n, s = x.shape[0], ref_sort(x)
    if n % 2:
        return s[(n - 1) // 2]
    return (s[n // 2 - 1] + s[n // 2]) / F32(2)


@np.errstate(over="ignore", invalid="ignore")
def ref_nesterov(p, m, g, lr, mu, nesterov=True):
    lr, mu = F32(lr), F32(mu)
    m2 = (mu * m) + g
    u = g + (mu * m2) if nesterov else m2
    return p - (lr * u), m2


# ------------------------------------------------------------------ helpers


QNAN = np.uint32(0x7FC00000)  # every NaN result (Binary32.QNAN)


def bits(a) -> np.ndarray:
    """Raw uint32 bit patterns of a tensor or array."""
    a = a.cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, dtype=F32)
    return a.astype(F32).view(np.uint32)


def same_bits(got, want) -> bool:
    """``got`` (the implementation's output) has exactly the bits of the reference ``want``, whose
    NaNs (numpy's are the CPU's, 0xFFC00000 on x86) are read as the canonical 0x7FC00000."""
    w = bits(want)
    return bool(np.array_equal(bits(got), np.where(np.isnan(np.asarray(want, dtype=F32)), QNAN, w)))


def random_f32(rng, shape, exp_lo=0, exp_hi=254, zero_frac=0.0) -> np.ndarray:
    """Random finite float32 with uniformly random sign, biased exponent in [exp_lo, exp_hi]
    (0 = subnormals and +-0) and mantissa; a fraction of exact +-0."""
    sign = rng.integers(0, 2, shape, dtype=np.uint32) << np.uint32(31)
    exp = rng.integers(exp_lo, exp_hi + 1, shape, dtype=np.uint32) << np.uint32(23)
    man = rng.integers(0, 1 << 23, shape, dtype=np.uint32)
    u = sign | exp | man
    if zero_frac:
        u = np.where(rng.random(shape) < zero_frac, sign, u)
    return u.view(F32)


def ties(rng, shape) -> np.ndarray:
    """Few distinct values (duplicates), odd mantissas in neighbouring binades (sums that are
    exactly half-way between two floats), and +-0."""
    pool = np.array([0.0, -0.0, 1.0, -1.0, 1.5, 2.0, 3.0, 1 + 2**-23, -(1 + 2**-23), 2**-24, 1 + 3 * 2**-23,
                     3 * 2**-149, -(2**-149), 2**-126], dtype=F32)
    return pool[rng.integers(0, len(pool), shape)]


DISTRIBUTIONS = {
    "all_exponents": lambda rng, s: random_f32(rng, s, zero_frac=0.05),
    "subnormal_edge": lambda rng, s: random_f32(rng, s, 0, 2, zero_frac=0.1),
    "narrow_binades": lambda rng, s: random_f32(rng, s, 126, 128),  # many halfway sums
    "near_overflow": lambda rng, s: random_f32(rng, s, 250, 254),
    "ties": ties,
}


def test_subnormals_are_not_flushed():
    """Both the reference and torch keep subnormals (else the comparisons below prove little)."""
    tiny = F32(2.0**-149)
    assert tiny != 0 and F32(2.0**-126) / F32(4) == F32(2.0**-128) and tiny + tiny == F32(2.0**-148)
    t = torch.tensor([2.0**-126], dtype=torch.float32)
    assert float(t / 4) == 2.0**-128 and float(torch.tensor([2.0**-149]) * 1) != 0


# ------------------------------------------------------------------ sorting


def test_total_order_key_orders_every_class():
    vals = [-np.inf, -3.4028235e38, -1.0, -(2.0**-126), -(2.0**-127), -(2.0**-149), -0.0, 0.0, 2.0**-149,
            2.0**-127, 2.0**-126, 1.0, 1 + 2**-23, 3.4028235e38, np.inf]
    keys = canonical.total_order_key(torch.tensor(vals, dtype=torch.float32))
    assert keys.dtype == torch.int32
    assert all(a < b for a, b in zip(keys.tolist(), keys.tolist()[1:]))
    assert keys.tolist()[6:8] == [-1, 0]  # -0 -> 0xFFFFFFFF, +0 -> 0


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_sort_total_order_matches_reference(dist):
    rng = np.random.default_rng(1)
    for k in (1, 2, 3, 5, 8, 16, 17, 33, 64):  # both the min/max network (<= 16) and torch.sort
        x = DISTRIBUTIONS[dist](rng, (k, 301))
        got = canonical.sort_total_order(torch.from_numpy(x))
        assert same_bits(got, ref_sort(x)), (dist, k)


def test_sort_puts_negative_zero_first():
    x = torch.tensor([[0.0, -0.0], [-0.0, 0.0], [0.0, -0.0]], dtype=torch.float32)
    s = canonical.sort_total_order(x)
    # column 0: +0 -0 +0 -> -0 +0 +0; column 1: -0 +0 -0 -> -0 -0 +0
    assert torch.signbit(s).tolist() == [[True, True], [False, True], [False, False]]
    assert float(s.abs().sum()) == 0.0


# ------------------------------------------------------------------ rules


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_rules_match_reference_for_k_1_to_64(dist):
    rng = np.random.default_rng(sorted(DISTRIBUTIONS).index(dist))
    for k in range(1, 65):
        x = DISTRIBUTIONS[dist](rng, (k, 97))
        t = torch.from_numpy(x)
        assert same_bits(canonical.mean(t), ref_mean(x)), ("mean", dist, k)
        assert same_bits(canonical.coordinate_median(t), ref_median(x)), ("median", dist, k)
        for bps in (0, 1000, 2500, 4999):
            if 2 * (k * bps // 10000) < k:
                assert same_bits(canonical.trimmed_mean(t, bps), ref_trimmed_mean(x, bps)), ("trimmed", dist, k, bps)


def test_mean_rounds_each_addition_in_row_order():
    # 2^24 + 1 is not a float32: (2^24 + 1) - 2^24 = 0 but (2^24 - 2^24) + 1 = 1
    x = np.array([[2.0**24], [1.0], [-(2.0**24)]], dtype=F32)
    assert float(canonical.mean(torch.from_numpy(x))[0]) == 0.0
    assert float(canonical.mean(torch.from_numpy(x[[0, 2, 1]]))[0]) == F32(1) / F32(3)
    # a sum of halfway cases rounds to even at every step: 1 + 2^-24 = 1, then again, ...
    y = np.array([[1.0]] + [[2.0**-24]] * 4, dtype=F32)
    assert float(canonical.mean(torch.from_numpy(y))[0]) == F32(1) / F32(5)


def test_zero_signs_follow_total_order():
    def col(*v):
        return torch.tensor([[a] for a in v], dtype=torch.float32)

    def sign(t):
        assert float(t[0]) == 0.0
        return bool(torch.signbit(t)[0])

    # odd: the middle of the totalOrder sort
    assert sign(canonical.coordinate_median(col(0.0, -0.0, -0.0))) is True   # -0 -0 +0
    assert sign(canonical.coordinate_median(col(-0.0, 0.0, 0.0))) is False   # -0 +0 +0
    # even: fl(fl(a + b) / 2): -0 + +0 = +0, -0 + -0 = -0
    assert sign(canonical.coordinate_median(col(0.0, -0.0))) is False
    assert sign(canonical.coordinate_median(col(-0.0, -0.0))) is True
    assert sign(canonical.coordinate_median(col(-0.0, 0.0, -0.0, -0.0))) is True
    # Mean starts at +0: +0 + -0 = +0, even when every input is -0
    assert sign(canonical.mean(col(-0.0, -0.0))) is False
    # trimmed: 5 values, 2000 bps trims 1 per end of -0 -0 -0 +0 +0 -> sum of -0, -0, +0
    assert sign(canonical.trimmed_mean(col(0.0, -0.0, 0.0, -0.0, -0.0), 2000)) is False
    # 1 + (-1) + -0: +0 + 1 = 1, 1 + -1 = +0, +0 + -0 = +0
    assert sign(canonical.mean(col(1.0, -1.0, -0.0))) is False


def test_sorting_rules_ignore_row_order_and_mean_follows_it():
    rng = np.random.default_rng(7)
    x = np.concatenate([ties(rng, (9, 200)), random_f32(rng, (9, 200), 100, 160, zero_frac=0.2)], axis=1)
    t = torch.from_numpy(x)
    means = set()
    for _ in range(10):
        perm = rng.permutation(9)
        tp = t[perm]
        assert same_bits(canonical.coordinate_median(tp), canonical.coordinate_median(t))
        assert same_bits(canonical.trimmed_mean(tp, 2300), canonical.trimmed_mean(t, 2300))
        got = canonical.mean(tp)
        assert same_bits(got, ref_mean(x[perm]))
        means.add(bits(got).tobytes())
    assert len(means) > 1  # the order of the sum is visible in the bits


def test_rule_errors():
    x = torch.ones(4, 3)
    with pytest.raises(AggregationError, match="trims 2 from each end of 4"):
        canonical.trimmed_mean(x, 5000)
    for fn in (canonical.mean, canonical.coordinate_median, lambda z: canonical.trimmed_mean(z, 0)):
        with pytest.raises(AggregationError, match="no submissions"):
            fn(torch.ones(0, 3))
    with pytest.raises(TypeError, match="float32"):
        canonical.mean(torch.ones(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="2-D"):
        canonical.coordinate_median(torch.ones(3))


# ------------------------------------------------------------------ outer step


@pytest.mark.parametrize("lr, mu, nesterov", [(0.7, 0.9, True), (0.1, 0.3, True), (1.0, 0.0, False), (0.7, 0.9, False)])
@pytest.mark.parametrize("dist", ["normal", "all_exponents", "subnormal_edge", "narrow_binades"])
def test_nesterov_steps_match_reference(lr, mu, nesterov, dist):
    rng = np.random.default_rng(3)
    make = (lambda s: rng.standard_normal(s).astype(F32)) if dist == "normal" else \
        (lambda s: DISTRIBUTIONS[dist](rng, s))
    p = make(1000)
    m = np.zeros(1000, dtype=F32)
    tp, tm = torch.from_numpy(p.copy()), torch.zeros(1000)
    for step in range(6):
        g = make(1000)
        tg = torch.from_numpy(g)
        inputs, before = (tp, tm, tg), [bits(t) for t in (tp, tm, tg)]
        tp, tm = canonical.nesterov_step(tp, tm, tg, lr, mu, nesterov)
        p, m = ref_nesterov(p, m, g, lr, mu, nesterov)
        assert same_bits(tm, m) and same_bits(tp, p), (dist, step)
        assert all(np.array_equal(bits(t), b) for t, b in zip(inputs, before))  # arguments not written


def test_nesterov_rounds_lr_and_mu_to_float32_first():
    p, m, g = torch.tensor([3.0]), torch.tensor([0.25]), torch.tensor([1.0])
    a = canonical.nesterov_step(p, m, g, 0.7, 0.9)
    b = canonical.nesterov_step(p, m, g, canonical.f32(0.7), canonical.f32(0.9))
    assert same_bits(a[0], b[0]) and same_bits(a[1], b[1])
    assert canonical.f32(0.7) == float(F32(0.7)) != 0.7 and canonical.f32(1e39) == float("inf")


def test_momentum_starting_at_plus_zero_with_zero_gradient():
    # m = +0, g = -0: m' = fl(fl(mu * +0) + -0) = +0 (not -0, as copying g would give)
    p, m, g = torch.tensor([1.0]), torch.zeros(1), torch.tensor([-0.0])
    p2, m2 = canonical.nesterov_step(p, m, g, 0.7, 0.9)
    assert float(p2) == 1.0 and not bool(torch.signbit(m2)[0])


def test_nan_results_are_the_canonical_quiet_nan():
    # step 1: g = +inf -> m = +inf, p = -inf; step 2: g = -inf -> m = 0.9 inf - inf = NaN, p = NaN
    p, m = canonical.nesterov_step(torch.tensor([1.0, 2.0]), torch.zeros(2), torch.tensor([np.inf, 1.0]), 0.7, 0.9)
    assert float(p[0]) == -np.inf and float(m[0]) == np.inf
    p, m = canonical.nesterov_step(p, m, torch.tensor([-np.inf, 1.0]), 0.7, 0.9)
    assert bits(p)[0] == QNAN and bits(m)[0] == QNAN and np.isfinite(bits(p)[1].view(F32))
    # a NaN input (never accepted by the protocol) still comes out canonical
    neg_nan = torch.from_numpy(np.array([0xFFC00001], dtype=np.uint32).view(F32))
    for out in (canonical.mean(neg_nan[None]), canonical.coordinate_median(neg_nan[None]),
                canonical.nesterov_step(torch.ones(1), torch.ones(1), neg_nan, 0.7, 0.9)[0]):
        assert bits(out)[0] == QNAN


def test_nesterov_step_checks_its_inputs():
    with pytest.raises(TypeError, match="float32"):
        canonical.nesterov_step(torch.ones(2), torch.ones(2), torch.ones(2, dtype=torch.bfloat16), 0.7, 0.9)
    with pytest.raises(ValueError, match="m is"):
        canonical.nesterov_step(torch.ones(2), torch.ones(3), torch.ones(2), 0.7, 0.9)


# ------------------------------------------------------------------ CUDA


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu_bit_for_bit():
    rng = np.random.default_rng(11)
    for dist, make in sorted(DISTRIBUTIONS.items()):
        for k in (1, 2, 5, 6, 16, 17, 40):
            x = torch.from_numpy(make(rng, (k, 4099)))
            xc = x.cuda()
            for fn in (canonical.mean, canonical.coordinate_median, canonical.sort_total_order,
                       lambda z: canonical.trimmed_mean(z, 2000)):
                got = fn(xc)
                assert got.device.type == "cuda" and same_bits(got, fn(x)), (dist, k, fn)
        p, m, g = (torch.from_numpy(make(rng, (4099,))) for _ in range(3))
        for nesterov in (True, False):
            cpu = canonical.nesterov_step(p, m, g, 0.7, 0.9, nesterov)
            gpu = canonical.nesterov_step(p.cuda(), m.cuda(), g.cuda(), 0.7, 0.9, nesterov)
            assert same_bits(gpu[0], cpu[0]) and same_bits(gpu[1], cpu[1]), (dist, nesterov)

"""Arithmetic agreement test (protocol v2, PROTOCOL.md §1): the on-chain referee
(``contracts/lib/Binary32.sol``, ``contracts/lib/Referee.sol``, through
``contracts/mocks/Binary32Harness.sol`` on a real anvil) and the Python path agree bit for bit.

References:
- the four primitive operations: numpy float32 ``+ - * /``, each one correctly rounded IEEE-754
  operation (one ufunc call per operation, so no fused multiply-add; subnormals checked to be
  kept, `_assert_numpy_is_ieee`). NaN results compare as the canonical quiet NaN 0x7FC00000, the
  only NaN the contract returns (NaN payloads are not part of the protocol).
- the rules and the outer step: the trainer's canonical path, ``tenzro_trainer.canonical``.

Inputs stress the hard cases: bit patterns drawn uniformly (every exponent, subnormals, inf,
NaN), exponent gaps around the point where one operand is shifted out entirely, cancellation of
nearby magnitudes, exact rounding ties (sums, products, quotients into the subnormal range),
results in the subnormal range and overflow; rules with K = 1..64 values per coordinate, with
duplicates, signed zeros and mixed scales.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tenzro_trainer import canonical

QNAN = 0x7FC00000
SEED = 20240601
N_OPS = 110_000  # random operand pairs per primitive operation
RULE_COORDS_PER_K = 160  # coordinates per K (K = 1..64) and per rule configuration
N_NESTEROV = 50_000

# Bit patterns of the edge cases: ±0, smallest / largest subnormal, smallest normal, 1, max finite,
# ±inf, quiet and signalling NaN, and a few ordinary values.
EDGE = np.array([
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00000002, 0x007FFFFF, 0x807FFFFF, 0x00400000,
    0x00800000, 0x80800000, 0x00800001, 0x3F800000, 0xBF800000, 0x3F800001, 0x3F7FFFFF, 0x40000000,
    0x3F000000, 0x34000000, 0x33800000, 0x4B800000, 0x4B000001, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000,
    0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00001, 0x0C000000, 0x1F800000, 0x5F800000,
], dtype=np.uint32)


def as_f32(u: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(u, dtype=np.uint32).view(np.float32)


def as_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> uint32 bit patterns, every NaN replaced by the canonical quiet NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).copy()
    u[np.isnan(x)] = QNAN
    return u


def _assert_numpy_is_ieee() -> None:
    """numpy float32 keeps subnormal inputs and results (no FTZ / DAZ set in this process)."""
    tiny = as_f32(np.array([0x00800000, 0x00000003], np.uint32))  # min normal, 3 * 2^-149
    half = as_f32(np.array([0x40000000, 0x40000000], np.uint32))  # 2.0
    assert (as_bits(tiny / half) == [0x00400000, 0x00000002]).all(), "numpy flushes subnormal results"
    assert (as_bits(tiny * half) == [0x01000000, 0x00000006]).all(), "numpy treats subnormal inputs as zero"


NUMPY_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def reference(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return as_bits(NUMPY_OPS[op](as_f32(a), as_f32(b)))


# ----------------------------------------------------------------------------- operand generators

def _rand_bits(rng, n, exp_lo=0, exp_hi=255) -> np.ndarray:
    """Random sign, exponent field uniform in [exp_lo, exp_hi], random fraction."""
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    exp = rng.integers(exp_lo, exp_hi + 1, n, dtype=np.uint32) << 23
    frac = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    return sign | exp | frac


def _scale(rng, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """x * 2^k with k uniform in [lo, hi], computed exactly in float64 then rounded to float32
    (ldexp into the subnormal range rounds; either way the result is a valid operand)."""
    with np.errstate(all="ignore"):
        return as_bits(np.ldexp(x.astype(np.float64), rng.integers(lo, hi + 1, len(x))).astype(np.float32))


def operand_pairs(rng, n: int) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """n operand pairs mixing the families below; returns (a, b, counts per family)."""
    fam: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    m = n // 8
    # Uniform bit patterns: all exponents, subnormals, inf and NaN included.
    fam["uniform"] = (rng.integers(0, 2**32, 2 * m, dtype=np.uint64).astype(np.uint32),
                      rng.integers(0, 2**32, 2 * m, dtype=np.uint64).astype(np.uint32))
    # Exponent gap d = 0..40 between the operands, around the point (d >= 26) where the smaller
    # one is shifted out entirely; both signs.
    a = _rand_bits(rng, m, 1, 254)
    d = rng.integers(0, 41, m, dtype=np.int64)
    eb = np.clip(((a >> 23) & 0xFF).astype(np.int64) - d, 0, 254).astype(np.uint32)
    b = (rng.integers(0, 2, m, dtype=np.uint32) << 31) | (eb << 23) | rng.integers(0, 1 << 23, m, dtype=np.uint32)
    fam["exponent_gap"] = (a, b)
    # Cancellation: |b| within a few ulps of |a|, opposite or equal sign.
    a = _rand_bits(rng, m, 0, 254)
    delta = rng.integers(-4, 5, m).astype(np.int64)
    mag = np.clip((a & 0x7FFFFFFF).astype(np.int64) + delta, 0, 0x7F7FFFFF).astype(np.uint32)
    fam["cancellation"] = (a, mag | (rng.integers(0, 2, m, dtype=np.uint32) << 31))
    # Sum ties: b = ±k * ulp(a) / 2 with k odd (exactly half-way when k = 1, 3, ...).
    a = _rand_bits(rng, m, 25, 254)
    k = (2 * rng.integers(0, 4, m) + 1).astype(np.float64)
    ulp = np.ldexp(1.0, ((a >> 23) & 0xFF).astype(np.int64) - 150)
    b = as_bits((k * ulp / 2 * rng.choice([-1.0, 1.0], m)).astype(np.float32))
    fam["sum_ties"] = (a, b)
    # Product ties: odd integers x * y with a 25-bit odd product (half-way between two float32),
    # scaled anywhere, the subnormal range included.
    x = (2 * rng.integers(2**11, 2**12, m) + 1).astype(np.float64)
    y = (2 * rng.integers(2**11, 2**12, m) + 1).astype(np.float64)
    ok = (x * y >= 2**24) & (x * y < 2**25)
    x, y = np.where(ok, x, 4097.0), np.where(ok, y, 4097.0)
    fam["product_ties"] = (_scale(rng, x.astype(np.float32), -140, 60), _scale(rng, y.astype(np.float32), -140, 60))
    # Subnormal operands and results: tiny times / over ordinary, tiny plus tiny.
    a = _rand_bits(rng, m, 0, 2)
    b = np.where(rng.random(m) < 0.5, _rand_bits(rng, m, 0, 2), _rand_bits(rng, m, 100, 154))
    fam["subnormal"] = (a, b)
    # Quotients into the subnormal range by powers of two (ties at the subnormal quantum) and
    # by ordinary values; overflow of products and quotients.
    a = _rand_bits(rng, m, 0, 30)
    b = np.where(rng.random(m) < 0.5, _rand_bits(rng, m, 127, 160) & 0xFF800000, _rand_bits(rng, m, 127, 160))
    fam["small_quotients"] = (a, b)
    # Quotients just above a tie that only the sticky bit (the remainder) reveals: a dividend
    # with a few significant bits (subnormal) over a divisor with significand 2^24 - small,
    # whose reciprocal 1 + e + e^2 + ... puts a 1 after a long run of zeros.
    k = m // 2
    a = rng.integers(1, 17, k, dtype=np.uint32) | (rng.integers(0, 2, k, dtype=np.uint32) << 31)
    b = ((rng.integers(1, 105, k, dtype=np.uint32) << 23) | (0x7FFFFF - rng.integers(0, 64, k, dtype=np.uint32))
         | (rng.integers(0, 2, k, dtype=np.uint32) << 31))
    fam["quotient_near_ties"] = (a, b)
    a = _rand_bits(rng, m // 2, 180, 254)
    b = _rand_bits(rng, m // 2, 180, 254)
    fam["overflow"] = (a, np.where(rng.random(m // 2) < 0.5, b, _rand_bits(rng, m // 2, 0, 80)))
    a = np.concatenate([v[0] for v in fam.values()]).astype(np.uint32)
    b = np.concatenate([v[1] for v in fam.values()]).astype(np.uint32)
    return a, b, {k: len(v[0]) for k, v in fam.items()}


def edge_pairs() -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of EDGE values."""
    a, b = np.meshgrid(EDGE, EDGE, indexing="ij")
    return a.ravel(), b.ravel()


# ----------------------------------------------------------------------------- coordinate generators

def coordinates(rng, k: int, n: int) -> np.ndarray:
    """(k, n) finite float32 bit patterns, each column drawn from one of five families: Gaussian
    with a random scale (1e-40 .. 1e30), uniform finite bit patterns, nearby magnitudes of both
    signs (cancellation), a small pool of repeated values with ±0, and subnormals."""
    fam = rng.integers(0, 5, n)
    out = np.empty((k, n), np.uint32)
    scale = 10.0 ** rng.uniform(-40, 30, n)
    with np.errstate(all="ignore"):
        gauss = as_bits((rng.standard_normal((k, n)) * scale).astype(np.float32))
    uniform = _rand_bits(rng, k * n, 0, 254).reshape(k, n)
    base = _rand_bits(rng, n, 1, 254) & 0x7FFFFFFF
    near = (base + rng.integers(0, 3, (k, n)).astype(np.uint32)) | (rng.integers(0, 2, (k, n), dtype=np.uint32) << 31)
    pool = np.stack([np.zeros(n, np.uint32), np.full(n, 0x80000000, np.uint32), base, base | 0x80000000,
                     _rand_bits(rng, n, 0, 254)])
    repeated = np.take_along_axis(pool, rng.integers(0, 5, (k, n)), axis=0)
    subnormal = _rand_bits(rng, k * n, 0, 1).reshape(k, n)
    for i, src in enumerate([gauss, uniform, near, repeated, subnormal]):
        out[:, fam == i] = src[:, fam == i]
    return out


def _canonical_rule(rule: int, x: np.ndarray, alpha_bps: int) -> np.ndarray:
    t = torch.from_numpy(as_f32(x).copy())
    if rule == 0:
        r = canonical.mean(t)
    elif rule == 1:
        r = canonical.trimmed_mean(t, alpha_bps)
    else:
        r = canonical.coordinate_median(t)
    return as_bits(r.numpy())


def check_rule(harness, rng, rule: int, alpha_bps: int, ks, per_k: int) -> int:
    """All coordinates for one (rule, alpha) in one batch of calls; returns how many were checked."""
    blocks = [(k, coordinates(rng, k, per_k)) for k in ks]
    values = np.concatenate([x.T.ravel() for _, x in blocks])  # coordinate-major, trainer order
    counts = np.concatenate([np.full(per_k, k, np.uint32) for k, _ in blocks])
    got = harness.aggregate(rule, values, counts, alpha_bps)
    want = np.concatenate([_canonical_rule(rule, x, alpha_bps) for _, x in blocks])
    bad = np.flatnonzero(got != want)
    if len(bad):
        i = int(bad[0])
        start = int(counts[:i].sum())
        xs = [f"{v:08x}" for v in values[start:start + counts[i]]]
        pytest.fail(f"rule {rule} alpha {alpha_bps}: {len(bad)} of {len(counts)} coordinates differ; first: "
                    f"K={counts[i]} x={xs} contract={got[i]:08x} python={want[i]:08x}")
    return len(counts)


# ----------------------------------------------------------------------------- tests

@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(SEED)


def _compare(op: str, a, b, got) -> None:
    want = reference(op, a, b)
    bad = np.flatnonzero(got != want)
    if len(bad):
        rows = [f"{a[i]:08x} {op} {b[i]:08x}: contract {got[i]:08x}, numpy {want[i]:08x}" for i in bad[:8]]
        pytest.fail(f"{op}: {len(bad)} of {len(a)} results differ:\n" + "\n".join(rows))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_primitive_ops_agree_with_numpy(harness, rng, op):
    _assert_numpy_is_ieee()
    ea, eb = edge_pairs()
    a, b, fams = operand_pairs(rng, N_OPS)
    a, b = np.concatenate([ea, a]), np.concatenate([eb, b])
    _compare(op, a, b, harness.binop(op, a, b))
    print(f"\n{op}: {len(a)} operand pairs agree bit for bit ({len(ea)} edge pairs; families {fams})")


@pytest.mark.parametrize("rule,alpha_bps", [(0, 0), (1, 0), (1, 1000), (1, 2500), (1, 4999), (2, 0)])
def test_rules_agree_with_canonical(harness, rng, rule, alpha_bps):
    ks = [k for k in range(1, 65) if 2 * ((k * alpha_bps) // 10000) < k]
    n = check_rule(harness, rng, rule, alpha_bps, ks, RULE_COORDS_PER_K)
    print(f"\nrule {rule} (alpha {alpha_bps} bps): {n} coordinates, K = {ks[0]}..{ks[-1]}, agree bit for bit")


@pytest.mark.parametrize("lr,mu,on", [(0.7, 0.9, True), (0.7, 0.9, False), (None, None, True)])
def test_nesterov_agrees_with_canonical(harness, rng, lr, mu, on):
    """Reference hyperparameters, and random (lr, mu) of any finite magnitude."""
    n = N_NESTEROV // 3
    if lr is None:
        lr, mu = float(as_f32(_rand_bits(rng, 1, 90, 150) & 0x7FFFFFFF)[0]), float(as_f32(_rand_bits(rng, 1, 100, 127))[0])
    lr32, mu32 = canonical.f32(lr), canonical.f32(mu)
    p = coordinates(rng, 1, n)[0]
    m = np.where(rng.random(n) < 0.2, 0, coordinates(rng, 1, n)[0]).astype(np.uint32)  # +0 in round 0
    g = np.where(rng.random(n) < 0.1, 0, coordinates(rng, 1, n)[0]).astype(np.uint32)  # +0: no submission
    lr_bits = int(np.array([lr32], np.float32).view(np.uint32)[0])
    mu_bits = int(np.array([mu32], np.float32).view(np.uint32)[0])
    got_p, got_m = harness.nesterov(p, m, g, lr_bits, mu_bits, on)
    tp, tm, tg = (torch.from_numpy(as_f32(v).copy()) for v in (p, m, g))
    want_p, want_m = canonical.nesterov_step(tp, tm, tg, lr32, mu32, nesterov=on)
    for name, got, want in (("p", got_p, as_bits(want_p.numpy())), ("m", got_m, as_bits(want_m.numpy()))):
        bad = np.flatnonzero(got != want)
        assert not len(bad), (f"nesterov {name}' differs on {len(bad)} of {n}; first: p={p[bad[0]]:08x} "
                              f"m={m[bad[0]]:08x} g={g[bad[0]]:08x} contract={got[bad[0]]:08x} python={want[bad[0]]:08x}")
    print(f"\nnesterov (lr={lr32!r}, mu={mu32!r}, nesterov={on}): {n} coordinates agree bit for bit")


def test_via_ir_build_agrees(harness_ir, rng):
    """The libraries compiled as ape compiles them (via-IR) give the same bits on a smaller sample."""
    a, b, _ = operand_pairs(rng, 16_000)
    ea, eb = edge_pairs()
    a, b = np.concatenate([ea, a]), np.concatenate([eb, b])
    for op in NUMPY_OPS:
        _compare(op, a, b, harness_ir.binop(op, a, b))
    n = sum(check_rule(harness_ir, rng, rule, alpha, range(1, 65, 7), 50) for rule, alpha in [(0, 0), (1, 2000), (2, 0)])
    print(f"\nvia-IR build: {4 * len(a)} primitive results and {n} rule coordinates agree bit for bit")

"""Generate tests/vectors/chunk_commitment_v1.json, the test vectors of the chunk commitment.

Run from the repository root:

    .venv/bin/python tests/vectors/make_chunk_vectors.py          # rewrite the JSON
    .venv/bin/python tests/vectors/make_chunk_vectors.py --check  # exit 1 if it differs

The commitment is defined in ``contracts/PROTOCOL.md`` §2. This generator is a second, slow,
straightforward implementation of it, independent of ``tenzro_trainer.commitment`` (which the
vectors check, together with ``contracts/lib/ChunkMerkle.sol``):

- binary32 arithmetic is exact rational arithmetic (``fractions.Fraction``) followed by one
  round-to-nearest-even to binary32 written out here (subnormals, overflow to inf, signed zeros,
  every NaN result the canonical ``0x7FC00000``), and each finite result is cross-checked
  against a numpy float32 scalar operation;
- encoding is ``struct.pack('>I', ...)`` per value;
- keccak256 is ``eth_hash.auto`` (the pycryptodome backend; the module under test prefers pysha3);
- the tree pads the leaves to a power of two literally and hashes every node, empty ones too.

Everything derives from a fixed seed, so the file is reproducible byte for byte.

JSON layout: ``vectors[k]`` has ``n``, ``num_chunks``, ``depth``, ``values`` (hex bit patterns),
``chunks`` (64-byte hex), ``leaf_h`` / ``leaf_s`` (per chunk), ``root_h`` / ``root_s``, and
``opening_count`` and ``openings[]`` with ``coordinate``, ``chunk_index``, ``value`` and the bottom-up ``sibling_h`` /
``sibling_s``. Every ``s`` is the uint32 bit pattern as a JSON integer (with ``*_hex`` twins for
the roots for humans). ``empty_subtrees[L]`` is the (h, s) of an all-empty subtree of height L.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
from eth_hash.auto import keccak

SEED = 20261122
OUT = Path(__file__).with_name("chunk_commitment_v1.json")
QNAN = 0x7FC00000
CHUNK = 16


def hx(b: bytes) -> str:
    return "0x" + b.hex()


# ---------------------------------------------------------------------------- reference binary32


def _decode(bits: int) -> tuple[str, int, Fraction]:
    """('nan' | 'inf' | 'fin', sign bit, magnitude) of a bit pattern."""
    sign, e, f = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if e == 0xFF:
        return ("nan" if f else "inf"), sign, Fraction(0)
    if e == 0:
        return "fin", sign, Fraction(f, 2**149)
    return "fin", sign, Fraction(f | 1 << 23) * Fraction(2) ** (e - 150)


def _round(sign: int, q: Fraction) -> int:
    """Bit pattern of sign * q (q >= 0 exact) rounded to binary32, nearest, ties to even."""
    if q == 0:
        return sign << 31
    e = q.numerator.bit_length() - q.denominator.bit_length()  # floor(log2 q) is e or e - 1
    if Fraction(2) ** e > q:
        e -= 1
    ulp_exp = max(e - 23, -149)  # 24 significant bits, or the subnormal quantum 2^-149
    k = q / Fraction(2) ** ulp_exp
    lo = k.numerator // k.denominator
    rem = k - lo
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo % 2 == 1):
        lo += 1
    if lo == 1 << 24:  # carry into the next binade
        lo, ulp_exp = 1 << 23, ulp_exp + 1
    if lo < 1 << 23:  # subnormal (only at ulp_exp == -149)
        return sign << 31 | lo
    biased = ulp_exp + 150
    if biased >= 0xFF:
        return sign << 31 | 0x7F800000
    return sign << 31 | biased << 23 | (lo - (1 << 23))


def _np_check(bits: int, a: int, b: int, op) -> int:
    """Cross-check a non-NaN reference result against numpy float32 scalars."""
    if bits & 0x7FFFFFFF > 0x7F800000:
        return bits
    fa, fb = (np.array([x], dtype=np.uint32).view(np.float32)[0] for x in (a, b))
    with np.errstate(all="ignore"):
        got = int(np.array([op(fa, fb)], dtype=np.float32).view(np.uint32)[0])
    assert got == bits, f"reference {bits:#010x} != numpy {got:#010x} for {a:#010x}, {b:#010x}"
    return bits


def f32_add(a: int, b: int) -> int:
    """fl(a + b) on bit patterns (reference)."""
    ka, sa, ma = _decode(a)
    kb, sb, mb = _decode(b)
    if "nan" in (ka, kb):
        return QNAN
    if ka == "inf" and kb == "inf":
        return a if sa == sb else QNAN
    if ka == "inf" or kb == "inf":
        return a if ka == "inf" else b
    exact = (-ma if sa else ma) + (-mb if sb else mb)
    r = (sa & sb) << 31 if exact == 0 else _round(int(exact < 0), abs(exact))
    return _np_check(r, a, b, lambda x, y: x + y)


def f32_mul(a: int, b: int) -> int:
    """fl(a * b) on bit patterns (reference)."""
    ka, sa, ma = _decode(a)
    kb, sb, mb = _decode(b)
    sign = sa ^ sb
    if "nan" in (ka, kb):
        return QNAN
    if "inf" in (ka, kb):
        zero = (ka == "fin" and ma == 0) or (kb == "fin" and mb == 0)
        return QNAN if zero else sign << 31 | 0x7F800000
    r = _round(sign, ma * mb)
    return _np_check(r, a, b, lambda x, y: x * y)


# ---------------------------------------------------------------------------- reference tree


def ref_leaf(chunk: bytes) -> tuple[bytes, int]:
    acc = 0
    for (x,) in struct.iter_unpack(">I", chunk):
        acc = f32_add(acc, f32_mul(x, x))
    return keccak(b"\x00" + chunk), acc


def ref_node(left: tuple[bytes, int], right: tuple[bytes, int]) -> tuple[bytes, int]:
    (hl, sl), (hr, sr) = left, right
    return keccak(b"\x01" + hl + struct.pack(">I", sl) + hr + struct.pack(">I", sr)), f32_add(sl, sr)


def ref_chunks(values: list[int]) -> list[bytes]:
    padded = values + [0] * (-len(values) % CHUNK)
    return [struct.pack(">16I", *padded[k : k + CHUNK]) for k in range(0, len(padded), CHUNK)]


def ref_levels(leaves: list[tuple[bytes, int]]) -> list[list[tuple[bytes, int]]]:
    """Every level of the tree, leaves padded to a power of two with (0x00 * 32, +0)."""
    size = 1
    while size < len(leaves):
        size *= 2
    levels = [leaves + [(bytes(32), 0)] * (size - len(leaves))]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([ref_node(below[k], below[k + 1]) for k in range(0, len(below), 2)])
    return levels


# ---------------------------------------------------------------------------- cases


def f32_bits(x: float) -> int:
    return struct.unpack(">I", struct.pack(">f", x))[0]


def random_bits(rng: random.Random, lo_exp: int, hi_exp: int) -> int:
    """A finite normal binary32 with a random sign, significand and exponent in [lo_exp, hi_exp]."""
    return rng.getrandbits(1) << 31 | (rng.randint(lo_exp, hi_exp) + 127) << 23 | rng.getrandbits(23)


def make_vector(name: str, description: str, values: list[int], coordinates: list[int]) -> dict:
    chunks = ref_chunks(values)
    leaves = [ref_leaf(c) for c in chunks]
    levels = ref_levels(leaves)
    depth = len(levels) - 1
    root_h, root_s = levels[-1][0]
    openings = []
    for c in coordinates:
        i = c // CHUNK
        sib = [levels[L][(i >> L) ^ 1] for L in range(depth)]
        openings.append(
            {
                "coordinate": c,
                "chunk_index": i,
                "value": values[c],
                "sibling_h": [hx(h) for h, _ in sib],
                "sibling_s": [s for _, s in sib],
            }
        )
    return {
        "name": name,
        "description": description,
        "n": len(values),
        "num_chunks": len(chunks),
        "depth": depth,
        "values": [f"0x{v:08x}" for v in values],
        "chunks": [hx(c) for c in chunks],
        "leaf_h": [hx(h) for h, _ in leaves],
        "leaf_s": [s for _, s in leaves],
        "root_h": hx(root_h),
        "root_s": root_s,
        "root_s_hex": f"0x{root_s:08x}",
        "opening_count": len(openings),
        "openings": openings,
    }


def build() -> dict:
    rng = random.Random(SEED)
    vectors = [
        make_vector("n1_one", "n = 1: the value 1.0; one chunk with 15 padding zeros, root = leaf", [f32_bits(1.0)], [0]),
        make_vector(
            "n15_zeros_subnormals",
            "n = 15: +0, -0, subnormals (squares flush to +0 or round), the smallest normal, values whose "
            "squares are subnormal, ties in rounding; one padding zero",
            [
                0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x80800000,
                f32_bits(1e-20), f32_bits(-3e-21), f32_bits(1.1754944e-19), f32_bits(2.0**-75),
                f32_bits(1.0), f32_bits(-1.5), f32_bits(1.0 + 2.0**-23), f32_bits(1.0 + 2.0**-12),
            ],
            [0, 7, 14],
        ),
        make_vector(
            "n16_overflow_inf",
            "n = 16 (one full chunk): squares that overflow to +inf (1e20, 2^64), the largest x with a "
            "finite square, two finite squares whose sum overflows, max float, +-inf inputs",
            [
                f32_bits(1.5), f32_bits(1.5e19), f32_bits(-1.5e19), f32_bits(2.0**64 - 2.0**40),
                f32_bits(1e20), f32_bits(-(2.0**64)), 0x7F7FFFFF, 0xFF800000,
                0x7F800000, f32_bits(0.25), 0x80000000, f32_bits(-7.0),
                f32_bits(1e-30), f32_bits(6e18), f32_bits(-1e19), f32_bits(42.0),
            ],
            [0, 6, 15],
        ),
        make_vector(
            "n17_nan",
            "n = 17: NaN inputs (quiet, negative quiet with payload, signalling) in chunk 0 make its s and the "
            "root s the canonical NaN 0x7FC00000; chunk 1 holds one value and 15 padding zeros",
            [random_bits(rng, -4, 4) for _ in range(3)] + [0x7FC00000, 0xFFC00001, 0x7F800001]
            + [random_bits(rng, -4, 4) for _ in range(10)] + [f32_bits(-2.0)],
            [3, 16],
        ),
        make_vector(
            "n33_three_chunks",
            "n = 33: three chunks padded to four leaves (one empty leaf as a sibling), depth 2",
            [random_bits(rng, -10, 3) for _ in range(33)],
            [0, 20, 32],
        ),
        make_vector(
            "n70_five_chunks",
            "n = 70: five chunks padded to eight leaves, so an empty inner node (height 1) is a sibling; depth 3",
            [random_bits(rng, -8, 8) for _ in range(70)],
            [0, 33, 64, 69],
        ),
        make_vector(
            "n1000_mixed",
            "n = 1000: 63 chunks padded to 64, depth 6; random values over a wide exponent range, some +-0 "
            "and subnormals",
            [
                (rng.choice([0x00000000, 0x80000000, rng.getrandbits(23), 0x80000000 | rng.getrandbits(23)])
                 if rng.random() < 0.05 else random_bits(rng, -40, 20))
                for _ in range(1000)
            ],
            [0, 15, 16, 517, 992, 999],
        ),
    ]
    empty = [(bytes(32), 0)]
    for _ in range(16):
        empty.append(ref_node(empty[-1], empty[-1]))
    return {
        "version": 1,
        "definition": "contracts/PROTOCOL.md section 2 (chunk commitments)",
        "generator": "tests/vectors/make_chunk_vectors.py",
        "seed": SEED,
        "chunk_values": CHUNK,
        "canonical_nan": f"0x{QNAN:08x}",
        "vector_count": len(vectors),
        "empty_subtrees": [{"height": k, "h": hx(h), "s": s} for k, (h, s) in enumerate(empty)],
        "vectors": vectors,
    }


def render() -> str:
    return json.dumps(build(), indent=1) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the JSON on disk differs")
    args = p.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run {Path(__file__).name} without --check", file=sys.stderr)
            return 1
        print(f"{OUT} is up to date")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

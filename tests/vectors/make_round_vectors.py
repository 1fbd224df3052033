"""Generate tests/vectors/round_commitment_v1.json, the test vectors of round commitments.

Run from the repository root (PYTHONPATH must hold operator/ and trainer/):

    .venv/bin/python tests/vectors/make_round_vectors.py          # rewrite the JSON
    .venv/bin/python tests/vectors/make_round_vectors.py --check  # exit 1 if it differs

The encodings are defined in ``contracts/PROTOCOL.md`` §6. Each case is one real round of one
task: every fragment's previous state (the initial one, or a random earlier round), the
accepted trainers' pseudo-gradients, their aggregate under the task's rule computed with
``tenzro_trainer.canonical`` and the outer step (``canonical.nesterov_step``), the committed
leaves and roots, and aggregate openings (``tenzro_trainer.round_commitment``) at several
coordinates with the expected result of ``RoundProofs.aggregateMismatch``. One case commits a
deliberately wrong weight at one coordinate and a wrong momentum at another.

The hashes are cross-checked here against a second, literal encoding (``eth_abi.encode`` /
``eth_abi.packed.encode_packed`` with ``eth_utils.keccak``, a recursive tree), and each expected
result against the Python mirror ``round_commitment.aggregate_mismatch``. Everything derives
from fixed seeds, so the file is reproducible byte for byte.

JSON layout: ``cases[k]`` has ``name``, ``description``, the task (``task_id``, ``round``,
``fragment_count``, ``enrolled``, ``slot_width``, ``rule``, ``alpha_bps``, ``lr`` / ``mu`` bit
patterns, ``nesterov``, ``prev_is_initial``), ``fragments_root`` / ``prev_fragments_root``,
``current_leaves`` / ``previous_leaves`` (fields and ``hash``), ``submissions`` (every accepted
submission of every fragment: preimage, ``struct_hash``, ``slot_leaf``) and ``openings[]`` with
``fragment``, ``coordinate``, ``expected``, the opened ``values`` and the recomputed ones, and
``context_abi`` / ``opening_abi`` (``abi.encode`` of ``RoundProofs.AggregateContext`` /
``AggregateOpening``). Bit patterns and sums are JSON integers.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from eth_abi import encode
from eth_abi.packed import encode_packed
from eth_utils import keccak as eth_keccak

from tenzro_trainer import canonical
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.commitment import ChunkTree

OUT = Path(__file__).with_name("round_commitment_v1.json")
TASK_ID = eth_keccak(b"tenzro-train round_commitment_v1 task")
LR = rc.f32_bits(0.7)
MU = rc.f32_bits(0.9)


def hx(b: bytes) -> str:
    return "0x" + b.hex()


# ---------------------------------------------------------------------------- literal reference encodings


def ref_struct_hash(s: rc.OuterGradient) -> bytes:
    typehash = eth_keccak(text=rc.OUTER_GRADIENT_TYPE)
    return eth_keccak(encode(
        ["bytes32", "bytes32", "uint32", "uint16", "bytes32", "bytes32", "uint32", "bytes32", "bytes32"],
        [typehash, s.task_id, s.round, s.fragment, s.base_root, s.payload_root, s.payload_sumsq,
         eth_keccak(text=s.cid), s.payload_hash],
    ))


def ref_slot_leaf(i: int, h: bytes) -> bytes:
    return eth_keccak(encode_packed(["uint8", "uint16", "bytes32"], [2, i, h]))


def ref_fragment_leaf(l: rc.FragmentLeaf) -> bytes:
    return eth_keccak(encode_packed(
        ["uint8", "uint16", "bytes32", "uint16", "bytes32", "uint32", "bytes32", "uint32"],
        [3, l.fragment, l.accepted_root, l.accepted_count, l.weights_root, l.weights_sumsq, l.momentum_root,
         l.momentum_sumsq],
    ))


def ref_root(leaves: list[bytes]) -> bytes:
    """Root of the positional tree over the next power of two >= max(1, len) positions, recursively."""
    width = 1
    while width < len(leaves):
        width *= 2
    padded = leaves + [bytes(32)] * (width - len(leaves))

    def node(lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            return padded[lo]
        mid = (lo + hi) // 2
        return eth_keccak(node(lo, mid) + node(mid, hi))

    return node(0, width)


# ---------------------------------------------------------------------------- one round


@dataclass
class Case:
    name: str
    description: str
    seed: int
    sizes: list[int]  # n per fragment (F = len)
    enrolled: int
    accepted: list[list[int]]  # accepted trainer indices per fragment
    rule: int
    alpha_bps: int
    nesterov: bool
    round: int
    prev_initial: bool
    proofs: list[tuple[int, list[int]]]  # (fragment, coordinates)
    planted_w: dict[int, dict[int, int]] = field(default_factory=dict)  # fragment -> {coordinate: xor mask}
    planted_m: dict[int, dict[int, int]] = field(default_factory=dict)
    specials: bool = False  # +-0 and a subnormal among coordinate 0..2's payload values


def _randn(g: torch.Generator, n: int, scale: float) -> torch.Tensor:
    return (torch.randn(n, generator=g) * scale).to(torch.float32)


def _flip(vec: torch.Tensor, masks: dict[int, int]) -> torch.Tensor:
    bits = vec.clone().view(torch.int32)
    for c, mask in masks.items():
        u = (int(bits[c].item()) & 0xFFFFFFFF) ^ mask
        bits[c] = u - (1 << 32) if u >= 1 << 31 else u
    return bits.view(torch.float32)


def _aggregate(rule: int, alpha_bps: int, rows: list[torch.Tensor], n: int) -> torch.Tensor:
    if not rows:
        return torch.zeros(n, dtype=torch.float32)
    x = torch.stack(rows)
    if rule == rc.RULE_MEAN:
        return canonical.mean(x)
    if rule == rc.RULE_TRIMMED_MEAN:
        return canonical.trimmed_mean(x, alpha_bps)
    return canonical.coordinate_median(x)


def build_case(case: Case) -> dict:
    g = torch.Generator().manual_seed(case.seed)
    F = len(case.sizes)
    # Previous round (or the initial state).
    prev_states, prev_vecs = [], []
    for f, n in enumerate(case.sizes):
        w = _randn(g, n, 0.05)
        if case.prev_initial:
            prev_states.append(rc.FragmentState.initial(f, w))
            prev_vecs.append((w, torch.zeros(n, dtype=torch.float32)))
        else:
            m = _randn(g, n, 0.01)
            earlier = {i: eth_keccak(b"earlier round" + bytes([f, i]))
                       for i in range(case.enrolled) if (i + f) % 2 == 0}
            prev_states.append(rc.FragmentState.build(f, w, m, rc.AcceptedSet(earlier, case.enrolled)))
            prev_vecs.append((w, m))
    prev_leaves = [s.leaf for s in prev_states]
    prev_root = rc.fragments_root(prev_leaves)
    # This round: submissions, aggregate, outer step, commitment.
    subs: dict[int, dict[int, rc.OuterGradient]] = {}
    payloads: dict[int, dict[int, torch.Tensor]] = {}
    cur_states = []
    for f, n in enumerate(case.sizes):
        subs[f], payloads[f] = {}, {}
        for i in case.accepted[f]:
            p = _randn(g, n, 0.01)
            if case.specials and n >= 3:
                p[0] = -0.0 if i % 2 else 0.0
                p[1] = torch.tensor(1e-40, dtype=torch.float32) * (1 if i % 3 else -1)
            payloads[f][i] = p
            root, sumsq = ChunkTree(p).root
            subs[f][i] = rc.OuterGradient(TASK_ID, case.round, f, prev_root, root, sumsq,
                                          f"bafyround{case.round}frag{f}trainer{i}", eth_keccak(b"payload" + root))
        agg = _aggregate(case.rule, case.alpha_bps, [payloads[f][i] for i in sorted(payloads[f])], n)
        pw, pm = prev_vecs[f]
        w, m = canonical.nesterov_step(pw, pm, agg, rc.bits_f32(LR), rc.bits_f32(MU), case.nesterov)
        w = _flip(w, case.planted_w.get(f, {}))
        m = _flip(m, case.planted_m.get(f, {}))
        accepted = rc.AcceptedSet({i: s.struct_hash() for i, s in subs[f].items()}, case.enrolled)
        cur_states.append(rc.FragmentState.build(f, w, m, accepted))
    cur_leaves = [s.leaf for s in cur_states]
    cur_root = rc.fragments_root(cur_leaves)
    # Cross-checks against the literal encodings.
    for f in range(F):
        for i, s in subs[f].items():
            assert s.struct_hash() == ref_struct_hash(s)
            assert rc.slot_leaf(i, s.struct_hash()) == ref_slot_leaf(i, s.struct_hash())
        slots = [ref_slot_leaf(i, subs[f][i].struct_hash()) if i in subs[f] else bytes(32)
                 for i in range(max(1, case.enrolled))]
        assert cur_states[f].accepted.root == ref_root(slots)
    for leaves, root in ((cur_leaves, cur_root), (prev_leaves, prev_root)):
        assert [l.hash() for l in leaves] == [ref_fragment_leaf(l) for l in leaves]
        assert root == ref_root([l.hash() for l in leaves])
    # Openings.
    openings = []
    for f, coords in case.proofs:
        ctx = rc.AggregateContext(TASK_ID, case.round, cur_root, prev_root, case.prev_initial, F,
                                  cur_states[f].accepted.width, case.sizes[f], case.rule, case.alpha_bps, LR, MU,
                                  case.nesterov)
        for c in coords:
            o = rc.build_aggregate_opening(fragment=f, coordinate=c, current=cur_states[f], previous=prev_states[f],
                                           current_leaves=cur_leaves, previous_leaves=prev_leaves,
                                           submissions=subs[f], payloads=payloads[f])
            expected = c in case.planted_w.get(f, {}) or c in case.planted_m.get(f, {})
            assert rc.aggregate_mismatch(o, ctx) == expected, (case.name, f, c)
            xs = [e.payload.value(c) for e in o.entries]
            prev_m = 0 if case.prev_initial else o.prev_momentum.value(c)
            rw, rm = rc.recompute(case.rule, case.alpha_bps, xs, o.prev_weights.value(c), prev_m, LR, MU, case.nesterov)
            openings.append({
                "fragment": f,
                "coordinate": c,
                "expected": expected,
                "values": {"xs": xs, "prev_w": o.prev_weights.value(c), "prev_m": prev_m,
                           "new_w": o.new_weights.value(c), "new_m": o.new_momentum.value(c),
                           "recomputed_w": rw, "recomputed_m": rm},
                "entry_count": len(o.entries),
                "context_abi": hx(ctx.abi_encode()),
                "opening_abi": hx(o.abi_encode()),
            })

    def leaf_json(l: rc.FragmentLeaf) -> dict:
        return {"fragment": l.fragment, "accepted_root": hx(l.accepted_root), "accepted_count": l.accepted_count,
                "weights_root": hx(l.weights_root), "weights_sumsq": l.weights_sumsq,
                "momentum_root": hx(l.momentum_root), "momentum_sumsq": l.momentum_sumsq, "hash": hx(l.hash())}

    return {
        "name": case.name,
        "description": case.description,
        "task_id": hx(TASK_ID),
        "round": case.round,
        "fragment_count": F,
        "fragment_sizes": case.sizes,
        "enrolled": case.enrolled,
        "slot_width": rc.next_pow2(max(1, case.enrolled)),
        "rule": case.rule,
        "alpha_bps": case.alpha_bps,
        "lr": LR,
        "mu": MU,
        "nesterov": case.nesterov,
        "prev_is_initial": case.prev_initial,
        "fragments_root": hx(cur_root),
        "prev_fragments_root": hx(prev_root),
        "current_leaves": [leaf_json(l) for l in cur_leaves],
        "previous_leaves": [leaf_json(l) for l in prev_leaves],
        "submission_count": sum(len(s) for s in subs.values()),
        "submissions": [
            {"trainer_index": i, "task_id": hx(s.task_id), "round": s.round, "fragment": s.fragment,
             "base_root": hx(s.base_root), "payload_root": hx(s.payload_root), "payload_sumsq": s.payload_sumsq,
             "cid": s.cid, "payload_hash": hx(s.payload_hash), "struct_hash": hx(s.struct_hash()),
             "slot_leaf": hx(rc.slot_leaf(i, s.struct_hash()))}
            for f in range(F) for i, s in sorted(subs[f].items())
        ],
        "opening_count": len(openings),
        "openings": openings,
    }


CASES = [
    Case("f1_e1_mean_initial", "F = 1, one enrolled trainer, Mean of K = 1, round 0 from the initial state "
         "(momentum +0, not opened); n = 20 (two chunks, the last padded)",
         seed=1, sizes=[20], enrolled=1, accepted=[[0]], rule=rc.RULE_MEAN, alpha_bps=0, nesterov=True, round=0,
         prev_initial=True, proofs=[(0, [0, 7, 16, 19])]),
    Case("f3_e3_trimmed_mean", "F = 3, 3 enrolled (4 slots), TrimmedMean(3400 bps) of K = 3 (one trimmed from each "
         "end) on fragment 1 (n = 40); fragment 2 has no accepted submission (g = +0)",
         seed=2, sizes=[33, 40, 17], enrolled=3, accepted=[[0, 2], [0, 1, 2], []], rule=rc.RULE_TRIMMED_MEAN,
         alpha_bps=3400, nesterov=True, round=5, prev_initial=False, proofs=[(1, [0, 15, 16, 39]), (2, [0, 16])]),
    Case("f3_e3_heavy_ball_empty", "F = 3, 3 enrolled, Mean without Nesterov; fragment 0 has K = 0 (the weights "
         "still move by the momentum), fragment 1 K = 1",
         seed=3, sizes=[33, 40, 17], enrolled=3, accepted=[[], [1], [0, 1, 2]], rule=rc.RULE_MEAN, alpha_bps=0,
         nesterov=False, round=2, prev_initial=False, proofs=[(0, [3, 32]), (1, [39])]),
    Case("f4_e8_median_initial", "F = 4, 8 enrolled, CoordinateMedian, round 0 from the initial state; fragment 2 "
         "K = 5 (odd), fragment 3 K = 4 (even: mean of the middle two); +-0 and subnormals at coordinates 0, 1",
         seed=4, sizes=[50, 64, 100, 10], enrolled=8, accepted=[[0, 1], [3], [0, 2, 3, 5, 7], [1, 4, 6, 7]],
         rule=rc.RULE_COORDINATE_MEDIAN, alpha_bps=0, nesterov=True, round=0, prev_initial=True,
         proofs=[(2, [0, 1, 2, 50, 99]), (3, [0, 1, 9])], specials=True),
    Case("f4_e8_mean_planted", "F = 4, 8 enrolled, Mean of K = 8 on fragment 1 (n = 70); the syncer committed a "
         "wrong weight at coordinate 33 (last bit flipped) and a wrong momentum at 50 (sign flipped): those "
         "openings expect true, the others (34 shares 33's chunk) false",
         seed=5, sizes=[16, 70, 5, 31], enrolled=8, accepted=[[0], list(range(8)), [], [2, 5]], rule=rc.RULE_MEAN,
         alpha_bps=0, nesterov=True, round=7, prev_initial=False, proofs=[(1, [0, 33, 34, 50, 69])],
         planted_w={1: {33: 1}}, planted_m={1: {50: 0x80000000}}),
    Case("gas_k8_n65536", "gas fixture: F = 4, 8 enrolled, Mean of K = 8 on fragment 1 with n = 2^16 (4096 chunks, "
         "chunk depth 12)",
         seed=6, sizes=[16, 1 << 16, 16, 16], enrolled=8, accepted=[[0], list(range(8)), [1], [2]], rule=rc.RULE_MEAN,
         alpha_bps=0, nesterov=True, round=3, prev_initial=False, proofs=[(1, [40_000])]),
]


def build() -> dict:
    torch.set_flush_denormal(False)
    cases = [build_case(c) for c in CASES]
    return {
        "version": 1,
        "definition": "contracts/PROTOCOL.md section 6 (round commitments and aggregate openings)",
        "generator": "tests/vectors/make_round_vectors.py",
        "outer_gradient_type": rc.OUTER_GRADIENT_TYPE,
        "outer_gradient_typehash": hx(rc.OUTER_GRADIENT_TYPEHASH),
        "aggregate_opening_abi": rc.AGGREGATE_OPENING_ABI,
        "aggregate_context_abi": rc.AGGREGATE_CONTEXT_ABI,
        "case_count": len(cases),
        "cases": cases,
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

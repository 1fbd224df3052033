"""Round commitments (PROTOCOL.md §6): tenzro_trainer.round_commitment against the shared vectors,
the ABI round trip, positional-tree properties and every rejection of a tampered proof (the same
list as tests/forge/RoundProofs.t.sol)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from eth_utils import keccak as eth_keccak
from hypothesis import given, settings
from hypothesis import strategies as st

from tenzro_trainer import canonical
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.commitment import ChunkTree
from vectors import make_round_vectors as gen

VECTORS_PATH = Path(__file__).parents[1] / "vectors" / "round_commitment_v1.json"
VECTORS = json.loads(VECTORS_PATH.read_text())
CASES = {c["name"]: c for c in VECTORS["cases"]}
ALL_OPENINGS = [(c["name"], j) for c in VECTORS["cases"] for j in range(c["opening_count"])]


def b(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr[2:])


def load(name: str, j: int) -> tuple[rc.AggregateOpening, rc.AggregateContext]:
    o = CASES[name]["openings"][j]
    return rc.AggregateOpening.abi_decode(b(o["opening_abi"])), rc.AggregateContext.abi_decode(b(o["context_abi"]))


def rejected(reason: str, o: rc.AggregateOpening, ctx: rc.AggregateContext) -> None:
    with pytest.raises(rc.ProofRejected) as info:
        rc.aggregate_mismatch(o, ctx)
    assert info.value.reason == reason, str(info.value)


# ---------------------------------------------------------------------------- shared vectors


def test_vectors_regenerate_identically():
    assert gen.render() == VECTORS_PATH.read_text(), "run tests/vectors/make_round_vectors.py"


def test_type_hash():
    want = b(VECTORS["outer_gradient_typehash"])
    assert rc.OUTER_GRADIENT_TYPEHASH == eth_keccak(text=rc.OUTER_GRADIENT_TYPE) == want


@pytest.mark.parametrize("name", sorted(CASES))
def test_vector_encodings(name):
    case = CASES[name]
    for s in case["submissions"]:
        sub = rc.OuterGradient(b(s["task_id"]), s["round"], s["fragment"], b(s["base_root"]), b(s["payload_root"]),
                               s["payload_sumsq"], s["cid"], b(s["payload_hash"]))
        assert sub.struct_hash() == b(s["struct_hash"])
        assert rc.slot_leaf(s["trainer_index"], sub.struct_hash()) == b(s["slot_leaf"])
    for key, root in (("current_leaves", "fragments_root"), ("previous_leaves", "prev_fragments_root")):
        leaves = [rc.FragmentLeaf(l["fragment"], b(l["accepted_root"]), l["accepted_count"], b(l["weights_root"]),
                                  l["weights_sumsq"], b(l["momentum_root"]), l["momentum_sumsq"]) for l in case[key]]
        assert [l.hash() for l in leaves] == [b(l["hash"]) for l in case[key]]
        assert rc.fragments_root(leaves) == b(case[root])


@pytest.mark.parametrize("name,j", ALL_OPENINGS)
def test_vector_opening(name, j):
    o, ctx = load(name, j)
    want = CASES[name]["openings"][j]
    assert o.abi_encode() == b(want["opening_abi"]) and ctx.abi_encode() == b(want["context_abi"])  # round trip
    assert (o.fragment, o.coordinate) == (want["fragment"], want["coordinate"])
    assert rc.aggregate_mismatch(o, ctx) is want["expected"]


def test_planted_values_are_the_only_mismatches():
    """Every coordinate of the opened chunks of the planted case: true exactly at 33 (w) and 50 (m)."""
    for j in (0, 1, 3):
        o, ctx = load("f4_e8_mean_planted", j)
        base = 16 * (o.coordinate // 16)
        for c in range(base, base + 16):
            assert rc.aggregate_mismatch(replace(o, coordinate=c), ctx) is (c in (33, 50))


def test_initial_momentum_is_not_read():
    o, ctx = load("f1_e1_mean_initial", 0)
    assert ctx.prev_is_initial and o.previous.momentum_root == rc.ZERO32 and o.previous.momentum_sumsq == 0
    garbage = rc.CoordinateOpening(7, b"\x01", (bytes(32),) * 3, (0,))
    assert rc.aggregate_mismatch(replace(o, prev_momentum=garbage), ctx) is False


# ---------------------------------------------------------------------------- tampered proofs


def test_rejects_tampered_fragment_paths():
    o, ctx = load("f4_e8_mean_planted", 0)
    bad = (bytes([o.current_path[0][0] ^ 1]) + o.current_path[0][1:],) + o.current_path[1:]
    rejected("FragmentLeafNotInRoot", replace(o, current_path=bad), ctx)
    rejected("FragmentLeafNotInRoot", replace(o, current=replace(o.current, weights_sumsq=o.current.weights_sumsq ^ 1)),
             ctx)
    rejected("FragmentLeafNotInRoot", replace(o, previous_path=o.previous_path[:1]), ctx)
    rejected("FragmentLeafNotInRoot", replace(o, previous=replace(o.previous, accepted_count=0)), ctx)


def test_rejects_entry_order_and_count():
    o, ctx = load("f4_e8_mean_planted", 0)
    e = list(o.entries)
    rejected("EntriesNotAscending", replace(o, entries=(e[1], e[0], *e[2:])), ctx)
    rejected("EntriesNotAscending", replace(o, entries=(*e[:3], e[2], *e[4:])), ctx)
    rejected("EntryCountMismatch", replace(o, entries=tuple(e[:7])), ctx)


def test_rejects_entry_binding():
    o, ctx = load("f4_e8_mean_planted", 0)
    e = list(o.entries)
    forged = replace(e[4], payload_root=bytes(32))
    rejected("StructHashMismatch", replace(o, entries=(*e[:4], forged, *e[5:])), ctx)
    resigned = replace(forged, struct_hash=rc.struct_hash_of_cid_hash(
        ctx.task_id, ctx.round, o.fragment, forged.base_root, forged.payload_root, forged.payload_sumsq,
        forged.cid_hash, forged.payload_hash))
    rejected("SlotNotInAcceptedRoot", replace(o, entries=(*e[:4], resigned, *e[5:])), ctx)
    moved = replace(e[5], slot_path=(e[5].slot_path[0], e[5].slot_path[2], e[5].slot_path[1]))
    rejected("SlotNotInAcceptedRoot", replace(o, entries=(*e[:5], moved, *e[6:])), ctx)
    o2, ctx2 = load("f4_e8_median_initial", 0)  # fragment 2 accepted trainers 0, 2, 3, 5, 7: slot 1 is empty
    first = replace(o2.entries[0], trainer_index=1)
    rejected("SlotNotInAcceptedRoot", replace(o2, entries=(first, *o2.entries[1:])), ctx2)


def test_rejects_tampered_openings():
    o, ctx = load("f4_e8_mean_planted", 1)  # coordinate 33, chunk 2
    e = list(o.entries)
    chunk = bytearray(e[2].payload.chunk)
    chunk[5] ^= 1
    bad = replace(e[2], payload=replace(e[2].payload, chunk=bytes(chunk)))
    rejected("OpeningNotInRoot", replace(o, entries=(*e[:2], bad, *e[3:])), ctx)
    bad = replace(e[7], payload=replace(e[7].payload, sibling_s=(e[7].payload.sibling_s[0] ^ 1,)
                                        + e[7].payload.sibling_s[1:]))
    rejected("OpeningNotInRoot", replace(o, entries=(*e[:7], bad)), ctx)
    rejected("WrongChunk", replace(o, new_weights=replace(o.new_weights, chunk_index=3)), ctx)
    other, _ = load("f4_e8_mean_planted", 3)  # coordinate 50, chunk 3
    rejected("WrongChunk", replace(o, new_momentum=other.new_momentum), ctx)
    rejected("OpeningNotInRoot", replace(o, new_momentum=replace(other.new_momentum, chunk_index=2)), ctx)
    rejected("OpeningNotInRoot", replace(o, prev_weights=replace(o.prev_weights, sibling_h=o.prev_weights.sibling_h[:2],
                                                                 sibling_s=o.prev_weights.sibling_s[:2])), ctx)
    short = replace(o.prev_momentum, sibling_s=o.prev_momentum.sibling_s[:2])
    rejected("OpeningNotInRoot", replace(o, prev_momentum=short), ctx)


def test_rejects_ranges():
    o, ctx = load("f4_e8_mean_planted", 4)
    rejected("CoordinateOutOfRange", replace(o, coordinate=70), ctx)
    rejected("FragmentOutOfRange", replace(o, fragment=4), ctx)
    rejected("BadWidth", o, replace(ctx, slot_width=6))
    rejected("SlotNotInAcceptedRoot", o, replace(ctx, slot_width=16))


def test_mislabelled_leaf_is_a_mismatch():
    o, ctx = load("f4_e8_mean_planted", 0)
    case = CASES["f4_e8_mean_planted"]
    leaf = replace(o.current, fragment=3)
    hashes = [b(l["hash"]) for l in case["current_leaves"]]
    hashes[o.fragment] = leaf.hash()
    tree = rc.MerkleTree(hashes)
    assert rc.aggregate_mismatch(replace(o, current=leaf, current_path=tuple(tree.path(o.fragment))),
                                 replace(ctx, fragments_root=tree.root)) is True


# ---------------------------------------------------------------------------- positional trees

leaf32 = st.binary(min_size=32, max_size=32)


@settings(max_examples=60, deadline=None)
@given(st.lists(leaf32, min_size=0, max_size=17), st.data())
def test_every_path_verifies_and_tampering_fails(leaves, data):
    tree = rc.MerkleTree(leaves)
    assert tree.width == rc.next_pow2(len(leaves)) and len(tree.levels) == tree.depth + 1
    i = data.draw(st.integers(0, tree.width - 1))
    at = leaves[i] if i < len(leaves) else rc.ZERO32
    path = tree.path(i)
    assert rc.verify_path(tree.root, at, i, path, tree.width)
    assert not rc.verify_path(tree.root, at, i, path, tree.width * 2)
    assert not rc.verify_path(tree.root, at, i + tree.width, path, tree.width)
    assert not rc.verify_path(tree.root, bytes([at[0] ^ 1]) + at[1:], i, path, tree.width)
    if path:
        k = data.draw(st.integers(0, len(path) - 1))
        bad = list(path)
        bad[k] = bytes([bad[k][0] ^ 0x80]) + bad[k][1:]
        assert not rc.verify_path(tree.root, at, i, bad, tree.width)
        assert not rc.verify_path(tree.root, at, i ^ 1, path, tree.width) or path[0] == at
        assert not rc.verify_path(tree.root, at, i, path[:-1], tree.width)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.integers(0, 8), leaf32, max_size=9), st.integers(9, 12))
def test_accepted_set_matches_the_literal_tree(hashes, enrolled):
    acc = rc.AcceptedSet(hashes, enrolled)
    assert acc.width == 16 and acc.count == len(hashes) and acc.indices == sorted(hashes)
    slots = [rc.slot_leaf(i, hashes[i]) if i in hashes else bytes(32) for i in range(enrolled)]
    assert acc.root == gen.ref_root(slots)
    for i in acc.indices:
        assert acc.slot(i) == gen.ref_slot_leaf(i, hashes[i])
        assert rc.verify_path(acc.root, acc.slot(i), i, acc.path(i), acc.width)


def test_shapes_and_errors():
    assert [rc.next_pow2(x) for x in (0, 1, 2, 3, 4, 5, 8, 9)] == [1, 1, 2, 4, 4, 8, 8, 16]
    assert rc.MerkleTree([b"\x07" * 32]).root == b"\x07" * 32
    assert rc.AcceptedSet({}, 0).root == rc.ZERO32  # one empty slot
    with pytest.raises(rc.RoundCommitmentError):
        rc.AcceptedSet({3: bytes(32)}, 3)  # index >= enrolled
    with pytest.raises(rc.RoundCommitmentError):
        rc.MerkleTree([bytes(32)] * 3, width=2)
    with pytest.raises(rc.RoundCommitmentError):
        rc.slot_leaf(1 << 16, bytes(32))
    with pytest.raises(rc.RoundCommitmentError):
        rc.fragments_root([])
    assert rc.f32_bits(0.7) == 0x3F333333 and rc.bits_f32(0x3F800000) == 1.0


def test_initial_state_leaf():
    w = torch.linspace(-1, 1, 37)
    s = rc.FragmentState.initial(2, w)
    assert s.is_initial and s.n == 37
    assert s.leaf == rc.FragmentLeaf(2, rc.ZERO32, 0, *ChunkTree(w).root, rc.ZERO32, 0)


def test_builder_refuses_a_payload_that_is_not_the_submitted_one():
    f, n, enrolled = 0, 20, 2
    w, m = torch.zeros(n), torch.zeros(n)
    prev = rc.FragmentState.initial(f, w)
    pay = torch.full((n,), 0.5)
    root, sumsq = ChunkTree(pay).root
    sub = rc.OuterGradient(bytes(32), 0, f, bytes(32), root, sumsq, "cid", bytes(32))
    cur = rc.FragmentState.build(f, w, m, rc.AcceptedSet({1: sub.struct_hash()}, enrolled))
    kwargs = dict(fragment=f, coordinate=3, current=cur, previous=prev, current_leaves=[cur.leaf],
                  previous_leaves=[prev.leaf], submissions={1: sub})
    rc.build_aggregate_opening(payloads={1: pay}, **kwargs)
    with pytest.raises(rc.RoundCommitmentError, match="does not match"):
        rc.build_aggregate_opening(payloads={1: pay + 1}, **kwargs)
    with pytest.raises(rc.RoundCommitmentError, match="no submission or payload"):
        rc.build_aggregate_opening(payloads={}, **kwargs)


@pytest.mark.parametrize("rule,alpha",
                         [(rc.RULE_MEAN, 0), (rc.RULE_TRIMMED_MEAN, 2500), (rc.RULE_COORDINATE_MEDIAN, 0)])
def test_recompute_is_the_vector_path(rule, alpha):
    """recompute on one coordinate = the canonical rule + outer step on whole vectors, at every coordinate."""
    g = torch.Generator().manual_seed(rule)
    x = torch.randn(5, 64, generator=g) * 0.01
    pw, pm = torch.randn(64, generator=g), torch.randn(64, generator=g) * 0.1
    agg = gen._aggregate(rule, alpha, list(x), 64)
    w, m = canonical.nesterov_step(pw, pm, agg, rc.bits_f32(gen.LR), rc.bits_f32(gen.MU))
    bits = lambda t: [int(v) & 0xFFFFFFFF for v in t.view(torch.int32)]  # noqa: E731
    xs_bits, pw_bits, pm_bits, w_bits, m_bits = [bits(x[i]) for i in range(5)], bits(pw), bits(pm), bits(w), bits(m)
    for c in range(64):
        got = rc.recompute(rule, alpha, [xs_bits[i][c] for i in range(5)], pw_bits[c], pm_bits[c], gen.LR, gen.MU)
        assert got == (w_bits[c], m_bits[c])


def test_forced_commitment_binds_the_trainer_and_checks_its_inputs():
    """keccak(abi.encode(structHash, trainer)): the same struct committed by another trainer is
    another commitment (a copied commitment cannot be revealed by the copier); bad inputs raise."""
    sh = eth_keccak(b"struct")
    a, b = "0x" + "11" * 20, "0x" + "22" * 20
    assert rc.forced_commitment(sh, a) == eth_keccak(sh + bytes(12) + bytes.fromhex("11" * 20))
    assert rc.forced_commitment(sh, a) != rc.forced_commitment(sh, b)
    with pytest.raises(ValueError, match="20-byte address"):
        rc.forced_commitment(sh, "0x1234")
    with pytest.raises(ValueError):
        rc.forced_commitment(b"short", a)

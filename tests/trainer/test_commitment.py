"""Chunk commitments (PROTOCOL.md §2): tenzro_trainer.commitment against the shared vectors and
against the generator's independent reference (exact rational binary32, literal padded tree)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tenzro_trainer import commitment as cm
from tenzro_trainer.aggregation import _stack
from vectors import make_chunk_vectors as ref

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "chunk_commitment_v1.json").read_text())
BY_NAME = {v["name"]: v for v in VECTORS["vectors"]}

SPECIAL = [
    0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000, 0xBF800001, 0x1F800000,
    0x20000000, 0x5F800000, 0x5F7FFFFF, 0xDF800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
    0xFFC00001, 0x7F800001,
]
word = st.one_of(st.integers(0, 2**32 - 1), st.sampled_from(SPECIAL))


def b(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr[2:])


def as_f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def random_vector(n: int, seed: int) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g) * torch.exp(torch.randn(n, generator=g) * 3)).numpy()


# ---------------------------------------------------------------------------- shared vectors


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_vector(name):
    v = BY_NAME[name]
    vec = as_f32([int(x, 16) for x in v["values"]])
    tree = cm.ChunkTree(vec)
    assert (tree.n, tree.num_chunks, tree.depth) == (v["n"], v["num_chunks"], v["depth"])
    assert cm.encode_chunks(vec) == [b(c) for c in v["chunks"]]
    for i, c in enumerate(v["chunks"]):
        assert tree.chunk(i) == b(c)
        assert tree.leaf(i) == (b(v["leaf_h"][i]), v["leaf_s"][i])
        assert cm.leaf(b(c)) == (b(v["leaf_h"][i]), v["leaf_s"][i])
        assert cm.chunk_sumsq(b(c)) == v["leaf_s"][i]
    assert tree.root == (b(v["root_h"]), v["root_s"])
    for o in v["openings"]:
        i, chunk, proof = tree.opening(o["coordinate"])
        assert i == o["chunk_index"] and chunk == b(v["chunks"][i])
        assert proof == [(b(h), s) for h, s in zip(o["sibling_h"], o["sibling_s"])]
        assert cm.value_at(chunk, o["coordinate"] % 16) == o["value"]
        assert cm.verify_opening(b(v["root_h"]), v["root_s"], v["n"], i, chunk, proof)


def test_vector_tensor_input_matches_array_input():
    v = BY_NAME["n1000_mixed"]
    vec = as_f32([int(x, 16) for x in v["values"]])
    assert cm.ChunkTree(torch.from_numpy(vec.copy())).root == (b(v["root_h"]), v["root_s"])


def test_empty_subtrees():
    h, s = cm.EMPTY_H, cm.EMPTY_S
    for row in VECTORS["empty_subtrees"]:
        assert (h, s) == (b(row["h"]), row["s"])
        h, s = cm.node(h, s, h, s)


def test_vectors_file_is_up_to_date():
    assert ref.render() == (Path(ref.__file__).with_name("chunk_commitment_v1.json")).read_text()


# ---------------------------------------------------------------------------- arithmetic vs reference


@settings(max_examples=300, deadline=None)
@given(st.lists(word, min_size=16, max_size=16))
def test_chunk_sumsq_matches_reference(words):
    chunk = struct.pack(">16I", *words)
    expected = ref.ref_leaf(chunk)[1]
    assert cm.chunk_sumsq(chunk) == expected
    assert cm.chunk_sumsq(as_f32(words)) == expected
    assert cm.leaf(chunk) == ref.ref_leaf(chunk)


@settings(max_examples=300, deadline=None)
@given(word, word, st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32))
def test_node_matches_reference(sl, sr, hl, hr):
    assert cm.node(hl, sl, hr, sr) == ref.ref_node((hl, sl), (hr, sr))


@settings(max_examples=25, deadline=None)
@given(st.lists(word, min_size=1, max_size=16 * 9 + 3))
def test_tree_matches_reference(words):
    leaves = [ref.ref_leaf(c) for c in ref.ref_chunks(words)]
    levels = ref.ref_levels(leaves)
    tree = cm.ChunkTree(as_f32(words))
    assert tree.root == levels[-1][0]
    for i in range(tree.num_chunks):
        assert tree.proof(i) == [levels[k][(i >> k) ^ 1] for k in range(tree.depth)]


def test_sumsq_is_sequential_not_pairwise():
    # 1 + 2^-24 + 2^-24 + ... : sequentially every 2^-24 is lost (tie to even), pairwise it is not.
    x = as_f32([0x3F800000] + [0x39800000] * 15)  # 1.0, then 2^-12 (square 2^-24)
    assert cm.chunk_sumsq(x) == 0x3F800000


def test_flush_to_zero_is_refused():
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        with pytest.raises(cm.CommitmentError, match="subnormals"):
            cm.ChunkTree(np.ones(16, dtype=np.float32))
    finally:
        torch.set_flush_denormal(False)
    cm.ChunkTree(np.ones(16, dtype=np.float32))


# ---------------------------------------------------------------------------- openings


def test_every_opening_verifies_and_tampering_fails():
    n = 16 * 37 + 5  # 38 chunks, padded to 64 leaves: depth 6 with empty subtrees on the right
    vec = random_vector(n, 1)
    tree = cm.ChunkTree(vec)
    root_h, root_s = tree.root
    bits = vec.view(np.uint32)
    for i in range(tree.num_chunks):
        chunk, proof = tree.chunk(i), tree.proof(i)
        assert cm.verify_opening(root_h, root_s, n, i, chunk, proof)
        for j in range(16):
            c = 16 * i + j
            if c < n:
                assert cm.value_at(chunk, j) == bits[c]
        # the chunk: one bit of one value
        bad = bytearray(chunk)
        bad[(7 * i) % 64] ^= 1 << (i % 8)
        assert not cm.verify_opening(root_h, root_s, n, i, bytes(bad), proof)
        # each sibling's h and s
        for k, (h, s) in enumerate(proof):
            wrong_h = proof[:k] + [(bytes([h[0] ^ 0x80]) + h[1:], s)] + proof[k + 1 :]
            wrong_s = proof[:k] + [(h, s ^ 1)] + proof[k + 1 :]
            assert not cm.verify_opening(root_h, root_s, n, i, chunk, wrong_h)
            assert not cm.verify_opening(root_h, root_s, n, i, chunk, wrong_s)
        # the root, the index, the proof's length
        assert not cm.verify_opening(root_h[:-1] + bytes([root_h[-1] ^ 1]), root_s, n, i, chunk, proof)
        assert not cm.verify_opening(root_h, root_s ^ 1, n, i, chunk, proof)
        assert not cm.verify_opening(root_h, root_s, n, i ^ 1, chunk, proof)
        assert not cm.verify_opening(root_h, root_s, n, i, chunk, proof[:-1])
        assert not cm.verify_opening(root_h, root_s, n, i, chunk, proof + [(bytes(32), 0)])
    # out of range / malformed inputs are False, not exceptions
    chunk, proof = tree.chunk(0), tree.proof(0)
    assert not cm.verify_opening(root_h, root_s, n, tree.num_chunks, chunk, proof)
    assert not cm.verify_opening(root_h, root_s, n, -1, chunk, proof)
    assert not cm.verify_opening(root_h, root_s, 0, 0, chunk, [])
    assert not cm.verify_opening(root_h, root_s, n, 0, chunk[:-1], proof)
    assert not cm.verify_opening(root_h, root_s, 16 * 64 + 1, 0, chunk, proof)  # depth 7 expected
    assert not cm.verify_opening(root_h, root_s, n, 0, chunk, [(bytes(31), 0)] + proof[1:])
    assert not cm.verify_opening(root_h, root_s, n, 0, chunk, [(proof[0][0], 2**32)] + proof[1:])


def test_one_chunk_root_is_its_leaf():
    vec = random_vector(11, 2)
    tree = cm.ChunkTree(vec)
    assert tree.depth == 0 and tree.proof(0) == []
    assert tree.root == cm.leaf(tree.chunk(0))
    assert cm.verify_opening(*tree.root, 11, 0, tree.chunk(0), [])


def test_opening_checks_the_coordinate():
    tree = cm.ChunkTree(random_vector(40, 3))
    assert tree.opening(39)[0] == 2 and tree.opening(16)[0] == 1
    for c in (-1, 40):
        with pytest.raises(cm.CommitmentError, match="coordinate"):
            tree.opening(c)
    with pytest.raises(cm.CommitmentError, match="chunk index"):
        tree.proof(3)


# ---------------------------------------------------------------------------- padding


def test_padding():
    n = 20
    tree = cm.ChunkTree(random_vector(n, 4))
    last = tree.chunk(1)
    assert last[16:] == bytes(48)
    assert cm.padding_is_zero(last, n, 1) and cm.padding_is_zero(tree.chunk(0), n, 0)
    for j in range(4, 16):  # coordinates 20..31 are padding
        bad = bytearray(last)
        bad[4 * j + 3] = 1
        assert not cm.padding_is_zero(bytes(bad), n, 1)
    bad = bytearray(last)
    bad[0] ^= 0xFF  # a real value may be anything
    assert cm.padding_is_zero(bytes(bad), n, 1)
    assert cm.padding_is_zero(bytes(64 * [0xFF]), n, 0)  # no padding in a full chunk
    assert cm.padding_is_zero(bytes(64 * [0xFF]), 32, 1)  # n a multiple of 16: none
    with pytest.raises(cm.CommitmentError):
        cm.padding_is_zero(last, n, 2)


def test_bad_padding_opens_so_it_can_be_shown():
    # A committer who padded with -0 (0x80000000) still has a valid tree; its last chunk opens
    # and padding_is_zero exposes it.
    values = [ref.f32_bits(1.0)] * 17
    chunks = ref.ref_chunks(values)
    bad_last = chunks[1][:4] + struct.pack(">15I", *([0x80000000] * 15))
    leaves = [ref.ref_leaf(chunks[0]), ref.ref_leaf(bad_last)]
    root = ref.ref_node(*leaves)
    assert cm.verify_opening(*root, 17, 1, bad_last, [leaves[0]])
    assert not cm.padding_is_zero(bad_last, 17, 1)
    assert cm.ChunkTree(as_f32(values)).root != root


# ---------------------------------------------------------------------------- vector layout


def test_flatten_fragment_order_and_layout():
    g = torch.Generator().manual_seed(5)
    a, bb, c = torch.randn(3, 4, generator=g), torch.randn(5, generator=g), torch.randn(2, 2, 2, generator=g)
    frag = {"layer.b": bb, "layer.a": a, "z": c}  # not in name order
    flat = cm.flatten_fragment(frag)
    assert flat.dtype == torch.float32 and flat.shape == (12 + 5 + 8,)
    assert torch.equal(flat, torch.cat([a.reshape(-1), bb, c.reshape(-1)]))
    assert torch.equal(flat, _stack({"t": frag})[2][0])  # the aggregation's column layout
    reordered = {"z": c, "layer.a": a, "layer.b": bb}
    assert cm.ChunkTree(cm.flatten_fragment(reordered)).root == cm.ChunkTree(flat).root
    # a[1, 2] is coordinate 6: row-major
    i, chunk, _ = cm.ChunkTree(flat).opening(6)
    assert cm.value_at(chunk, 6) == int(a[1, 2].numpy().view(np.uint32))
    swapped = cm.flatten_fragment({"layer.a": bb, "layer.b": a, "z": c})
    assert cm.ChunkTree(swapped).root != cm.ChunkTree(flat).root


def test_flatten_fragment_casts_like_aggregation():
    x = torch.randn(7).to(torch.bfloat16)
    assert torch.equal(cm.flatten_fragment({"w": x}), x.float())


def test_encode_chunks_layout():
    vec = np.arange(1, 18, dtype=np.float32)  # 17 values: 2 chunks
    chunks = cm.encode_chunks(vec)
    assert [len(c) for c in chunks] == [64, 64]
    assert chunks[0][:4] == struct.pack(">f", 1.0) and chunks[1][:4] == struct.pack(">f", 17.0)
    assert chunks[1][4:] == bytes(60)


def test_decode_chunks_inverts_encode_bit_for_bit():
    """A whole-payload answer's bytes give back the committed vector, NaN payloads and -0 included."""
    vec = torch.tensor([1.5, -0.0, float("inf"), 1e-45] + [float(i) for i in range(30)], dtype=torch.float32)
    vec[5] = float("nan")
    back = cm.decode_chunks(b"".join(cm.encode_chunks(vec)), vec.numel())
    assert back.dtype == torch.float32 and back.shape == vec.shape
    assert torch.equal(back.view(torch.int32), vec.view(torch.int32))
    assert cm.ChunkTree(back).root == cm.ChunkTree(vec).root


@pytest.mark.parametrize("n, size", [(34, 64 * 2), (34, 64 * 4), (0, 0), (16, 65)])
def test_decode_chunks_rejects_the_wrong_length(n, size):
    with pytest.raises(cm.CommitmentError, match="chunks of a vector"):
        cm.decode_chunks(bytes(size), n)


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros(0, dtype=np.float32),
        np.zeros(4, dtype=np.float64),
        np.zeros((2, 16), dtype=np.float32),
        torch.zeros(4, dtype=torch.float16),
        [1.0, 2.0],
    ],
)
def test_rejects_bad_vectors(bad):
    with pytest.raises(cm.CommitmentError):
        cm.ChunkTree(bad)


def test_rejects_bad_chunks_and_indices():
    with pytest.raises(cm.CommitmentError):
        cm.flatten_fragment({})
    with pytest.raises(cm.CommitmentError):
        cm.value_at(bytes(63), 0)
    with pytest.raises(cm.CommitmentError):
        cm.value_at(bytes(64), 16)
    with pytest.raises(cm.CommitmentError):
        cm.chunk_sumsq(bytes(65))
    with pytest.raises(cm.CommitmentError):
        cm.chunk_sumsq(np.zeros(15, dtype=np.float32))

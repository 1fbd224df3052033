"""Chunk commitments of protocol v2: a Merkle tree over 16-value chunks with summed squares.

Implements ``contracts/PROTOCOL.md`` §2 ("Chunk commitments"); the Solidity verifier is
``contracts/lib/ChunkMerkle.sol`` and both are checked against
``tests/vectors/chunk_commitment_v1.json`` (written by ``tests/vectors/make_chunk_vectors.py``).

Format (all integers big-endian; ``‖`` is concatenation):

- Vector: the flat binary32 array of one fragment, length ``n >= 1``: its tensors in ascending
  name order, each row-major (:func:`flatten_fragment`, the layout of ``aggregation._stack``).
- Chunk ``i`` (64 bytes): coordinates ``16 i .. 16 i + 15``, each as its 4-byte big-endian bit
  pattern; the last chunk is padded with ``+0`` (``0x00000000``). ``m = ceil(n / 16)`` chunks.
- Leaf ``i``: ``h = keccak256(0x00 ‖ chunk)`` (65 bytes), ``s`` = canonical sum of squares:
  ``acc = +0; for j in 0..15: acc = fl(acc + fl(x_j * x_j))`` in binary32.
- Tree: the leaves padded with empty nodes ``(h = 0x00 * 32, s = +0)`` to ``2^d`` leaves,
  ``d = ceil(log2 m)``; inner node ``h = keccak256(0x01 ‖ h_l ‖ s_l ‖ h_r ‖ s_r)`` (73 bytes, each
  ``s`` as 4 bytes), ``s = fl(s_l + s_r)``. One leaf is its own root.
- Commitment: ``(root h, root s)``; ``root s`` is the squared L2 norm in the tree's order.
- Opening of coordinate ``c``: chunk ``i = c // 16`` and the ``d`` sibling pairs ``(h, s)`` from
  the leaf up.

Arithmetic: every ``fl`` is one IEEE-754 binary32 operation, round to nearest even, subnormals
kept (numpy float32 ufuncs, one operation per call, so nothing is fused; never float64). A NaN
result is the canonical quiet NaN ``0x7FC00000``, as ``contracts/lib/Binary32.sol`` returns it, so
vectors holding NaN commit identically here and on-chain. Sums are kept as ``uint32`` bit patterns.

keccak256 comes from ``eth_hash`` (installed with web3 / ape), through its pysha3 backend where
that module is present (about 4x faster per call than the pycryptodome one ``eth_hash.auto``
picks; safe-pysha3 comes with the pinned ape stack), else ``eth_hash.auto``. Building a tree is
vectorized with numpy level by level; the cost is one keccak call per leaf and per inner node: a
1M-value fragment commits in about 0.11 s on one core with pysha3 (9M values/s), 0.6 s without.

Usage::

    tree = ChunkTree(flatten_fragment(delta))        # delta: {name: tensor}
    root_h, root_s = tree.root                        # commit these
    i, chunk, proof = tree.opening(12345)             # open coordinate 12345
    assert verify_opening(root_h, root_s, tree.n, i, chunk, proof)
"""

from __future__ import annotations

import struct
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from tenzro_trainer.errors import TrainerError

try:  # the C keccak of safe-pysha3, wrapped by eth_hash (same function, no new dependency)
    from eth_hash.backends.pysha3 import keccak256 as _keccak
except ImportError:  # pragma: no cover - depends on the environment
    from eth_hash.auto import keccak as _keccak

keccak: Callable[[bytes], bytes] = _keccak
"""keccak256 of a ``bytes`` value (32-byte digest)."""

CHUNK_VALUES = 16
"""Values per chunk (PROTOCOL.md §2)."""
CHUNK_BYTES = 4 * CHUNK_VALUES
"""Bytes per chunk: 16 big-endian binary32 bit patterns."""
LEAF_TAG = b"\x00"
"""Domain byte prefixed to a chunk when hashing a leaf."""
NODE_TAG = b"\x01"
"""Domain byte prefixed to an inner node's children when hashing it."""
EMPTY_H = bytes(32)
"""Hash of an empty (padding) leaf."""
EMPTY_S = 0
"""Sum of an empty (padding) leaf: +0."""
CANONICAL_NAN = 0x7FC00000
"""Bit pattern of every NaN result of the canonical arithmetic (``Binary32.QNAN``)."""

Proof = list[tuple[bytes, int]]
"""Sibling ``(h: 32 bytes, s: uint32 bit pattern)`` pairs, from the leaf's sibling up to the root's child."""


class CommitmentError(TrainerError, ValueError):
    """A vector or fragment cannot be committed (empty, wrong dtype or shape), a coordinate or
    chunk index is out of range, or the FPU flushes subnormals (the sums would be wrong)."""


# ---------------------------------------------------------------------------- vector and chunks


def flatten_fragment(tensors: Mapping[str, Tensor]) -> Tensor:
    """The commitment's vector of one fragment: float32, 1-D, on the CPU.

    Tensors in ascending name order, each flattened row-major and cast to float32 (exact for
    bf16 / fp16 inputs), concatenated: the column layout of ``aggregation._stack``.

    Raises:
        CommitmentError: ``tensors`` is empty.
    """
    if not tensors:
        raise CommitmentError("a fragment with no tensors has no commitment")
    return torch.cat([tensors[name].detach().to("cpu", torch.float32).reshape(-1) for name in sorted(tensors)])


def _bits(vec: Tensor | np.ndarray) -> np.ndarray:
    """The bit patterns (uint32, shape (n,)) of a 1-D float32 tensor or array with n >= 1."""
    if isinstance(vec, Tensor):
        if vec.dtype != torch.float32:
            raise CommitmentError(f"the vector must be float32, got {vec.dtype} (use flatten_fragment)")
        arr = vec.detach().to("cpu").contiguous().numpy()
    elif isinstance(vec, np.ndarray):
        if vec.dtype != np.float32:
            raise CommitmentError(f"the vector must be float32, got {vec.dtype}")
        arr = vec
    else:
        raise CommitmentError(f"the vector must be a torch.Tensor or numpy.ndarray, got {type(vec).__name__}")
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise CommitmentError(f"the vector must be 1-D with at least one value, got shape {tuple(arr.shape)}")
    return np.ascontiguousarray(arr).view(np.uint32)


def _words(bits: np.ndarray) -> np.ndarray:
    """Bit patterns (n,) uint32 -> chunks (m, 16) uint32, the last padded with 0 (+0)."""
    n = bits.shape[0]
    m = -(-n // CHUNK_VALUES)
    words = np.zeros(m * CHUNK_VALUES, dtype=np.uint32)
    words[:n] = bits
    return words.reshape(m, CHUNK_VALUES)


def _be_bytes(words: np.ndarray) -> np.ndarray:
    """uint32 array (..., k) -> its big-endian bytes, uint8 array (..., 4k)."""
    be = words.astype(">u4")
    return be.view(np.uint8).reshape(*words.shape[:-1], 4 * words.shape[-1])


def encode_chunks(vec: Tensor | np.ndarray) -> list[bytes]:
    """The ``ceil(n / 16)`` chunks of a vector: 64 bytes each, value j of chunk i at bytes
    ``4j .. 4j+3`` as the big-endian bit pattern of coordinate ``16 i + j``, zero padded.

    Args:
        vec: float32, shape (n,), n >= 1 (torch tensor or numpy array).
    """
    raw = _be_bytes(_words(_bits(vec))).tobytes()
    return [raw[k : k + CHUNK_BYTES] for k in range(0, len(raw), CHUNK_BYTES)]


def decode_chunks(data: bytes, n: int) -> Tensor:
    """Inverse of :func:`encode_chunks`: the vector (float32, shape (n,)) whose ``ceil(n / 16)``
    chunks are ``data`` (64 bytes each, big-endian bit patterns, the padding dropped unread).

    Raises:
        CommitmentError: n < 1, or ``data`` is not exactly ``64 * ceil(n / 16)`` bytes.
    """
    m = num_chunks(n)
    if n < 1 or len(data) != CHUNK_BYTES * m:
        raise CommitmentError(f"{len(data)} bytes are not the {m} chunks of a vector of {n} values")
    bits = np.frombuffer(data, dtype=">u4")[:n].astype(np.uint32)
    return torch.from_numpy(bits.view(np.float32).copy())


def value_at(chunk_bytes: bytes, j: int) -> int:
    """Bit pattern (uint32) of value j (0..15) of a 64-byte chunk (``ChunkMerkle.valueAt``).

    Raises:
        CommitmentError: the chunk is not 64 bytes or j is not in 0..15.
    """
    _check_chunk(chunk_bytes)
    if not 0 <= j < CHUNK_VALUES:
        raise CommitmentError(f"value index {j} is not in 0..{CHUNK_VALUES - 1}")
    return struct.unpack_from(">I", chunk_bytes, 4 * j)[0]


def padding_is_zero(chunk_bytes: bytes, n: int, chunk_index: int) -> bool:
    """Whether every value of chunk ``chunk_index`` at a coordinate ``>= n`` is ``0x00000000``
    (``ChunkMerkle.paddingIsZero``); true for every chunk but the last.

    Raises:
        CommitmentError: the chunk is not 64 bytes or ``chunk_index >= ceil(n / 16)``.
    """
    _check_chunk(chunk_bytes)
    m = num_chunks(n)
    if not 0 <= chunk_index < m:
        raise CommitmentError(f"chunk index {chunk_index} is not in 0..{m - 1} for n = {n}")
    first_pad = n - CHUNK_VALUES * chunk_index  # values j >= first_pad lie at coordinates >= n
    return first_pad >= CHUNK_VALUES or not any(chunk_bytes[4 * first_pad :])


def _check_chunk(chunk_bytes: bytes) -> None:
    if len(chunk_bytes) != CHUNK_BYTES:
        raise CommitmentError(f"a chunk is {CHUNK_BYTES} bytes, got {len(chunk_bytes)}")


def num_chunks(n: int) -> int:
    """``m = ceil(n / 16)``: the number of chunks (leaves) of a vector of n values (0 for n <= 0)."""
    return max(0, -(-n // CHUNK_VALUES))


def tree_depth(m: int) -> int:
    """``d = ceil(log2 m)`` for m >= 1 leaves: the proof length (0 for one leaf)."""
    if m < 1:
        raise CommitmentError(f"a tree needs at least one leaf, got {m}")
    return (m - 1).bit_length()


# ---------------------------------------------------------------------------- binary32 sums


def _check_gradual_underflow() -> None:
    """Refuse to compute when the FPU flushes subnormals to zero (FTZ / DAZ set in this thread,
    e.g. by ``torch.set_flush_denormal(True)`` or a library built with -ffast-math)."""
    tiny = np.array([0x00800000, 0x00000001], dtype=np.uint32).view(np.float32)  # 2^-126, 2^-149
    half = np.array([0.5, 1.0], dtype=np.float32)
    got = (tiny * half).view(np.uint32)  # FTZ flushes 2^-127; DAZ reads 2^-149 as 0
    if got[0] != 0x00400000 or got[1] != 0x00000001:
        raise CommitmentError(
            "the FPU flushes subnormals to zero in this thread (FTZ/DAZ); binary32 sums would not be "
            "canonical: call torch.set_flush_denormal(False)"
        )


def _canon(x: np.ndarray) -> np.ndarray:
    """float32 results -> their uint32 bit patterns, every NaN as CANONICAL_NAN."""
    bits = x.view(np.uint32).copy()
    bits[np.isnan(x)] = CANONICAL_NAN
    return bits


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fl(a + b) elementwise on uint32 bit patterns (one binary32 addition each)."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf and inf - inf are defined results
        return _canon(a.view(np.float32) + b.view(np.float32))


def _sumsq(words: np.ndarray) -> np.ndarray:
    """Canonical sums of squares of chunks: (m, 16) uint32 -> (m,) uint32.

    ``acc = +0; acc = fl(acc + fl(x_j * x_j))`` for j = 0..15, vectorized across chunks.
    """
    v = words.view(np.float32)
    acc = np.zeros(words.shape[0], dtype=np.uint32)
    for j in range(CHUNK_VALUES):
        x = np.ascontiguousarray(v[:, j])
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            sq = x * x
        acc = _add(acc, _canon(sq))
    return acc


def chunk_sumsq(chunk_values: bytes | Sequence[float] | np.ndarray | Tensor) -> int:
    """The canonical sum of squares ``s`` of one chunk, as a uint32 bit pattern.

    Args:
        chunk_values: the 64 chunk bytes (big-endian bit patterns), or 16 float32 values
            (a float32 array / tensor of shape (16,), or 16 Python floats, each rounded to float32).
    """
    _check_gradual_underflow()
    if isinstance(chunk_values, (bytes, bytearray)):
        _check_chunk(chunk_values)
        words = np.frombuffer(bytes(chunk_values), dtype=">u4").astype(np.uint32)
    elif isinstance(chunk_values, (Tensor, np.ndarray)):
        words = _bits(chunk_values)
    else:
        words = np.asarray(chunk_values, dtype=np.float32).view(np.uint32)
    if words.shape != (CHUNK_VALUES,):
        raise CommitmentError(f"a chunk has {CHUNK_VALUES} values, got shape {tuple(words.shape)}")
    return int(_sumsq(words.reshape(1, CHUNK_VALUES))[0])


# ---------------------------------------------------------------------------- hashes


def _leaf_hashes(words: np.ndarray) -> np.ndarray:
    """Leaf hashes of chunks (m, 16) uint32 -> (m, 32) uint8: keccak256(0x00 ‖ chunk)."""
    m = words.shape[0]
    msg = np.zeros((m, 1 + CHUNK_BYTES), dtype=np.uint8)
    msg[:, 1:] = _be_bytes(words)
    return _hash_rows(msg)


def _node_hashes(hl: np.ndarray, sl: np.ndarray, hr: np.ndarray, sr: np.ndarray) -> np.ndarray:
    """Inner-node hashes, k at once: keccak256(0x01 ‖ h_l ‖ s_l ‖ h_r ‖ s_r) -> (k, 32) uint8.

    hl, hr: (k, 32) uint8; sl, sr: (k,) uint32 bit patterns (hashed as 4 bytes big-endian).
    """
    k = hl.shape[0]
    msg = np.empty((k, 73), dtype=np.uint8)
    msg[:, 0] = NODE_TAG[0]
    msg[:, 1:33] = hl
    msg[:, 33:37] = _be_bytes(sl.reshape(k, 1))
    msg[:, 37:69] = hr
    msg[:, 69:73] = _be_bytes(sr.reshape(k, 1))
    return _hash_rows(msg)


def _hash_rows(msg: np.ndarray) -> np.ndarray:
    """keccak256 of each row of a (k, w) uint8 array -> (k, 32) uint8."""
    k, w = msg.shape
    raw = msg.tobytes()
    digests = b"".join([keccak(raw[o : o + w]) for o in range(0, k * w, w)])
    return np.frombuffer(digests, dtype=np.uint8).reshape(k, 32)


def leaf(chunk_bytes: bytes) -> tuple[bytes, int]:
    """``(h, s)`` of the leaf of one 64-byte chunk (``ChunkMerkle.leaf``)."""
    _check_chunk(chunk_bytes)
    _check_gradual_underflow()
    words = np.frombuffer(bytes(chunk_bytes), dtype=">u4").astype(np.uint32).reshape(1, CHUNK_VALUES)
    return _leaf_hashes(words)[0].tobytes(), int(_sumsq(words)[0])


def node(hl: bytes, sl: int, hr: bytes, sr: int) -> tuple[bytes, int]:
    """``(h, s)`` of the inner node over children ``(hl, sl)``, ``(hr, sr)`` (``ChunkMerkle.node``);
    h: 32 bytes, s: uint32 bit patterns."""
    _check_gradual_underflow()
    s = _add(np.array([sl], dtype=np.uint32), np.array([sr], dtype=np.uint32))
    msg = NODE_TAG + hl + struct.pack(">I", sl) + hr + struct.pack(">I", sr)
    return keccak(msg), int(s[0])


# ---------------------------------------------------------------------------- the tree


class ChunkTree:
    """The chunk commitment of one vector (PROTOCOL.md §2), with every level kept for openings.

    Args:
        vec: float32, shape (n,), n >= 1 (torch tensor on any device, or numpy array).

    Attributes:
        n: number of values; num_chunks: ``m = ceil(n / 16)``; depth: ``ceil(log2 m)``.

    Levels: level 0 holds the m leaves, level L the ``ceil(m / 2^L)`` nodes that have at least
    one real leaf below them; a missing right child at level L is the empty subtree of height L
    (``Z_0 = (0x00 * 32, +0)``, ``Z_{L+1} = node(Z_L, Z_L)``), which is the same tree as padding
    the leaves to ``2^depth`` with empty nodes, without hashing the all-empty subtrees twice.
    Memory: the values (4 bytes each) plus 36 bytes per node, about 72 bytes per chunk over all
    levels (4.5 bytes per value).

    Raises:
        CommitmentError: the vector is empty, not 1-D or not float32, or the FPU flushes subnormals.
    """

    def __init__(self, vec: Tensor | np.ndarray) -> None:
        _check_gradual_underflow()
        bits = _bits(vec)
        self.n: int = int(bits.shape[0])
        self._words = _words(bits)  # (m, 16) uint32
        self.num_chunks: int = int(self._words.shape[0])
        self.depth: int = tree_depth(self.num_chunks)
        hs = [_leaf_hashes(self._words)]  # per level: (k, 32) uint8
        ss = [_sumsq(self._words)]  # per level: (k,) uint32
        zh, zs = np.zeros((1, 32), dtype=np.uint8), np.zeros(1, dtype=np.uint32)
        self._empty: list[tuple[bytes, int]] = [(EMPTY_H, EMPTY_S)]
        for _ in range(self.depth):
            h, s = hs[-1], ss[-1]
            if h.shape[0] % 2:  # pair the last node with the empty subtree of this height
                h, s = np.concatenate([h, zh]), np.concatenate([s, zs])
            hs.append(_node_hashes(h[0::2], s[0::2], h[1::2], s[1::2]))
            ss.append(_add(s[0::2], s[1::2]))
            zh = _node_hashes(zh, zs, zh, zs)
            zs = _add(zs, zs)
            self._empty.append((zh[0].tobytes(), int(zs[0])))
        self._h, self._s = hs, ss

    @property
    def root(self) -> tuple[bytes, int]:
        """The commitment ``(h: 32 bytes, s: uint32 bit pattern of the squared L2 norm)``."""
        return self._h[-1][0].tobytes(), int(self._s[-1][0])

    def chunk(self, i: int) -> bytes:
        """The 64 bytes of chunk i (0 <= i < num_chunks)."""
        self._check_index(i)
        return _be_bytes(self._words[i]).tobytes()

    def leaf(self, i: int) -> tuple[bytes, int]:
        """``(h, s)`` of leaf i."""
        self._check_index(i)
        return self._h[0][i].tobytes(), int(self._s[0][i])

    def proof(self, i: int) -> Proof:
        """The ``depth`` sibling pairs ``(h, s)`` of leaf i, bottom-up (empty subtrees included)."""
        self._check_index(i)
        out: Proof = []
        for level in range(self.depth):
            sib = i ^ 1
            if sib < self._h[level].shape[0]:
                out.append((self._h[level][sib].tobytes(), int(self._s[level][sib])))
            else:
                out.append(self._empty[level])
            i >>= 1
        return out

    def opening(self, coordinate: int) -> tuple[int, bytes, Proof]:
        """``(chunk_index, chunk_bytes, proof)`` that opens one coordinate (0 <= coordinate < n);
        its value is ``value_at(chunk_bytes, coordinate % 16)``."""
        if not 0 <= coordinate < self.n:
            raise CommitmentError(f"coordinate {coordinate} is not in 0..{self.n - 1}")
        i = coordinate // CHUNK_VALUES
        return i, self.chunk(i), self.proof(i)

    def _check_index(self, i: int) -> None:
        if not 0 <= i < self.num_chunks:
            raise CommitmentError(f"chunk index {i} is not in 0..{self.num_chunks - 1}")


def verify_opening(
    root_h: bytes, root_s: int, n: int, chunk_index: int, chunk_bytes: bytes, proof: Sequence[tuple[bytes, int]]
) -> bool:
    """Whether ``chunk_bytes`` is chunk ``chunk_index`` of the committed vector of n values.

    The same checks as ``ChunkMerkle.verify``: n >= 1, ``chunk_index < ceil(n / 16)``, a 64-byte
    chunk, ``len(proof) == ceil(log2 ceil(n / 16))``, each sibling a 32-byte h and a uint32 s;
    then the leaf and every parent ``(h, s)`` are recomputed (binary32 sums) and compared with
    ``(root_h, root_s)``. Malformed input gives False, never an exception. The padding of the
    last chunk is not checked here (see :func:`padding_is_zero`): a chunk with bad padding still
    opens, so that the bad padding can be shown.
    """
    m = num_chunks(n)
    if m < 1 or not 0 <= chunk_index < m or len(chunk_bytes) != CHUNK_BYTES:
        return False
    if len(proof) != tree_depth(m):
        return False
    h, s = leaf(bytes(chunk_bytes))
    i = chunk_index
    for sib_h, sib_s in proof:
        if len(sib_h) != 32 or not 0 <= sib_s < 2**32:
            return False
        h, s = node(h, s, sib_h, sib_s) if i % 2 == 0 else node(sib_h, sib_s, h, s)
        i >>= 1
    return h == root_h and s == root_s

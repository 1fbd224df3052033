"""Round commitments of protocol v2 and the openings of the aggregate fraud proof.

Implements ``contracts/PROTOCOL.md`` §6 ("Round commitments and aggregate openings"); the
Solidity side is ``contracts/lib/RoundProofs.sol`` and both are checked against
``tests/vectors/round_commitment_v1.json`` (written by ``tests/vectors/make_round_vectors.py``).

After each round the syncer commits one ``fragmentsRoot``: a positional Merkle tree over one
leaf per fragment. A fragment's leaf binds its accepted set (a positional tree of slots, one
per enrolled trainer, holding the accepted submissions' EIP-712 struct hashes) and the §2
chunk commitments (:class:`~tenzro_trainer.commitment.ChunkTree`) of its weights and outer
momentum after the round. Anyone can then prove one coordinate wrong: open the accepted
payloads, the previous weights and momentum and the new ones at that coordinate, and let the
contract recompute §1 (:func:`recompute` here, ``RoundProofs.recompute`` on-chain).

Encodings (``‖`` concatenation, integers big-endian at their width; keccak = keccak256):

- struct hash: ``keccak(abi.encode(OUTER_GRADIENT_TYPEHASH, taskId, round, fragment,
  baseRoot, payloadRoot, payloadSumsq, keccak(cid), payloadHash))`` (nine 32-byte words);
- slot leaf of trainer i: ``keccak(0x02 ‖ uint16 i ‖ structHash)``, ``bytes32(0)`` if not accepted;
- fragment leaf: ``keccak(0x03 ‖ uint16 f ‖ acceptedRoot ‖ uint16 acceptedCount ‖ weightsRoot ‖
  uint32 weightsSumsq ‖ momentumRoot ‖ uint32 momentumSumsq)`` (109 bytes);
- positional tree over ``next_pow2(max(1, count))`` positions, missing ones ``bytes32(0)``:
  node ``keccak(left ‖ right)``, a width-1 tree's root is its position; a path is the
  siblings bottom-up (bit k of the index set: right child at level k);
- initial state (round -1): ``acceptedRoot = 0``, ``acceptedCount = 0``,
  ``momentumRoot = 0``, ``momentumSumsq = 0`` (the all-(+0) momentum, never opened).

Usage::

    acc = AcceptedSet({i: sub.struct_hash() for i, sub in subs.items()}, enrolled=8)
    cur = FragmentState.build(f, new_w, new_m, acc)       # new_w, new_m: float32 (n,)
    root = fragments_root([s.leaf for s in states])       # commit this
    proof = build_aggregate_opening(fragment=f, coordinate=c, current=cur, previous=prev, ...)

This module knows nothing of chains: eth_abi is imported only by the ``abi_encode`` helpers.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
from torch import Tensor

from tenzro_trainer import canonical
from tenzro_trainer.commitment import CHUNK_VALUES, ChunkTree, keccak, value_at, verify_opening
from tenzro_trainer.errors import TrainerError

__all__ = [
    "OUTER_GRADIENT_TYPE", "OUTER_GRADIENT_TYPEHASH", "RULE_MEAN", "RULE_TRIMMED_MEAN", "RULE_COORDINATE_MEDIAN",
    "RoundCommitmentError", "ProofRejected", "OuterGradient", "struct_hash", "slot_leaf", "FragmentLeaf",
    "fragment_leaf", "next_pow2", "MerkleTree", "verify_path", "AcceptedSet", "CoordinateOpening",
    "FragmentState", "fragments_root", "AcceptedEntry", "AggregateOpening", "AggregateContext",
    "build_aggregate_opening", "recompute", "aggregate_mismatch", "f32_bits", "bits_f32",
]

OUTER_GRADIENT_TYPE = (
    "OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,bytes32 baseRoot,bytes32 payloadRoot,"
    "uint32 payloadSumsq,string cid,bytes32 payloadHash)"
)
"""The EIP-712 type string of a trainer's submission."""
OUTER_GRADIENT_TYPEHASH = keccak(OUTER_GRADIENT_TYPE.encode())
"""``RoundProofs.OUTER_GRADIENT_TYPEHASH``."""
SLOT_TAG = b"\x02"
"""Domain byte of an accepted-set slot leaf."""
FRAGMENT_TAG = b"\x03"
"""Domain byte of a fragment leaf."""
CREDIT_TAG = b"\x04"
"""Domain byte of a cumulative credits leaf (PROTOCOL.md §5)."""
ZERO32 = bytes(32)
"""An empty position of a positional tree; also the initial state's acceptedRoot and momentumRoot."""

RULE_MEAN, RULE_TRIMMED_MEAN, RULE_COORDINATE_MEDIAN = 0, 1, 2
"""Rule ids (``Referee.RULE_*``, ``TaskParams.aggregation``); Krum (3) has no coordinate proof."""


class RoundCommitmentError(TrainerError, ValueError):
    """An input cannot be committed or opened (bad width, index, length, missing payload, ...)."""


class ProofRejected(RoundCommitmentError):
    """An aggregate opening does not verify (what ``RoundProofs`` reverts with).

    Attributes:
        reason: the Solidity error's name without the prefix, e.g. ``"OpeningNotInRoot"``.
    """

    def __init__(self, reason: str, detail: str):
        self.reason = reason
        super().__init__(f"RoundProofs__{reason}: {detail}")


# ---------------------------------------------------------------------------- helpers


def f32_bits(x: float) -> int:
    """The binary32 bit pattern (uint32) of ``float32(x)`` (round to nearest even)."""
    return struct.unpack(">I", struct.pack(">f", canonical.f32(x)))[0]


def bits_f32(bits: int) -> float:
    """The value of a binary32 bit pattern, as a Python float (exact)."""
    return struct.unpack(">f", struct.pack(">I", bits))[0]


def _b32(value: bytes, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise RoundCommitmentError(f"{what} must be 32 bytes, got {value!r}")
    return bytes(value)


def _uint(value: int, bits: int, what: str) -> int:
    if not isinstance(value, int) or not 0 <= value < 1 << bits:
        raise RoundCommitmentError(f"{what} must be a uint{bits}, got {value!r}")
    return value


def _word(value: int) -> bytes:
    return value.to_bytes(32, "big")


# ---------------------------------------------------------------------------- encodings


def struct_hash_of_cid_hash(task_id: bytes, round: int, fragment: int, base_root: bytes, payload_root: bytes,
                            payload_sumsq: int, cid_hash: bytes, payload_hash: bytes) -> bytes:
    """:func:`struct_hash` with the CID already hashed (``cid_hash = keccak(cid.encode())``)."""
    return keccak(b"".join([
        OUTER_GRADIENT_TYPEHASH, _b32(task_id, "task_id"), _word(_uint(round, 32, "round")),
        _word(_uint(fragment, 16, "fragment")), _b32(base_root, "base_root"), _b32(payload_root, "payload_root"),
        _word(_uint(payload_sumsq, 32, "payload_sumsq")), _b32(cid_hash, "cid_hash"),
        _b32(payload_hash, "payload_hash"),
    ]))


def struct_hash(task_id: bytes, round: int, fragment: int, base_root: bytes, payload_root: bytes,
                payload_sumsq: int, cid: str, payload_hash: bytes) -> bytes:
    """The EIP-712 struct hash of an ``OuterGradient`` submission (``RoundProofs.structHash``).

    Args:
        task_id, base_root, payload_root, payload_hash: 32 bytes each.
        round: uint32; fragment: uint16; payload_sumsq: uint32 bit pattern (§2 root sum).
        cid: the payload's CID, hashed as ``keccak(cid.encode("utf-8"))``.
    Returns:
        32 bytes.
    """
    return struct_hash_of_cid_hash(task_id, round, fragment, base_root, payload_root, payload_sumsq,
                                   keccak(cid.encode("utf-8")), payload_hash)


@dataclass(frozen=True)
class OuterGradient:
    """One trainer's signed submission for one fragment (the EIP-712 ``OuterGradient`` message).

    ``(payload_root, payload_sumsq)`` is the §2 commitment of the pseudo-gradient (``ChunkTree.root``).
    """

    task_id: bytes
    round: int
    fragment: int
    base_root: bytes
    payload_root: bytes
    payload_sumsq: int
    cid: str
    payload_hash: bytes

    @property
    def cid_hash(self) -> bytes:
        """``keccak(cid.encode())``: the struct hash's CID field."""
        return keccak(self.cid.encode("utf-8"))

    def struct_hash(self) -> bytes:
        """The EIP-712 struct hash (:func:`struct_hash`)."""
        return struct_hash(self.task_id, self.round, self.fragment, self.base_root, self.payload_root,
                           self.payload_sumsq, self.cid, self.payload_hash)


def forced_commitment(struct_hash_: bytes, trainer: str) -> bytes:
    """What a trainer passes to ``commitSubmission`` before revealing a forced submission in the
    root flow (PROTOCOL.md §5, copy protection): ``keccak(abi.encode(structHash, trainer))``.

    Args:
        struct_hash_: the submission's EIP-712 struct hash (32 bytes, :func:`struct_hash`).
        trainer: the trainer's address (``0x`` + 40 hex digits), the sender of the commitment.
    Raises:
        ValueError: a struct hash that is not 32 bytes, or an address that is not 20 bytes.
    """
    addr = bytes.fromhex(trainer.removeprefix("0x"))
    if len(addr) != 20:
        raise ValueError(f"trainer must be a 20-byte address, got {trainer!r}")
    return keccak(_b32(struct_hash_, "struct hash") + bytes(12) + addr)


def slot_leaf(i: int, struct_hash_: bytes) -> bytes:
    """The accepted-set slot leaf of trainer ``i`` (uint16): ``keccak(0x02 ‖ uint16 i ‖ structHash)``."""
    return keccak(SLOT_TAG + _uint(i, 16, "trainer index").to_bytes(2, "big") + _b32(struct_hash_, "struct hash"))


@dataclass(frozen=True)
class FragmentLeaf:
    """The fields of one fragment's leaf (``RoundProofs.FragmentLeaf``, same order).

    Attributes:
        fragment: f (uint16), the leaf's position in the fragments tree.
        accepted_root: the accepted-set root (32 bytes; zero in the initial state).
        accepted_count: K (uint16).
        weights_root, weights_sumsq: §2 commitment of the weights after the round.
        momentum_root, momentum_sumsq: §2 commitment of the momentum (zero / 0 in the initial state).
    """

    fragment: int
    accepted_root: bytes
    accepted_count: int
    weights_root: bytes
    weights_sumsq: int
    momentum_root: bytes
    momentum_sumsq: int

    def hash(self) -> bytes:
        """The leaf hash (:func:`fragment_leaf`)."""
        return fragment_leaf(self)

    def as_tuple(self) -> tuple:
        """The ABI tuple ``(uint16,bytes32,uint16,bytes32,uint32,bytes32,uint32)``."""
        return (self.fragment, self.accepted_root, self.accepted_count, self.weights_root, self.weights_sumsq,
                self.momentum_root, self.momentum_sumsq)

    @classmethod
    def from_tuple(cls, t: Sequence) -> "FragmentLeaf":
        """The inverse of :meth:`as_tuple` (e.g. of an ``eth_abi.decode`` result)."""
        return cls(*t)


def fragment_leaf(leaf: FragmentLeaf) -> bytes:
    """``keccak(0x03 ‖ uint16 f ‖ acceptedRoot ‖ uint16 acceptedCount ‖ weightsRoot ‖
    uint32 weightsSumsq ‖ momentumRoot ‖ uint32 momentumSumsq)`` over 109 bytes."""
    return keccak(b"".join([
        FRAGMENT_TAG, _uint(leaf.fragment, 16, "fragment").to_bytes(2, "big"),
        _b32(leaf.accepted_root, "accepted_root"),
        _uint(leaf.accepted_count, 16, "accepted_count").to_bytes(2, "big"), _b32(leaf.weights_root, "weights_root"),
        _uint(leaf.weights_sumsq, 32, "weights_sumsq").to_bytes(4, "big"), _b32(leaf.momentum_root, "momentum_root"),
        _uint(leaf.momentum_sumsq, 32, "momentum_sumsq").to_bytes(4, "big"),
    ]))


# ---------------------------------------------------------------------------- positional trees


def next_pow2(x: int) -> int:
    """The smallest power of two >= max(1, x)."""
    return 1 << max(0, int(x) - 1).bit_length()


class MerkleTree:
    """A positional Merkle tree: ``width`` positions (a power of two), node ``keccak(left ‖ right)``.

    Args:
        leaves: the first ``len(leaves)`` positions (32 bytes each); the rest are ``bytes32(0)``.
        width: the number of positions; default ``next_pow2(max(1, len(leaves)))``.

    Attributes:
        width, depth (= log2 width), levels (level 0 = the positions, the last = [root]).
    """

    def __init__(self, leaves: Sequence[bytes], width: int | None = None):
        width = next_pow2(len(leaves)) if width is None else int(width)
        if width < 1 or width & (width - 1):
            raise RoundCommitmentError(f"a positional tree's width must be a power of two, got {width}")
        if len(leaves) > width:
            raise RoundCommitmentError(f"{len(leaves)} leaves do not fit in {width} positions")
        level = [_b32(x, "leaf") for x in leaves] + [ZERO32] * (width - len(leaves))
        self.width = width
        self.depth = width.bit_length() - 1
        self.levels: list[list[bytes]] = [level]
        while len(level) > 1:
            level = [keccak(level[k] + level[k + 1]) for k in range(0, len(level), 2)]
            self.levels.append(level)

    @property
    def root(self) -> bytes:
        """The root (32 bytes); position 0 for width 1."""
        return self.levels[-1][0]

    def path(self, index: int) -> list[bytes]:
        """The ``depth`` siblings of position ``index``, bottom-up."""
        if not 0 <= index < self.width:
            raise RoundCommitmentError(f"position {index} is not in 0..{self.width - 1}")
        return [self.levels[k][(index >> k) ^ 1] for k in range(self.depth)]


def verify_path(root: bytes, leaf: bytes, index: int, path: Sequence[bytes], width: int) -> bool:
    """Whether ``leaf`` is at ``index`` of the positional tree of ``width`` positions with ``root``
    (``RoundProofs.verifyPath``): False for a width that is not a power of two, an index out of
    range or a path whose length is not log2(width)."""
    if width < 1 or width & (width - 1) or not 0 <= index < width or len(path) != width.bit_length() - 1:
        return False
    h = leaf
    for k, sib in enumerate(path):
        h = keccak(sib + h) if (index >> k) & 1 else keccak(h + sib)
    return h == root


class AcceptedSet:
    """The accepted-set tree of one fragment in one round.

    Args:
        struct_hashes: ``{trainer_index: struct_hash}`` of the accepted submissions (32 bytes each).
        enrolled: the task's enrolled count; the tree has ``next_pow2(max(1, enrolled))`` slots.

    Attributes:
        indices: accepted trainer indices, ascending; count: K; width: P; root: 32 bytes.
    """

    def __init__(self, struct_hashes: Mapping[int, bytes], enrolled: int):
        if enrolled < 0:
            raise RoundCommitmentError(f"enrolled must be >= 0, got {enrolled}")
        self.enrolled = int(enrolled)
        self.width = next_pow2(max(1, self.enrolled))
        self.struct_hashes = {int(i): _b32(h, "struct hash") for i, h in struct_hashes.items()}
        self.indices = sorted(self.struct_hashes)
        for i in self.indices:
            if not 0 <= i < max(1, self.enrolled):
                raise RoundCommitmentError(f"trainer index {i} is not in 0..{self.enrolled - 1}")
        self.count = len(self.indices)
        slots = [ZERO32] * self.width
        for i in self.indices:
            slots[i] = slot_leaf(i, self.struct_hashes[i])
        self.tree = MerkleTree(slots, self.width)

    @property
    def root(self) -> bytes:
        """The accepted-set root (32 bytes)."""
        return self.tree.root

    def slot(self, i: int) -> bytes:
        """Slot i: its slot leaf, or ``bytes32(0)`` if trainer i is not accepted."""
        return self.tree.levels[0][i]

    def path(self, i: int) -> list[bytes]:
        """The path of slot i (``log2 width`` siblings)."""
        return self.tree.path(i)


def credit_leaf(i: int, credits: int) -> bytes:
    """Trainer ``i``'s cumulative credits leaf (PROTOCOL.md §5): ``keccak(0x04 ‖ uint16 i ‖ uint256
    credits)`` (35 bytes)."""
    return keccak(CREDIT_TAG + _uint(i, 16, "trainer index").to_bytes(2, "big")
                  + _uint(credits, 256, "credits").to_bytes(32, "big"))


def credits_tree(credits: Sequence[int]) -> MerkleTree:
    """The ``creditsRoot`` tree: position i holds trainer i's :func:`credit_leaf` (cumulative
    credits, enrollment order), ``next_pow2(max(1, M))`` positions; the registry computes the same
    root in ``commitRound``. A trainer claims with ``tree.path(i)`` (``RegistryRounds.claim``)."""
    return MerkleTree([credit_leaf(i, c) for i, c in enumerate(credits)], next_pow2(max(1, len(credits))))


def bitmaps_hash(bitmaps: Sequence[int]) -> bytes:
    """``keccak(abi.encodePacked(uint256[] acceptedBitmaps))``: the last field of a round's
    commitment word (PROTOCOL.md §5)."""
    return keccak(b"".join(_uint(b, 256, "bitmap").to_bytes(32, "big") for b in bitmaps))


def fragments_root(leaves: Sequence[FragmentLeaf | bytes]) -> bytes:
    """The round's ``fragmentsRoot``: the positional tree over the F fragment leaves (in fragment
    order, hashed if given as :class:`FragmentLeaf`), ``next_pow2(F)`` positions."""
    return fragments_tree(leaves).root


def fragments_tree(leaves: Sequence[FragmentLeaf | bytes]) -> MerkleTree:
    """The tree of :func:`fragments_root` (for paths)."""
    if not leaves:
        raise RoundCommitmentError("a round commits at least one fragment")
    hashes = []
    for f, leaf in enumerate(leaves):
        if isinstance(leaf, FragmentLeaf):
            if leaf.fragment != f:
                raise RoundCommitmentError(f"leaf {f} carries fragment {leaf.fragment}")
            leaf = leaf.hash()
        hashes.append(leaf)
    return MerkleTree(hashes)


# ---------------------------------------------------------------------------- openings


@dataclass(frozen=True)
class CoordinateOpening:
    """The §2 opening of one coordinate (``RoundProofs.CoordinateOpening``).

    Attributes:
        chunk_index: ``coordinate // 16``; chunk: 64 bytes; sibling_h: 32-byte hashes bottom-up;
        sibling_s: uint32 sums, same order.
    """

    chunk_index: int
    chunk: bytes
    sibling_h: tuple[bytes, ...]
    sibling_s: tuple[int, ...]

    @classmethod
    def of(cls, tree: ChunkTree, coordinate: int) -> "CoordinateOpening":
        """The opening of ``coordinate`` in a committed vector."""
        i, chunk, proof = tree.opening(coordinate)
        return cls(i, chunk, tuple(h for h, _ in proof), tuple(s for _, s in proof))

    @classmethod
    def empty(cls) -> "CoordinateOpening":
        """The placeholder for an opening that is not read (the initial momentum)."""
        return cls(0, b"", (), ())

    def value(self, coordinate: int) -> int:
        """The bit pattern at ``coordinate`` (in this chunk)."""
        return value_at(self.chunk, coordinate % CHUNK_VALUES)

    def as_tuple(self) -> tuple:
        """The ABI tuple ``(uint256,bytes,bytes32[],uint32[])``."""
        return (self.chunk_index, self.chunk, list(self.sibling_h), list(self.sibling_s))

    @classmethod
    def from_tuple(cls, t: Sequence) -> "CoordinateOpening":
        """The inverse of :meth:`as_tuple`."""
        return cls(t[0], bytes(t[1]), tuple(t[2]), tuple(t[3]))


class FragmentState:
    """One fragment after one round: the commitments of its weights and momentum and its accepted
    set, and so its :class:`FragmentLeaf`.

    Args:
        fragment: f.
        weights: float32 (n,) weights after the round (tensor / array), or its ChunkTree.
        momentum: float32 (n,) momentum after the round, or its ChunkTree; None = the initial
            all-(+0) buffer (committed as root 0, sum 0).
        accepted: the round's accepted set; None = the initial state (root 0, count 0).
    """

    def __init__(self, fragment: int, weights, momentum=None, accepted: AcceptedSet | None = None):
        self.fragment = _uint(fragment, 16, "fragment")
        self.weights = weights if isinstance(weights, ChunkTree) else ChunkTree(weights)
        self.momentum = None if momentum is None else (momentum if isinstance(momentum, ChunkTree)
                                                       else ChunkTree(momentum))
        if self.momentum is not None and self.momentum.n != self.weights.n:
            raise RoundCommitmentError(f"momentum has {self.momentum.n} values, weights {self.weights.n}")
        self.accepted = accepted
        wr, ws = self.weights.root
        mr, ms = self.momentum.root if self.momentum is not None else (ZERO32, 0)
        ar, ac = (accepted.root, accepted.count) if accepted is not None else (ZERO32, 0)
        self.leaf = FragmentLeaf(self.fragment, ar, ac, wr, ws, mr, ms)

    @classmethod
    def build(cls, fragment: int, weights, momentum, accepted: AcceptedSet) -> "FragmentState":
        """A fragment after a round (momentum and accepted set required)."""
        if momentum is None or accepted is None:
            raise RoundCommitmentError("a round's fragment state has a momentum and an accepted set")
        return cls(fragment, weights, momentum, accepted)

    @classmethod
    def initial(cls, fragment: int, weights) -> "FragmentState":
        """The initial state (round -1) of a fragment: its weights, momentum +0, no accepted set."""
        return cls(fragment, weights)

    @property
    def n(self) -> int:
        """The fragment's size."""
        return self.weights.n

    @property
    def is_initial(self) -> bool:
        """Whether this is an initial state (no momentum commitment)."""
        return self.momentum is None


@dataclass(frozen=True)
class AcceptedEntry:
    """One accepted submission in a proof (``RoundProofs.AcceptedEntry``, same field order)."""

    trainer_index: int
    struct_hash: bytes
    slot_path: tuple[bytes, ...]
    base_root: bytes
    payload_root: bytes
    payload_sumsq: int
    cid_hash: bytes
    payload_hash: bytes
    payload: CoordinateOpening

    def as_tuple(self) -> tuple:
        """The ABI tuple of ``RoundProofs.AcceptedEntry``."""
        return (self.trainer_index, self.struct_hash, list(self.slot_path), self.base_root, self.payload_root,
                self.payload_sumsq, self.cid_hash, self.payload_hash, self.payload.as_tuple())

    @classmethod
    def from_tuple(cls, t: Sequence) -> "AcceptedEntry":
        """The inverse of :meth:`as_tuple`."""
        return cls(t[0], t[1], tuple(t[2]), t[3], t[4], t[5], t[6], t[7], CoordinateOpening.from_tuple(t[8]))


_LEAF_ABI = "(uint16,bytes32,uint16,bytes32,uint32,bytes32,uint32)"
_OPENING_ABI = "(uint256,bytes,bytes32[],uint32[])"
_ENTRY_ABI = f"(uint16,bytes32,bytes32[],bytes32,bytes32,uint32,bytes32,bytes32,{_OPENING_ABI})"
AGGREGATE_OPENING_ABI = (f"(uint16,uint256,{_LEAF_ABI},bytes32[],{_LEAF_ABI},bytes32[],{_ENTRY_ABI}[],"
                         f"{_OPENING_ABI},{_OPENING_ABI},{_OPENING_ABI},{_OPENING_ABI})")
"""The ABI type of ``RoundProofs.AggregateOpening``."""
AGGREGATE_CONTEXT_ABI = "(bytes32,uint32,bytes32,bytes32,bool,uint16,uint256,uint256,uint8,uint16,uint32,uint32,bool)"
"""The ABI type of ``RoundProofs.AggregateContext``."""


@dataclass(frozen=True)
class AggregateOpening:
    """A proof that one coordinate of one fragment is wrong (``RoundProofs.AggregateOpening``,
    same field order); ``as_tuple`` / ``abi_encode`` give its ABI form."""

    fragment: int
    coordinate: int
    current: FragmentLeaf
    current_path: tuple[bytes, ...]
    previous: FragmentLeaf
    previous_path: tuple[bytes, ...]
    entries: tuple[AcceptedEntry, ...]
    prev_weights: CoordinateOpening
    prev_momentum: CoordinateOpening
    new_weights: CoordinateOpening
    new_momentum: CoordinateOpening

    def as_tuple(self) -> tuple:
        """The nested tuple of :data:`AGGREGATE_OPENING_ABI` (eth_abi / web3 argument form)."""
        return (self.fragment, self.coordinate, self.current.as_tuple(), list(self.current_path),
                self.previous.as_tuple(), list(self.previous_path), [e.as_tuple() for e in self.entries],
                self.prev_weights.as_tuple(), self.prev_momentum.as_tuple(), self.new_weights.as_tuple(),
                self.new_momentum.as_tuple())

    def abi_encode(self) -> bytes:
        """``abi.encode(opening)``: what ``abi.decode(data, (RoundProofs.AggregateOpening))`` reads."""
        from eth_abi import encode

        return encode([AGGREGATE_OPENING_ABI], [self.as_tuple()])

    @classmethod
    def abi_decode(cls, data: bytes) -> "AggregateOpening":
        """The inverse of :meth:`abi_encode`."""
        from eth_abi import decode

        (t,) = decode([AGGREGATE_OPENING_ABI], data)
        return cls(t[0], t[1], FragmentLeaf.from_tuple(t[2]), tuple(t[3]), FragmentLeaf.from_tuple(t[4]), tuple(t[5]),
                   tuple(AcceptedEntry.from_tuple(e) for e in t[6]),
                   *(CoordinateOpening.from_tuple(x) for x in t[7:11]))


@dataclass(frozen=True)
class AggregateContext:
    """The verifier's own state (``RoundProofs.AggregateContext``, same field order).

    ``lr`` and ``mu`` are binary32 bit patterns (:func:`f32_bits` of the spec's values).
    """

    task_id: bytes
    round: int
    fragments_root: bytes
    prev_fragments_root: bytes
    prev_is_initial: bool
    fragment_count: int
    slot_width: int
    fragment_size: int
    rule: int
    alpha_bps: int
    lr: int
    mu: int
    nesterov: bool = True

    def as_tuple(self) -> tuple:
        """The tuple of :data:`AGGREGATE_CONTEXT_ABI`."""
        return (self.task_id, self.round, self.fragments_root, self.prev_fragments_root, self.prev_is_initial,
                self.fragment_count, self.slot_width, self.fragment_size, self.rule, self.alpha_bps, self.lr,
                self.mu, self.nesterov)

    def abi_encode(self) -> bytes:
        """``abi.encode(ctx)``."""
        from eth_abi import encode

        return encode([AGGREGATE_CONTEXT_ABI], [self.as_tuple()])

    @classmethod
    def abi_decode(cls, data: bytes) -> "AggregateContext":
        """The inverse of :meth:`abi_encode`."""
        from eth_abi import decode

        (t,) = decode([AGGREGATE_CONTEXT_ABI], data)
        return cls(*t)


def build_aggregate_opening(*, fragment: int, coordinate: int, current: FragmentState, previous: FragmentState,
                            current_leaves: Sequence[FragmentLeaf], previous_leaves: Sequence[FragmentLeaf],
                            submissions: Mapping[int, OuterGradient],
                            payloads: Mapping[int, Tensor | ChunkTree]) -> AggregateOpening:
    """The proof for one coordinate of one fragment (maps 1:1 onto ``RoundProofs.AggregateOpening``).

    Args:
        fragment: f; coordinate: 0 <= c < n.
        current: f's state after the challenged round (``current.accepted`` names the entries).
        previous: f's state after the round before, or ``FragmentState.initial`` for round 0.
        current_leaves, previous_leaves: all F leaves of both rounds, in fragment order.
        submissions: ``{trainer_index: OuterGradient}`` for (at least) every accepted trainer.
        payloads: ``{trainer_index: float32 (n,) pseudo-gradient or its ChunkTree}`` for every
            accepted trainer (its root must be the submission's payload root).
    Raises:
        RoundCommitmentError: the pieces are inconsistent (leaf not in its list, sizes differ,
            a payload or submission missing or not matching the accepted set).
    """
    if current.fragment != fragment or previous.fragment != fragment:
        raise RoundCommitmentError(f"states of fragments {current.fragment}, {previous.fragment}, not {fragment}")
    if len(current_leaves) != len(previous_leaves):
        raise RoundCommitmentError(f"{len(current_leaves)} current leaves, {len(previous_leaves)} previous")
    if current_leaves[fragment] != current.leaf or previous_leaves[fragment] != previous.leaf:
        raise RoundCommitmentError(f"fragment {fragment}'s leaf is not the one in the round's leaves")
    if current.accepted is None or current.momentum is None:
        raise RoundCommitmentError("the challenged round's state needs its momentum and accepted set")
    n = current.n
    if previous.n != n:
        raise RoundCommitmentError(f"previous weights have {previous.n} values, current {n}")
    entries = []
    for i in current.accepted.indices:
        sub, vec = submissions.get(i), payloads.get(i)
        if sub is None or vec is None:
            raise RoundCommitmentError(f"accepted trainer {i} has no submission or payload")
        if sub.struct_hash() != current.accepted.struct_hashes[i]:
            raise RoundCommitmentError(f"trainer {i}'s submission is not the accepted one")
        tree = vec if isinstance(vec, ChunkTree) else ChunkTree(vec)
        if tree.n != n or tree.root != (sub.payload_root, sub.payload_sumsq):
            raise RoundCommitmentError(f"trainer {i}'s payload does not match its submission's commitment")
        entries.append(AcceptedEntry(i, sub.struct_hash(), tuple(current.accepted.path(i)), sub.base_root,
                                     sub.payload_root, sub.payload_sumsq, sub.cid_hash, sub.payload_hash,
                                     CoordinateOpening.of(tree, coordinate)))
    return AggregateOpening(
        fragment=fragment,
        coordinate=coordinate,
        current=current.leaf,
        current_path=tuple(fragments_tree(current_leaves).path(fragment)),
        previous=previous.leaf,
        previous_path=tuple(fragments_tree(previous_leaves).path(fragment)),
        entries=tuple(entries),
        prev_weights=CoordinateOpening.of(previous.weights, coordinate),
        prev_momentum=(CoordinateOpening.empty() if previous.momentum is None
                       else CoordinateOpening.of(previous.momentum, coordinate)),
        new_weights=CoordinateOpening.of(current.weights, coordinate),
        new_momentum=CoordinateOpening.of(current.momentum, coordinate),
    )


# ---------------------------------------------------------------------------- checking (the referee's mirror)


def recompute(rule: int, alpha_bps: int, xs: Sequence[int], prev_w: int, prev_m: int, lr: int, mu: int,
              nesterov: bool = True) -> tuple[int, int]:
    """One coordinate of a round (``RoundProofs.recompute``), on bit patterns: g = the rule over
    ``xs`` (ascending trainer index; +0 when empty), then the outer step from (prev_w, prev_m).

    Uses :mod:`tenzro_trainer.canonical` on (K, 1) tensors, so it is the syncer's own arithmetic.
    Returns:
        ``(w, m)`` bit patterns (NaN as 0x7FC00000).
    """
    def t(bits: Sequence[int]) -> Tensor:
        return torch.tensor([b - (1 << 32) if b >= 1 << 31 else b for b in bits], dtype=torch.int32).view(torch.float32)

    if not xs:
        g = t([0])
    else:
        x = t(xs).reshape(len(xs), 1)
        if rule == RULE_MEAN:
            g = canonical.mean(x)
        elif rule == RULE_TRIMMED_MEAN:
            g = canonical.trimmed_mean(x, alpha_bps)
        elif rule == RULE_COORDINATE_MEDIAN:
            g = canonical.coordinate_median(x)
        else:
            raise RoundCommitmentError(f"rule {rule} has no coordinate-wise recomputation")
    w, m = canonical.nesterov_step(t([prev_w]), t([prev_m]), g, bits_f32(lr), bits_f32(mu), nesterov)
    return int(w.view(torch.int32).item()) & 0xFFFFFFFF, int(m.view(torch.int32).item()) & 0xFFFFFFFF


def _open(root_h: bytes, root_s: int, n: int, c: int, o: CoordinateOpening) -> int:
    if o.chunk_index != c // CHUNK_VALUES:
        raise ProofRejected("WrongChunk", f"chunk {o.chunk_index} for coordinate {c}")
    if len(o.sibling_h) != len(o.sibling_s) or not verify_opening(
            root_h, root_s, n, o.chunk_index, o.chunk, list(zip(o.sibling_h, o.sibling_s))):
        raise ProofRejected("OpeningNotInRoot", f"chunk {o.chunk_index} against 0x{root_h.hex()}")
    return o.value(c)


def aggregate_mismatch(o: AggregateOpening, ctx: AggregateContext) -> bool:
    """Python mirror of ``RoundProofs.aggregateMismatch``: the same checks in the same order.

    Returns:
        Whether the committed new weight or momentum at ``o.coordinate`` differs (bitwise) from the
        recomputation, or the current leaf carries another fragment than its position.
    Raises:
        ProofRejected: where the contract reverts (``reason`` = the error's name).
    """
    n, c, f = ctx.fragment_size, o.coordinate, o.fragment
    if f >= ctx.fragment_count:
        raise ProofRejected("FragmentOutOfRange", f"fragment {f} of {ctx.fragment_count}")
    if c >= n:
        raise ProofRejected("CoordinateOutOfRange", f"coordinate {c} of {n}")
    if ctx.slot_width < 1 or ctx.slot_width & (ctx.slot_width - 1):
        raise ProofRejected("BadWidth", f"slot width {ctx.slot_width}")
    width = next_pow2(ctx.fragment_count)
    if not verify_path(ctx.fragments_root, o.current.hash(), f, o.current_path, width):
        raise ProofRejected("FragmentLeafNotInRoot", f"current leaf of fragment {f}")
    if not verify_path(ctx.prev_fragments_root, o.previous.hash(), f, o.previous_path, width):
        raise ProofRejected("FragmentLeafNotInRoot", f"previous leaf of fragment {f}")
    if o.current.fragment != f:
        return True
    if len(o.entries) != o.current.accepted_count:
        raise ProofRejected("EntryCountMismatch", f"{len(o.entries)} entries, count {o.current.accepted_count}")
    xs = []
    for k, e in enumerate(o.entries):
        if k and e.trainer_index <= o.entries[k - 1].trainer_index:
            raise ProofRejected("EntriesNotAscending", f"entry {k} (trainer {e.trainer_index})")
        sh = struct_hash_of_cid_hash(ctx.task_id, ctx.round, f, e.base_root, e.payload_root, e.payload_sumsq,
                                     e.cid_hash, e.payload_hash)
        if sh != e.struct_hash:
            raise ProofRejected("StructHashMismatch", f"trainer {e.trainer_index}")
        if not verify_path(o.current.accepted_root, slot_leaf(e.trainer_index, sh), e.trainer_index, e.slot_path,
                           ctx.slot_width):
            raise ProofRejected("SlotNotInAcceptedRoot", f"trainer {e.trainer_index}")
        xs.append(_open(e.payload_root, e.payload_sumsq, n, c, e.payload))
    prev_w = _open(o.previous.weights_root, o.previous.weights_sumsq, n, c, o.prev_weights)
    prev_m = 0 if ctx.prev_is_initial else _open(o.previous.momentum_root, o.previous.momentum_sumsq, n, c,
                                                 o.prev_momentum)
    new_w = _open(o.current.weights_root, o.current.weights_sumsq, n, c, o.new_weights)
    new_m = _open(o.current.momentum_root, o.current.momentum_sumsq, n, c, o.new_momentum)
    w, m = recompute(ctx.rule, ctx.alpha_bps, xs, prev_w, prev_m, ctx.lr, ctx.mu, ctx.nesterov)
    return w != new_w or m != new_m

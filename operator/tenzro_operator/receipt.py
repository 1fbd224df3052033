"""Receipt and run-root encoding v1: the Python reference implementation.

This module is the executable twin of ``contracts/RECEIPT.md`` and of the
Solidity library ``contracts/lib/RunRoot.sol``; both are checked against the
vectors in ``tests/vectors/run_root_v1.json``. It uses :mod:`hashlib` only.

Encoding v1 (all integers big-endian, fixed width; ``||`` concatenation;
``DOMAIN`` = the 24 ASCII bytes ``tenzro/train/run-root/v1``):

* ``weights_root  = sha256(DOMAIN || 0x03 || u32(F) || h_0 || ... || h_{F-1})``
* ``round_digest  = sha256(DOMAIN || 0x02 || u32(r) || weights_root_r || transcript_hash_r || u32(accepted_r))``,
  in the receipt folded with the round's challenge status s when s != 0:
  ``sha256(DOMAIN || 0x04 || round_digest_r || u8(s))`` (:func:`with_status`)
* Merkle node     ``= sha256(DOMAIN || 0x01 || left || right)``; neighbours are
  paired left to right, an odd last node is carried up unchanged.
* ``transcript_root`` = Merkle root over ``sha256(DOMAIN || 0x00 || u32(r) || transcript_hash_r)``
* receipt = 189-byte header || round digests, header =
  ``0x01 || u256 chain_id || registry(20) || task_id || spec_hash ||
  final_model_hash || transcript_root || u32 R || u32 trainer_count``
* ``run_root`` = Merkle root over ``sha256(DOMAIN || 0x00 || header)`` and
  ``sha256(DOMAIN || 0x00 || u32(r) || round_digest_r)`` for r = 0..R-1.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "DOMAIN",
    "HEADER_LENGTH",
    "VERSION",
    "VERIFIER_ADDRESS",
    "Receipt",
    "ReceiptFormatError",
    "decode_receipt",
    "encode_receipt",
    "indexed_leaf",
    "merkle_root",
    "round_digest",
    "run_root",
    "task_id_bytes",
    "transcript_root",
    "verifier_input",
    "verify",
    "verify_raw",
    "weights_root",
    "with_status",
]

DOMAIN: bytes = b"tenzro/train/run-root/v1"
"""Domain prefix of every hash of encoding v1 (24 bytes)."""
VERSION: int = 1
"""Version byte of a serialized receipt."""
HEADER_LENGTH: int = 189
"""Length in bytes of the receipt header."""
VERIFIER_ADDRESS: str = "0x0000000000000000000000000000000000001008"
"""Address of the TRAINING_VERIFY precompile (the mimic is placed there on devnets)."""

TAG_LEAF = b"\x00"
TAG_NODE = b"\x01"
TAG_ROUND = b"\x02"
TAG_WEIGHTS = b"\x03"
TAG_STATUS = b"\x04"
STATUS_UNCHALLENGED = 0
"""Challenge status of a round whose window passed unchallenged (its digest goes in as is)."""
_U32_MAX = 2**32 - 1
_U256_MAX = 2**256 - 1

assert len(DOMAIN) == 24


class ReceiptFormatError(ValueError):
    """Bytes or fields that do not form a valid v1 receipt; the message says what and where."""


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _u32(value: int, name: str) -> bytes:
    if not isinstance(value, int) or not 0 <= value <= _U32_MAX:
        raise ReceiptFormatError(f"{name} must be an integer in [0, 2**32-1], got {value!r}")
    return value.to_bytes(4, "big")


def _h32(value: bytes, name: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        got = len(value) if isinstance(value, (bytes, bytearray)) else type(value).__name__
        raise ReceiptFormatError(f"{name} must be 32 bytes, got {got}")
    return bytes(value)


def weights_root(fragment_hashes: Sequence[bytes]) -> bytes:
    """Weights root of one round (also the model hash).

    Args:
        fragment_hashes: F >= 1 SHA-256 digests (32 bytes each) of the exact
            safetensors bytes of each fragment's global weights, fragment 0 first.

    Returns:
        ``sha256(DOMAIN || 0x03 || u32(F) || h_0 || ... || h_{F-1})`` (32 bytes).

    Raises:
        ReceiptFormatError: empty list, or a hash that is not 32 bytes.
    """
    if len(fragment_hashes) == 0:
        raise ReceiptFormatError("weights_root needs at least one fragment hash")
    body = b"".join(_h32(h, f"fragment_hashes[{i}]") for i, h in enumerate(fragment_hashes))
    return _sha256(DOMAIN + TAG_WEIGHTS + _u32(len(fragment_hashes), "F") + body)


def round_digest(round_index: int, weights_root_: bytes, transcript_hash: bytes, accepted_count: int) -> bytes:
    """Digest of round ``round_index`` (rounds are numbered 0 .. R-1).

    Args:
        round_index: r, a uint32.
        weights_root_: the weights root committed by commitRound of round r (32 bytes).
        transcript_hash: sha256 of the round's canonical transcript JSON bytes (32 bytes).
        accepted_count: accepted (trainer, fragment) submissions in round r, a uint32.

    Returns:
        ``sha256(DOMAIN || 0x02 || u32(r) || weights_root_r || transcript_hash_r || u32(accepted_r))``.
    """
    return _sha256(
        DOMAIN
        + TAG_ROUND
        + _u32(round_index, "round")
        + _h32(weights_root_, "weights_root")
        + _h32(transcript_hash, "transcript_hash")
        + _u32(accepted_count, "accepted_count")
    )


def with_status(round_digest_: bytes, status: int) -> bytes:
    """A round digest as the receipt carries it (``RunRoot.withStatus``): unchanged for status 0,
    else ``sha256(DOMAIN || 0x04 || round_digest || u8(status))``.

    Args:
        round_digest_: the round's digest (32 bytes, :func:`round_digest`).
        status: the round's challenge status, a uint8 (``getRound``'s ``challengeStatus``:
            0 unchallenged, 1 challenged and the challenge lost).
    Raises:
        ReceiptFormatError: a digest that is not 32 bytes or a status outside 0..255.
    """
    digest = _h32(round_digest_, "round_digest")
    if not 0 <= status <= 255:
        raise ReceiptFormatError(f"status must be a uint8, got {status}")
    if status == STATUS_UNCHALLENGED:
        return digest
    return _sha256(DOMAIN + TAG_STATUS + digest + bytes([status]))


def indexed_leaf(index: int, value: bytes) -> bytes:
    """Leaf ``sha256(DOMAIN || 0x00 || u32(index) || value)`` of the transcript and run trees."""
    return _sha256(DOMAIN + TAG_LEAF + _u32(index, "index") + _h32(value, "leaf value"))


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """Merkle root of encoding v1 over ``leaves`` (n >= 1, 32 bytes each).

    Neighbours are paired left to right into ``sha256(DOMAIN || 0x01 || left || right)``;
    an odd last node is carried up unchanged (never duplicated); one leaf is its own root.
    """
    if len(leaves) == 0:
        raise ReceiptFormatError("merkle_root needs at least one leaf")
    level = [_h32(x, f"leaves[{i}]") for i, x in enumerate(leaves)]
    while len(level) > 1:
        nxt = [_sha256(DOMAIN + TAG_NODE + level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2 == 1:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def transcript_root(transcript_hashes: Sequence[bytes]) -> bytes:
    """Merkle root over ``indexed_leaf(r, transcript_hash_r)`` for r = 0..R-1 (R >= 1)."""
    if len(transcript_hashes) == 0:
        raise ReceiptFormatError("transcript_root needs at least one round")
    return merkle_root([indexed_leaf(r, h) for r, h in enumerate(transcript_hashes)])


def task_id_bytes(task_id: str) -> bytes:
    """On-chain bytes32 task id: ``0x`` + 64 hex digits as is, else keccak256 of the UTF-8 string.

    Keccak-256 is not in :mod:`hashlib` (its ``sha3_256`` is the NIST variant), so
    this helper imports ``eth_utils`` lazily; the rest of the module needs only hashlib.
    """
    if task_id.startswith(("0x", "0X")) and len(task_id) == 66:
        try:
            return bytes.fromhex(task_id[2:])
        except ValueError:
            pass
    from eth_utils import keccak

    return keccak(text=task_id)


@dataclass(frozen=True)
class Receipt:
    """A decoded v1 receipt (the verifier's input without the claimed run root).

    Attributes:
        chain_id: chain id of the registry's chain (uint256).
        registry: 20-byte address of the TrainingRegistry that sealed the run.
        task_id, spec_hash, final_model_hash, transcript_root: 32 bytes each.
        trainer_count: number of trainers ever enrolled in the run (uint32).
        round_digests: R >= 1 round digests, round 0 first (32 bytes each).
        version: the version byte, always 1.
    """

    chain_id: int
    registry: bytes
    task_id: bytes
    spec_hash: bytes
    final_model_hash: bytes
    transcript_root: bytes
    trainer_count: int
    round_digests: tuple[bytes, ...]
    version: int = VERSION

    @property
    def rounds(self) -> int:
        """R, the number of rounds."""
        return len(self.round_digests)

    @property
    def registry_address(self) -> str:
        """The registry as a 0x-prefixed lower-case hex string."""
        return "0x" + self.registry.hex()

    def encode(self) -> bytes:
        """Serialized bytes (``189 + 32 R``); see :func:`encode_receipt`."""
        return encode_receipt(
            chain_id=self.chain_id,
            registry=self.registry,
            task_id=self.task_id,
            spec_hash=self.spec_hash,
            final_model_hash=self.final_model_hash,
            transcript_root=self.transcript_root,
            trainer_count=self.trainer_count,
            round_digests=self.round_digests,
        )

    def run_root(self) -> bytes:
        """The run root of this receipt (32 bytes)."""
        return run_root(self.encode())


def _address_bytes(registry: bytes | str) -> bytes:
    if isinstance(registry, str):
        hexpart = registry[2:] if registry.startswith(("0x", "0X")) else registry
        try:
            raw = bytes.fromhex(hexpart)
        except ValueError as exc:
            raise ReceiptFormatError(f"registry {registry!r} is not hex") from exc
    else:
        raw = bytes(registry)
    if len(raw) != 20:
        raise ReceiptFormatError(f"registry must be a 20-byte address, got {len(raw)} bytes")
    return raw


def encode_receipt(
    *,
    chain_id: int,
    registry: bytes | str,
    task_id: bytes,
    spec_hash: bytes,
    final_model_hash: bytes,
    transcript_root: bytes,
    trainer_count: int,
    round_digests: Sequence[bytes],
) -> bytes:
    """Serialize a v1 receipt: the 189-byte header then the R round digests.

    Args:
        chain_id: uint256 chain id.
        registry: the registry address, 20 bytes or a 0x-hex string.
        task_id, spec_hash, final_model_hash, transcript_root: 32 bytes each
            (``final_model_hash`` is the weights root of the last round).
        trainer_count: trainers ever enrolled in the run (uint32).
        round_digests: R >= 1 digests from :func:`round_digest`, round 0 first.

    Returns:
        ``189 + 32 R`` bytes, without the claimed run root.

    Raises:
        ReceiptFormatError: a field out of range or of the wrong length, or R = 0.
    """
    if not isinstance(chain_id, int) or not 0 <= chain_id <= _U256_MAX:
        raise ReceiptFormatError(f"chain_id must be a uint256, got {chain_id!r}")
    if len(round_digests) == 0:
        raise ReceiptFormatError("a receipt needs at least one round digest (R >= 1)")
    header = (
        bytes([VERSION])
        + chain_id.to_bytes(32, "big")
        + _address_bytes(registry)
        + _h32(task_id, "task_id")
        + _h32(spec_hash, "spec_hash")
        + _h32(final_model_hash, "final_model_hash")
        + _h32(transcript_root, "transcript_root")
        + _u32(len(round_digests), "rounds")
        + _u32(trainer_count, "trainer_count")
    )
    assert len(header) == HEADER_LENGTH
    return header + b"".join(_h32(d, f"round_digests[{i}]") for i, d in enumerate(round_digests))


def decode_receipt(data: bytes) -> Receipt:
    """Parse serialized receipt bytes (without the claimed root).

    Raises:
        ReceiptFormatError: shorter than a header plus one digest, a version other
            than 1, R = 0, or a length other than ``189 + 32 R``.
    """
    data = bytes(data)
    if len(data) < HEADER_LENGTH + 32:
        raise ReceiptFormatError(
            f"receipt is {len(data)} bytes; a v1 receipt has at least {HEADER_LENGTH + 32} (header + one round digest)"
        )
    if data[0] != VERSION:
        raise ReceiptFormatError(f"receipt version byte is {data[0]:#04x} at offset 0; expected 0x01")
    rounds = int.from_bytes(data[181:185], "big")
    if rounds == 0:
        raise ReceiptFormatError("receipt declares R = 0 rounds at offset 181; R must be >= 1")
    expected = HEADER_LENGTH + 32 * rounds
    if len(data) != expected:
        raise ReceiptFormatError(
            f"receipt declares R = {rounds} rounds (offset 181), so it must be {expected} bytes, got {len(data)}"
        )
    return Receipt(
        version=data[0],
        chain_id=int.from_bytes(data[1:33], "big"),
        registry=data[33:53],
        task_id=data[53:85],
        spec_hash=data[85:117],
        final_model_hash=data[117:149],
        transcript_root=data[149:181],
        trainer_count=int.from_bytes(data[185:189], "big"),
        round_digests=tuple(data[HEADER_LENGTH + 32 * i : HEADER_LENGTH + 32 * (i + 1)] for i in range(rounds)),
    )


def run_root(receipt_bytes: bytes) -> bytes:
    """Run root of serialized receipt bytes (without the claimed root).

    Returns:
        The Merkle root over ``sha256(DOMAIN || 0x00 || header189)`` and
        ``sha256(DOMAIN || 0x00 || u32(r) || round_digest_r)``, r = 0..R-1 (32 bytes).

    Raises:
        ReceiptFormatError: malformed bytes (see :func:`decode_receipt`).
    """
    receipt = decode_receipt(receipt_bytes)
    header = bytes(receipt_bytes[:HEADER_LENGTH])
    leaves = [_sha256(DOMAIN + TAG_LEAF + header)]
    leaves += [indexed_leaf(r, d) for r, d in enumerate(receipt.round_digests)]
    return merkle_root(leaves)


def verifier_input(receipt_bytes: bytes, root: bytes) -> bytes:
    """Raw calldata for the verifier at 0x...1008: receipt bytes followed by the 32-byte claimed root."""
    return bytes(receipt_bytes) + _h32(root, "root")


def verify(receipt_bytes: bytes, root: bytes) -> bool:
    """What the TRAINING_VERIFY precompile answers: True iff well formed and the run root matches.

    Never raises for malformed receipt bytes or a root of the wrong length: it
    returns False, as the on-chain verifier returns 0x00.
    """
    if not isinstance(root, (bytes, bytearray)) or len(root) != 32:
        return False
    try:
        computed = run_root(receipt_bytes)
    except ReceiptFormatError:
        return False
    return hmac.compare_digest(computed, bytes(root))


def verify_raw(calldata: bytes) -> bytes:
    """Byte-for-byte model of the verifier: raw input -> ``b"\\x01"`` or ``b"\\x00"``."""
    calldata = bytes(calldata)
    if len(calldata) < 32:
        return b"\x00"
    return b"\x01" if verify(calldata[:-32], calldata[-32:]) else b"\x00"

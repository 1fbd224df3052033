"""Bit packing of small unsigned codes into bytes (the wire form of MX elements, top-k indices and
2-bit top-k values).

Layout: code ``i`` occupies bits ``[i * bits, (i + 1) * bits)`` of the byte stream, least
significant bit first (bit ``j`` of the stream is bit ``j % 8`` of byte ``j // 8``); the unused high
bits of the last byte are zero. ``n`` codes of ``bits`` bits take ``ceil(n * bits / 8)`` bytes.
For ``bits = 4`` this puts code ``2i`` in the low nibble of byte ``i``, the order of the OCP MX
spec's packed FP4 and of ``torch.float4_e2m1fn_x2``.

Packing goes through :func:`numpy.packbits` / :func:`numpy.unpackbits` (``bitorder="little"``);
8-bit codes are copied unchanged.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from tenzro_trainer.errors import PayloadError

MAX_BITS = 16


def packed_size(n: int, bits: int) -> int:
    """Bytes that ``n`` codes of ``bits`` bits take: ``ceil(n * bits / 8)``."""
    _check_bits(bits)
    if n < 0:
        raise ValueError(f"code count must be >= 0, got {n}")
    return (n * bits + 7) // 8


def pack(codes: Tensor, bits: int) -> Tensor:
    """Pack codes into bytes.

    Args:
        codes: (n,) integer tensor, every value in ``[0, 2**bits)``.
        bits: code width in bits, 1..16.
    Returns:
        (ceil(n * bits / 8),) uint8 tensor on the CPU.
    Raises:
        ValueError: a code out of range, a non-integer or non-1-D tensor, or ``bits`` out of range.
    """
    _check_bits(bits)
    if codes.dim() != 1 or codes.dtype.is_floating_point or codes.dtype == torch.bool:
        raise ValueError(f"codes must be a 1-D integer tensor, got {codes.dtype} of shape {tuple(codes.shape)}")
    c = codes.detach().to("cpu", torch.int64)
    if c.numel() and (int(c.min()) < 0 or int(c.max()) >= 1 << bits):
        raise ValueError(f"codes must lie in [0, {1 << bits}) for {bits}-bit packing, "
                         f"got range [{int(c.min())}, {int(c.max())}]")
    if bits == 8:
        return c.to(torch.uint8)
    shifts = torch.arange(bits, dtype=torch.int64)
    bit_matrix = ((c[:, None] >> shifts) & 1).to(torch.uint8).numpy()  # (n, bits), LSB first
    return torch.from_numpy(np.packbits(bit_matrix.reshape(-1), bitorder="little"))


def unpack(data: Tensor, n: int, bits: int) -> Tensor:
    """Inverse of :func:`pack`.

    Args:
        data: (ceil(n * bits / 8),) uint8 tensor.
        n: number of codes.
        bits: code width in bits, 1..16.
    Returns:
        (n,) int64 tensor.
    Raises:
        PayloadError: ``data`` is not uint8 1-D, has the wrong length, or its padding bits are not zero
            (so every code sequence has exactly one byte string).
    """
    _check_bits(bits)
    need = packed_size(n, bits)
    if data.dtype != torch.uint8 or data.dim() != 1:
        raise PayloadError(f"packed codes must be a 1-D uint8 tensor, got {data.dtype} of shape {tuple(data.shape)}")
    if data.numel() != need:
        raise PayloadError(f"packed codes hold {data.numel()} bytes, {n} codes of {bits} bits need {need}")
    raw = data.detach().to("cpu").contiguous()
    if bits == 8:
        return raw.to(torch.int64)
    stream = np.unpackbits(raw.numpy(), bitorder="little")  # (8 * need,)
    if stream[n * bits:].any():
        raise PayloadError(f"packed codes have non-zero padding bits after the {n * bits} code bits")
    bit_matrix = torch.from_numpy(stream[: n * bits].reshape(n, bits).astype(np.int64))
    return (bit_matrix << torch.arange(bits, dtype=torch.int64)).sum(dim=1)


def _check_bits(bits: int) -> None:
    if not isinstance(bits, int) or not 1 <= bits <= MAX_BITS:
        raise ValueError(f"bits must be an integer in [1, {MAX_BITS}], got {bits!r}")

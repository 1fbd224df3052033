"""Block-scaled quantization in the OCP Microscaling (MX) formats (OCP MX spec v1.0, sections 5-6).

A flat float32 vector is cut into blocks of :data:`BLOCK` = 32 consecutive values (the last block
may be shorter). Each block gets one shared scale ``2^X``, stored as an E8M0 byte ``X + 127``
(``X`` in [-127, 127]; the byte 0xFF is NaN and refused), and each value one element code of the
chosen :class:`~tenzro_trainer.compression.elements.ElementFormat`. Decoded value = element value
x ``2^X``.

Scale choice (spec section 6.3): ``X = floor(log2(amax)) - emax`` where ``amax`` is the block's
largest magnitude and ``emax`` the element type's largest exponent, clamped to
``[-127, 127 - emax]``; an all-zero block takes ``X = -127`` (byte 0), so its bytes are unique.
Elements are ``round(v / 2^X)`` to the nearest element value (ties to even), saturating at the
element's max (:meth:`ElementFormat.quantize`), computed in float64 where ``v / 2^X`` is exact.

Decoding is exact (see the argument in :mod:`tenzro_trainer.compression`): the element value is a
table lookup, ``2^X`` is built from its bit pattern, and their binary32 product is exactly
representable, so no rounding happens and every IEEE-754 device returns the same bits.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tenzro_trainer.compression.elements import ElementFormat
from tenzro_trainer.errors import PayloadError

BLOCK = 32
SCALE_BIAS = 127
SCALE_NAN = 0xFF


def check_vector(x: Tensor, what: str = "pseudo-gradient") -> Tensor:
    """``x`` as a contiguous CPU float32 1-D tensor.

    Raises:
        ValueError: not float32, not 1-D, or holding NaN/inf (the message counts them and names
            the first position).
    """
    if not isinstance(x, Tensor) or x.dtype != torch.float32 or x.dim() != 1:
        got = f"{x.dtype} of shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"the {what} to compress must be a 1-D float32 tensor, got {got}")
    x = x.detach().to("cpu").contiguous()
    finite = torch.isfinite(x)
    if not bool(finite.all()):
        bad = (~finite).nonzero().flatten()
        raise ValueError(f"the {what} to compress holds {bad.numel()} non-finite values (NaN or inf), first at "
                         f"index {int(bad[0])} ({float(x[bad[0]])}); compression encodes finite values only")
    return x


def pow2_f32(exponent: Tensor) -> Tensor:
    """``2^e`` as float32 for integer ``e`` in [-149, 127], built from the bit pattern (exact,
    no arithmetic on floats): biased exponent ``e + 127`` for normals, ``1 << (e + 149)`` for
    subnormals.

    Args:
        exponent: (n,) int64.
    Returns:
        (n,) float32.
    """
    e = exponent.to(torch.int64)
    if e.numel() and (int(e.min()) < -149 or int(e.max()) > 127):
        raise ValueError(f"2^e is a finite non-zero binary32 only for e in [-149, 127], got [{int(e.min())}, {int(e.max())}]")
    bits = torch.where(e >= -126, (e + 127) << 23, torch.ones_like(e) << (e + 149).clamp(min=0))
    return bits.to(torch.int32).view(torch.float32)


def mx_quantize(x: Tensor, fmt: ElementFormat) -> tuple[Tensor, Tensor]:
    """Quantize a flat vector to MX codes.

    Args:
        x: (n,) float32, finite.
        fmt: the element type.
    Returns:
        (codes (n,) int64 in ``[0, 2**fmt.bits)``, scales (ceil(n / 32),) uint8 E8M0 bytes).
    Raises:
        ValueError: ``x`` is not a finite 1-D float32 tensor.
    """
    x = check_vector(x)
    n = x.numel()
    nb = -(-n // BLOCK)
    blocks = torch.zeros(nb * BLOCK, dtype=torch.float64)
    blocks[:n] = x.to(torch.float64)
    blocks = blocks.view(nb, BLOCK)
    amax = blocks.abs().amax(dim=1) if nb else torch.zeros(0, dtype=torch.float64)
    _, e = torch.frexp(amax)  # amax = m * 2^e, m in [0.5, 1): floor(log2(amax)) = e - 1
    X = torch.where(amax > 0, e.to(torch.int64) - 1 - fmt.emax, torch.full_like(e, -SCALE_BIAS, dtype=torch.int64))
    X = X.clamp(-SCALE_BIAS, SCALE_BIAS - fmt.emax)
    inv_scale = ((SCALE_BIAS + 896 - X) << 52).view(torch.float64)  # 2^-X from its float64 bits (bias 1023)
    y = blocks * inv_scale[:, None]  # exact in float64: a power-of-two rescale, far from over/underflow
    codes = fmt.quantize(y.reshape(-1))[:n]
    return codes, (X + SCALE_BIAS).to(torch.uint8)


def mx_dequantize(codes: Tensor, scales: Tensor, n: int, fmt: ElementFormat) -> Tensor:
    """Decode MX codes exactly.

    Args:
        codes: (n,) int64 element codes.
        scales: (ceil(n / 32),) uint8 E8M0 bytes.
        n: number of values.
        fmt: the element type.
    Returns:
        (n,) float32, every value ``element * 2^X`` exactly.
    Raises:
        PayloadError: wrong lengths, a refused element code, the NaN scale 0xFF, or a scale above
            ``2^(127 - emax)`` (whose products could overflow; the encoder never makes one).
    """
    nb = -(-n // BLOCK)
    if codes.shape != (n,):
        raise PayloadError(f"MX payload has {tuple(codes.shape)} element codes, expected ({n},)")
    if scales.dtype != torch.uint8 or scales.shape != (nb,):
        raise PayloadError(f"MX payload has scales {scales.dtype} {tuple(scales.shape)}, expected uint8 ({nb},)")
    X = scales.to(torch.int64) - SCALE_BIAS
    if nb and int(scales.max()) == SCALE_NAN:
        raise PayloadError(f"MX scale byte 0xFF (NaN) in block {int((scales == SCALE_NAN).nonzero()[0])}")
    limit = SCALE_BIAS - fmt.emax
    if nb and int(X.max()) > limit:
        raise PayloadError(f"MX scale 2^{int(X.max())} exceeds 2^{limit}, the largest scale whose products with "
                           f"{fmt.name} elements stay finite")
    values = fmt.decode(codes)
    scale = pow2_f32(X).repeat_interleave(BLOCK)[:n]
    return values * scale  # exact: see the module docstring of tenzro_trainer.compression

"""Element data types of the OCP Microscaling (MX) formats: code <-> value, and rounding onto the grid.

Source: OCP Microscaling Formats (MX) Specification v1.0 (Open Compute Project, Sept. 2023),
section 5 (element types FP8 E4M3 / E5M2, FP6 E3M2 / E2M3, FP4 E2M1, INT8).

============  ====  ========================  =========  ==========================================
name          bits  layout                    max value  codes refused (decode raises)
============  ====  ========================  =========  ==========================================
``int8``      8     two's complement x 2^-6   127/64     0x80 (-2: never produced, see below)
``fp8_e4m3``  8     S EEEE MMM, bias 7        448        S.1111.111 (NaN)
``fp8_e5m2``  8     S EEEEE MM, bias 15       57344      S.11111.xx (inf, NaN)
``fp6_e3m2``  6     S EEE MM, bias 3          28         none
``fp6_e2m3``  6     S EE MMM, bias 1          7.5        none
``fp4_e2m1``  4     S EE M, bias 1            6          none
============  ====  ========================  =========  ==========================================

Every value of every format is ``m * 2^q`` with an integer ``|m| < 2^8`` and ``q >= -16``
(``emax`` below is the exponent of the largest power of two not above the max value). A
conversion (:meth:`ElementFormat.quantize`) rounds to the nearest value, ties to the even code
(for the FP formats that is IEEE round-to-nearest-even, the code's low bit being the mantissa's
low bit), and saturates at the max value, as the spec's conversion to MX does. INT8's code 0x80
(-2.0) is legal in the spec but asymmetric; the encoder clamps to +-127/64 and the decoder
refuses 0x80, which also keeps ``2^127 * element`` finite (see ``tenzro_trainer.compression``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from tenzro_trainer.errors import PayloadError


@dataclass(frozen=True)
class ElementFormat:
    """One MX element type.

    Attributes:
        name: key in :data:`ELEMENTS`.
        bits: code width (8, 6 or 4).
        ebits, mbits, bias: exponent bits, mantissa bits and exponent bias (FP formats; INT8 has
            ``ebits = 0``, ``mbits = 6``: the fixed-point ``code * 2^-6``).
        emax: exponent of the largest normal value (``floor(log2(max value))``); the MX shared
            scale of a block is ``2^(floor(log2(amax)) - emax)`` (spec section 6.3).
        ieee_specials: the all-ones exponent encodes inf/NaN (E5M2) rather than values.
    """

    name: str
    bits: int
    ebits: int
    mbits: int
    bias: int
    emax: int
    ieee_specials: bool = False

    @cached_property
    def _tables(self) -> tuple[Tensor, Tensor]:
        values = torch.tensor([self._value(c) for c in range(1 << self.bits)], dtype=torch.float64)
        valid = ~torch.isnan(values)
        if self.name == "int8":
            valid[0x80] = False
        return values.to(torch.float32), valid

    @property
    def values(self) -> Tensor:
        """(2**bits,) float32: the value of each code (NaN for refused codes). Built in float64
        from the bit layout; every value is exact in binary32."""
        return self._tables[0]

    @property
    def valid(self) -> Tensor:
        """(2**bits,) bool: codes the decoder accepts."""
        return self._tables[1]

    @cached_property
    def grid(self) -> tuple[Tensor, Tensor]:
        """(non-negative values ascending (float64), their codes (int64)): the rounding grid."""
        half = 1 << (self.bits - 1)
        codes = torch.arange(half, dtype=torch.int64)
        if self.name == "int8":
            codes = torch.arange(128, dtype=torch.int64)
        codes = codes[self.valid[codes]]
        vals = self.values[codes].to(torch.float64)
        order = torch.argsort(vals, stable=True)
        return vals[order], codes[order]

    @property
    def max_value(self) -> float:
        """Largest finite magnitude (float)."""
        return float(self.grid[0][-1])

    def _value(self, code: int) -> float:
        if self.name == "int8":
            return (code - 256 if code >= 128 else code) / 64.0
        sign = -1.0 if code >> (self.bits - 1) else 1.0
        e = (code >> self.mbits) & ((1 << self.ebits) - 1)
        m = code & ((1 << self.mbits) - 1)
        if self.ieee_specials and e == (1 << self.ebits) - 1:
            return float("nan")
        if self.name == "fp8_e4m3" and e == 15 and m == 7:
            return float("nan")
        if e == 0:
            return sign * m * 2.0 ** (1 - self.bias - self.mbits)
        return sign * (1.0 + m / (1 << self.mbits)) * 2.0 ** (e - self.bias)

    def quantize(self, y: Tensor) -> Tensor:
        """Round ``y`` to this format's codes.

        Args:
            y: (n,) float64, finite (already divided by the block's scale).
        Returns:
            (n,) int64 codes in ``[0, 2**bits)``: nearest value, ties to the even code, saturated
            at :attr:`max_value`; zero magnitudes get the +0 code 0.
        """
        grid, codes = self.grid
        a = y.abs()
        hi = torch.searchsorted(grid, a).clamp(max=len(grid) - 1)  # first grid value >= a (or the last)
        lo = (hi - 1).clamp(min=0)
        d_lo, d_hi = a - grid[lo], grid[hi] - a
        take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (codes[hi] % 2 == 0))
        take_hi = torch.where(a >= grid[-1], torch.ones_like(take_hi), take_hi)
        idx = torch.where(take_hi, hi, lo)
        mag = codes[idx]
        negative = (y < 0) & (mag != 0)
        if self.name == "int8":
            return torch.where(negative, (256 - mag) % 256, mag)
        return torch.where(negative, mag | (1 << (self.bits - 1)), mag)

    def decode(self, codes: Tensor) -> Tensor:
        """Values of ``codes`` ((n,) int64) as (n,) float32, by table lookup (no arithmetic).

        Raises:
            PayloadError: a code outside ``[0, 2**bits)`` or one of the refused codes.
        """
        if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= 1 << self.bits):
            raise PayloadError(f"{self.name} codes must lie in [0, {1 << self.bits})")
        bad = ~self.valid[codes]
        if bool(bad.any()):
            first = int(codes[bad][0])
            raise PayloadError(f"{self.name} element code 0x{first:02x} is not a finite value "
                               f"({int(bad.sum())} such codes); MX payloads carry finite elements only")
        return self.values[codes]


ELEMENTS: dict[str, ElementFormat] = {
    f.name: f
    for f in (
        ElementFormat("int8", 8, 0, 6, 0, 0),
        ElementFormat("fp8_e4m3", 8, 4, 3, 7, 8),
        ElementFormat("fp8_e5m2", 8, 5, 2, 15, 15, ieee_specials=True),
        ElementFormat("fp6_e3m2", 6, 3, 2, 3, 4),
        ElementFormat("fp6_e2m3", 6, 2, 3, 1, 2),
        ElementFormat("fp4_e2m1", 4, 2, 1, 1, 2),
    )
}


def element_format(name: str) -> ElementFormat:
    """The :class:`ElementFormat` called ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    try:
        return ELEMENTS[name]
    except KeyError:
        raise ValueError(f"unknown MX element type {name!r}; known: {', '.join(ELEMENTS)}") from None

"""Chunked top-k sparsification with optional 2-bit values (DeMo, Peng et al. 2024,
arXiv:2411.19870; SparseLoCo, Sarfi et al. 2025, arXiv:2508.15706).

A flat float32 vector of n values is cut into chunks of ``chunk`` consecutive values (the last one
may be shorter, length L). Of each full chunk the ``k`` values of largest magnitude are kept, of the
last chunk ``min(L, ceil(k * L / chunk))`` (the same density); ties go to the lower index (a stable
sort), so the selection is a function of the values alone. Kept positions are sent as their
offsets inside the chunk, ascending, ``ceil(log2(chunk))`` bits each.

Values are sent either as float32 (``bits = 32``: exact copies) or as 2-bit codes (``bits = 2``):
bit 1 = sign, bit 0 = which of the chunk's two magnitudes ``(lo, hi)`` (a per-chunk codebook of two
float32 values, ``0 <= lo <= hi``). The two magnitudes are the means of the smaller and the larger
half of the chunk's kept magnitudes; each value takes the nearer one (ties: ``lo``). SparseLoCo's
2-bit quantizer is likewise a per-tensor lookup table; the residual of either goes into the error
feedback (:mod:`tenzro_trainer.compression.feedback`).

Decoding writes the kept values into zeros: every decoded value is +0, a float32 sent as is, or
``+-lo`` / ``+-hi`` (a copy, or a copy with its sign flipped): no arithmetic, exact everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from tenzro_trainer.compression.mx import check_vector
from tenzro_trainer.errors import PayloadError


def index_bits(chunk: int) -> int:
    """Bits of one in-chunk offset: ``max(1, ceil(log2(chunk)))``."""
    return max(1, (chunk - 1).bit_length())


def kept_per_chunk(n: int, k: int, chunk: int) -> list[int]:
    """How many values each chunk keeps: ``k`` per full chunk, ``min(L, ceil(k * L / chunk))`` for
    a last chunk of length ``L < chunk``. Length: ``ceil(n / chunk)``."""
    full, rest = divmod(n, chunk)
    counts = [k] * full
    if rest:
        counts.append(min(rest, -(-k * rest // chunk)))
    return counts


@dataclass
class Sparse:
    """The kept values of a vector.

    Attributes:
        n, k, chunk: the vector's length and the selection's parameters.
        offsets: (m,) int64, each kept value's offset inside its chunk; ascending within a chunk,
            chunks in order; ``m = sum(kept_per_chunk(n, k, chunk))``.
        values: (m,) float32, the kept values (as decoded: after 2-bit quantization when used).
    """

    n: int
    k: int
    chunk: int
    offsets: Tensor
    values: Tensor

    def positions(self) -> Tensor:
        """(m,) int64 positions in the flat vector."""
        counts = torch.tensor(kept_per_chunk(self.n, self.k, self.chunk), dtype=torch.int64)
        starts = torch.arange(counts.numel(), dtype=torch.int64) * self.chunk
        return starts.repeat_interleave(counts) + self.offsets

    def dense(self) -> Tensor:
        """(n,) float32: zeros with the kept values written in."""
        out = torch.zeros(self.n, dtype=torch.float32)
        out[self.positions()] = self.values
        return out


def select(x: Tensor, k: int, chunk: int) -> Sparse:
    """Keep the top-k magnitudes of every chunk of ``x`` ((n,) float32, finite).

    Raises:
        ValueError: ``x`` not a finite 1-D float32 tensor, or ``not 1 <= k <= chunk``.
    """
    x = check_vector(x)
    if not (isinstance(k, int) and isinstance(chunk, int) and 1 <= k <= chunk):
        raise ValueError(f"top-k needs integers 1 <= k <= chunk, got k={k!r}, chunk={chunk!r}")
    n = x.numel()
    full = n // chunk
    offsets, values = [], []
    if full:
        offsets.append(_top(x[: full * chunk].view(full, chunk), k))
    if n % chunk:
        offsets.append(_top(x[full * chunk :].view(1, -1), kept_per_chunk(n, k, chunk)[-1]))
    off = torch.cat([o.reshape(-1) for o in offsets]) if offsets else torch.zeros(0, dtype=torch.int64)
    sparse = Sparse(n, k, chunk, off, torch.zeros(0))
    sparse.values = x[sparse.positions()]
    return sparse


def _top(rows: Tensor, k: int) -> Tensor:
    """(R, C) -> (R, k) int64 column indices of the k largest |values| per row, ascending;
    ties to the lower index (stable descending sort)."""
    order = torch.sort(rows.abs(), dim=1, descending=True, stable=True).indices[:, :k]
    return torch.sort(order, dim=1).values


def two_bit(sparse: Sparse) -> tuple[Tensor, Tensor]:
    """2-bit codes and per-chunk codebook of ``sparse``'s values.

    Returns:
        (codes (m,) int64 in [0, 4): ``sign << 1 | (magnitude is hi)``,
         codebook (ceil(n / chunk), 2) float32 rows ``(lo, hi)``, ``0 <= lo <= hi``).
    """
    counts = kept_per_chunk(sparse.n, sparse.k, sparse.chunk)
    full = sparse.n // sparse.chunk
    v = sparse.values.to(torch.float64)
    parts = [] if not full else [v[: full * sparse.k].view(full, sparse.k)]
    if len(counts) > full:
        parts.append(v[full * sparse.k :].view(1, -1))
    books, codes = [], []
    for rows in parts:  # at most two groups: the full chunks, the last chunk
        a = torch.sort(rows.abs(), dim=1).values
        half = a.shape[1] // 2
        hi = a[:, half:].mean(dim=1)
        lo = a[:, :half].mean(dim=1) if half else hi
        book = torch.stack([lo, hi], dim=1).to(torch.float32)
        lo64, hi64 = book[:, :1].double(), book[:, 1:].double()
        is_hi = (rows.abs() - lo64).abs() > (hi64 - rows.abs()).abs()
        codes.append((((rows < 0).to(torch.int64) << 1) | is_hi.to(torch.int64)).reshape(-1))
        books.append(book)
    if not parts:
        return torch.zeros(0, dtype=torch.int64), torch.zeros(0, 2, dtype=torch.float32)
    return torch.cat(codes), torch.cat(books)


def decode_two_bit(codes: Tensor, book: Tensor, counts: list[int]) -> Tensor:
    """Values of 2-bit codes: ``+-lo`` or ``+-hi`` of their chunk's codebook row, by lookup.

    Raises:
        PayloadError: the codebook is not (chunks, 2) float32 with finite ``0 <= lo <= hi``.
    """
    if book.dtype != torch.float32 or book.shape != (len(counts), 2):
        raise PayloadError(f"top-k codebook is {book.dtype} {tuple(book.shape)}, expected float32 ({len(counts)}, 2)")
    if not bool(torch.isfinite(book).all()) or bool((book[:, 0] < 0).any()) or bool((book[:, 0] > book[:, 1]).any()):
        raise PayloadError("top-k codebook rows must be finite with 0 <= lo <= hi")
    chunk_of = torch.arange(len(counts), dtype=torch.int64).repeat_interleave(torch.tensor(counts, dtype=torch.int64))
    mag = book[chunk_of, codes & 1]
    return torch.where((codes >> 1).bool(), -mag, mag)


def check_offsets(offsets: Tensor, n: int, k: int, chunk: int) -> None:
    """Raise PayloadError unless ``offsets`` ((m,) int64) are inside their chunk and strictly
    ascending within it (so the kept positions are distinct and decoding is a plain write)."""
    counts = torch.tensor(kept_per_chunk(n, k, chunk), dtype=torch.int64)
    chunk_of = torch.arange(counts.numel(), dtype=torch.int64).repeat_interleave(counts)
    length = torch.full_like(chunk_of, chunk)
    if n % chunk:
        length[chunk_of == counts.numel() - 1] = n % chunk
    outside = (offsets < 0) | (offsets >= length)
    if bool(outside.any()):
        i = int(outside.nonzero()[0])
        raise PayloadError(f"top-k chunk {int(chunk_of[i])}: offset {int(offsets[i])} is outside [0, {int(length[i])})")
    same = chunk_of[1:] == chunk_of[:-1]
    bad = same & (offsets[1:] <= offsets[:-1])
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        raise PayloadError(f"top-k chunk {int(chunk_of[i])}: offsets are not strictly ascending "
                           f"({int(offsets[i])} then {int(offsets[i + 1])})")

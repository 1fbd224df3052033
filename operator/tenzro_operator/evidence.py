"""Evidence for a slash, built the way the registry checks it (contracts/PROTOCOL.md §4).

The syncer (or any watcher) never reports a submission on its word: a non-finite payload is shown
by opening one committed chunk, a norm outlier by the signed sums of squares of every submission
of the fragment, and anything it cannot fetch or decode is challenged for availability. This
module holds the pure parts: which submissions the registry's norm screen calls outliers
(`EvidenceVerifier.normOutlier`, bit for bit) and the opening that shows a non-finite value.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch

from tenzro_operator.chain import ChunkOpening
from tenzro_trainer import canonical
from tenzro_trainer.commitment import CHUNK_VALUES, ChunkTree

__all__ = ["bits_to_f32", "non_finite_opening", "norm_outliers"]


def bits_to_f32(bits: int) -> float:
    """The binary32 value of a uint32 bit pattern (as a Python float)."""
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def _keys(bits: list[int]) -> torch.Tensor:
    x = torch.from_numpy(np.array(bits, dtype=np.uint32).view(np.float32).copy())
    return canonical.total_order_key(x)


def norm_outliers(sums: Mapping[int, int], screen_sq_bits: int) -> set[int]:
    """Trainer indices whose signed sum of squares exceeds the fragment's screen.

    The rule of ``EvidenceVerifier.normOutlier``: with ``m`` = CoordinateMedian (binary32,
    PROTOCOL.md §1) of every submitted sum (the outliers' own included), a sum ``s`` is an outlier
    iff ``s > fl(screenSq * m)`` in IEEE totalOrder (so a NaN sum always is).

    Args:
        sums: trainer index -> binary32 bit pattern of its signed ``payloadSumsq``, one entry per
            submission of the fragment in the round.
        screen_sq_bits: the task's ``normScreenSq`` bits; 0 means no screen (returns an empty set).
    """
    if not sums or screen_sq_bits == 0:
        return set()
    order = sorted(sums)
    bound_key = _bound_key([sums[i] for i in order], screen_sq_bits)
    keys = _keys([sums[i] for i in order])
    return {i for i, k in zip(order, keys.tolist()) if k > bound_key}


def _bound_key(reference: list[int], screen_sq_bits: int) -> int:
    """The totalOrder key of fl(screenSq * m), m the CoordinateMedian (binary32) of ``reference``."""
    values = torch.from_numpy(np.array(reference, dtype=np.uint32).view(np.float32).copy())
    median = canonical.coordinate_median(values.reshape(-1, 1))[0]
    bound = torch.tensor([bits_to_f32(screen_sq_bits)], dtype=torch.float32) * median  # one IEEE multiply
    return int(canonical.total_order_key(bound)[0])


def exceeds_reference(sumsq_bits: int, reference: list[int], screen_sq_bits: int) -> bool:
    """Whether a signed sum of squares is over the screen against a reference the submitter does
    not control (``proveNormOutlier``, root flow, PROTOCOL.md §4): ``s > fl(screenSq * m)`` in
    totalOrder with ``m`` the CoordinateMedian (binary32) of ``reference``, the previous committed
    round's accepted sums of the fragment (bit patterns). False with no screen or no reference."""
    if not reference or screen_sq_bits == 0:
        return False
    return int(_keys([sumsq_bits])[0]) > _bound_key(list(reference), screen_sq_bits)


def non_finite_opening(tree: ChunkTree, flat: torch.Tensor) -> ChunkOpening | None:
    """The opening of the first chunk of ``tree`` that holds a NaN or infinity, or None.

    Args:
        tree: the commitment of ``flat``.
        flat: float32, shape (n,), the committed vector.
    """
    bad = (~torch.isfinite(flat)).nonzero()
    if bad.numel() == 0:
        return None
    return ChunkOpening.of(tree, int(bad[0, 0]) // CHUNK_VALUES)

"""The canonical binary32 arithmetic of protocol v2 (``contracts/PROTOCOL.md`` section 1), in torch.

Every function here computes exactly what PROTOCOL.md section 1 defines: each step is one IEEE-754
binary32 operation, rounded to nearest (ties to even), in a fixed order, with no fused multiply-add
and no flush of subnormals to zero. The results are bit-identical on the CPU, on CUDA and in the
on-chain referee (``contracts/lib/Binary32.sol``), which recomputes single coordinates in fraud proofs.

How the code keeps that promise:

- **One torch op per IEEE operation.** A compiler may contract ``a * b + c`` into one fused
  multiply-add only inside one kernel; separate torch ops are separate kernels, so writing each
  multiply and each add as its own elementwise op forbids the fusion on CUDA and on the CPU alike.
  Never ``add(..., alpha=)``, ``addcmul``, ``lerp`` or ``torch.optim`` (their kernels compute
  ``a + alpha * b`` and may fuse it). A plain ``a + b`` or ``a - b`` is fine even where torch's
  kernel evaluates it as ``fma(b, +-1, a)``: the product by +-1 is exact, so the single rounding is
  that of the sum.
- **No reduction kernels.** ``torch.sum`` / ``torch.mean`` reorder (pairwise, tree, atomics); the
  mean here is K separate elementwise additions in row order, then one division.
- **No CPU scalars as operands on CUDA.** CUDA's ``div`` by a CPU scalar multiplies by the
  reciprocal (not correctly rounded); every constant (``n``, ``2``, ``lr``, ``mu``) is first made a
  0-dim float32 tensor on the operand's device.
- **Sorting by integer keys.** ``torch.sort`` / ``minimum`` on floats leave the order of ``-0`` and
  ``+0`` unspecified; here the float bits are mapped to int32 keys whose order is IEEE totalOrder,
  the keys are sorted (integer comparisons are exact everywhere) and mapped back. Equal keys are
  equal bit patterns, so the sorted column is unique, whichever stable or unstable sort ran.
- **Subnormals.** CUDA kernels in PyTorch are built without ``-ftz``; on the CPU, torch keeps
  subnormals unless someone calls ``torch.set_flush_denormal(True)``, which must not happen in a
  process that aggregates.

Inputs to the rules are finite (payloads with NaN or inf are rejected before aggregation,
PROTOCOL.md section 3); intermediate results may overflow to +-inf, which propagates under IEEE
rules. A NaN result (reachable in the outer step, e.g. ``inf - inf`` after an overflow) is always
the canonical quiet NaN ``0x7FC00000``, as ``contracts/lib/Binary32.sol`` and
``tenzro_trainer.commitment`` return it: IEEE leaves NaN payloads open, and x86 (``0xFFC00000``)
and CUDA (``0x7FFFFFFF``) differ. Whether a result is NaN is the same everywhere (+, -, *, / give
NaN exactly when an operand is NaN or the operation is invalid), so mapping every NaN of a
function's output to ``0x7FC00000`` is the same as doing it after every operation.
All functions take float32 tensors on any one device and return tensors on that device.

Usage::

    agg = trimmed_mean(x, 2000)                     # x: (K, N) float32, rows in ascending trainer index
    p, m = nesterov_step(p, m, agg, lr=0.7, mu=0.9)  # m starts as torch.zeros_like(p) (+0)
"""

from __future__ import annotations

import torch
from torch import Tensor

from tenzro_trainer.errors import AggregationError

__all__ = ["f32", "total_order_key", "sort_total_order", "mean", "trimmed_mean", "coordinate_median",
           "nesterov_step"]

_SIGN_CLEAR = 0x7FFFFFFF
CANONICAL_NAN = 0x7FC00000
"""Bit pattern of every NaN result (``Binary32.QNAN``)."""
_NETWORK_MAX_ROWS = 16  # up to here a min/max transposition network on the keys beats torch.sort (CPU)


def f32(x: float) -> float:
    """The binary32 value nearest to ``x`` (round to nearest, ties to even), as a Python float.

    Overflow gives +-inf (no exception). Used for the spec's ``lr`` and ``momentum``
    (PROTOCOL.md section 1, outer Nesterov step: ``lr = float32(spec lr)``).
    """
    return float(torch.tensor(float(x), dtype=torch.float32).item())


def _check(x: Tensor, dims: int, what: str) -> None:
    if x.dtype != torch.float32:
        raise TypeError(f"{what}: canonical arithmetic is float32 only, got {x.dtype}")
    if x.dim() != dims:
        raise ValueError(f"{what}: expected a {dims}-D tensor, got shape {tuple(x.shape)}")


def _const(value: float, like: Tensor) -> Tensor:
    """``value`` rounded to binary32, as a 0-dim float32 tensor on ``like``'s device (not a CPU scalar)."""
    return torch.tensor(float(value), dtype=torch.float32, device=like.device)


def _canon_nan(x: Tensor) -> Tensor:
    """``x`` with every NaN replaced by the bit pattern ``CANONICAL_NAN`` (a new tensor)."""
    qnan = torch.tensor(CANONICAL_NAN, dtype=torch.int32, device=x.device).view(torch.float32)
    return torch.where(torch.isnan(x), qnan, x)


def total_order_key(x: Tensor) -> Tensor:
    """int32 keys whose signed order is the IEEE-754 totalOrder of the float32 values ``x``.

    The bit pattern ``u`` maps to ``u ^ 0x7FFFFFFF`` when the sign bit is set, else to ``u``
    (PROTOCOL.md section 1, "Sorting"): ``-inf < ... < -0 < +0 < ... < +inf``; a NaN with the sign
    bit clear sorts above +inf, one with it set below -inf. The map is its own inverse.

    Args:
        x: float32 tensor of any shape, any device.
    Returns:
        int32 tensor of the same shape and device.
    Raises:
        TypeError: ``x`` is not float32.
    """
    if x.dtype != torch.float32:
        raise TypeError(f"total_order_key: float32 only, got {x.dtype}")
    return _flip(x.view(torch.int32))


def _flip(u: Tensor) -> Tensor:
    """``u ^ 0x7FFFFFFF`` where ``u < 0``, else ``u`` (int32, new tensor): ``u >> 31`` is -1 or 0
    (arithmetic shift), masked to 0x7FFFFFFF or 0, xor-ed in. In-place on one temporary: several
    times faster than ``torch.where`` on the CPU."""
    mask = u >> 31
    mask.bitwise_and_(_SIGN_CLEAR)
    return mask.bitwise_xor_(u)


def _from_key(k: Tensor) -> Tensor:
    return _flip(k).view(torch.float32)


def _sort_keys(keys: Tensor) -> Tensor:
    """Each column of the int32 ``keys`` (K, N) ascending. For K <= 16 an odd-even transposition
    network of elementwise integer min / max (Knuth, TAOCP vol. 3, 5.3.4; several times faster than
    ``torch.sort`` along dim 0 on the CPU), else ``torch.sort``: both exact, same result."""
    k = keys.shape[0]
    if k > _NETWORK_MAX_ROWS:
        return torch.sort(keys, dim=0).values
    rows = list(keys.unbind(0))
    for rnd in range(k):
        for i in range(rnd % 2, k - 1, 2):
            rows[i], rows[i + 1] = torch.minimum(rows[i], rows[i + 1]), torch.maximum(rows[i], rows[i + 1])
    return torch.stack(rows) if rows else keys.clone()


def sort_total_order(x: Tensor) -> Tensor:
    """Sort each column of ``x`` ascending by IEEE-754 totalOrder (PROTOCOL.md section 1, "Sorting").

    Exact and deterministic on every device: the int32 keys of `total_order_key` are sorted and
    mapped back bit for bit, so ``-0`` always precedes ``+0`` and the result does not depend on the
    order of the rows.

    Args:
        x: (K, N) float32.
    Returns:
        (K, N) float32, new tensor, same device.
    Raises:
        TypeError / ValueError: not float32 / not 2-D.
    """
    _check(x, 2, "sort_total_order")
    return _from_key(_sort_keys(total_order_key(x)))


def _sum_rows(x: Tensor) -> Tensor:
    acc = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)  # +0
    for i in range(x.shape[0]):  # K separate correctly rounded additions, in row order
        acc = acc + x[i]
    return acc


def mean(x: Tensor) -> Tensor:
    """Coordinate-wise ``Mean`` of PROTOCOL.md section 1: ``acc = +0``; ``acc = fl(acc + x_i)`` for
    the rows i = 1..K in the given order; ``fl(acc / K)`` with K as binary32 (exact for K <= 2^24).

    Args:
        x: (K, N) float32, rows in the protocol's order (ascending trainer index).
    Returns:
        (N,) float32 on ``x``'s device.
    Raises:
        AggregationError: K == 0. TypeError / ValueError: not float32 / not 2-D.
    """
    _check(x, 2, "mean")
    n = x.shape[0]
    if n == 0:
        raise AggregationError("Mean of no submissions")
    return _canon_nan(_sum_rows(x) / _const(n, x))


def _trim_count(n: int, alpha_bps: int) -> int:
    if int(alpha_bps) < 0:
        raise AggregationError(f"TrimmedMean alpha_bps must be >= 0, got {alpha_bps}")
    return (n * int(alpha_bps)) // 10000


def trimmed_mean(x: Tensor, alpha_bps: int) -> Tensor:
    """Coordinate-wise ``TrimmedMean(alpha_bps)`` of PROTOCOL.md section 1 (Yin et al. 2018, Def. 2):
    ``b = floor(K * alpha_bps / 10000)``, requires ``2b < K``; sort each column by totalOrder;
    `mean` of the sorted values ``b .. K-b-1``, summed in sorted order.

    Args:
        x: (K, N) float32 (row order does not matter: the values are sorted first).
        alpha_bps: trim fraction per end in basis points (2000 = 20%), >= 0.
    Returns:
        (N,) float32 on ``x``'s device.
    Raises:
        AggregationError: K == 0, alpha_bps < 0, or 2b >= K.
    """
    _check(x, 2, "trimmed_mean")
    n = x.shape[0]
    if n == 0:
        raise AggregationError("TrimmedMean of no submissions")
    b = _trim_count(n, alpha_bps)
    if 2 * b >= n:
        raise AggregationError(f"TrimmedMean({alpha_bps} bps) trims {b} from each end of {n} submissions")
    keys = _sort_keys(total_order_key(x))
    return mean(_from_key(keys[b : n - b]))  # only the kept rows are mapped back


def coordinate_median(x: Tensor) -> Tensor:
    """Coordinate-wise ``CoordinateMedian`` of PROTOCOL.md section 1 (Yin et al. 2018, Def. 1): sort
    each column by totalOrder; K odd: ``s_{(K-1)/2}``; K even: ``fl(fl(s_{K/2-1} + s_{K/2}) / 2)``.

    Args:
        x: (K, N) float32 (row order does not matter).
    Returns:
        (N,) float32 on ``x``'s device.
    Raises:
        AggregationError: K == 0.
    """
    _check(x, 2, "coordinate_median")
    n = x.shape[0]
    if n == 0:
        raise AggregationError("CoordinateMedian of no submissions")
    keys = _sort_keys(total_order_key(x))
    if n % 2:
        return _canon_nan(_from_key(keys[(n - 1) // 2]))
    return _canon_nan((_from_key(keys[n // 2 - 1]) + _from_key(keys[n // 2])) / _const(2.0, x))


def nesterov_step(p: Tensor, m: Tensor, g: Tensor, lr: float, mu: float,
                  nesterov: bool = True) -> tuple[Tensor, Tensor]:
    """One outer SGD step with (Nesterov) momentum, PROTOCOL.md section 1 (dampening 0, no weight
    decay; Sutskever et al. 2013 in ``torch.optim.SGD``'s form), with ``lr`` and ``mu`` first
    rounded to binary32::

        m' = fl(fl(mu * m) + g)
        u  = fl(g + fl(mu * m'))      # without Nesterov: u = m'
        p' = fl(p - fl(lr * u))

    Args:
        p: parameters, float32, any shape.
        m: momentum buffer, same shape and device (starts at +0: ``torch.zeros_like(p)``).
        g: aggregated pseudo-gradient, same shape and device (+0 where a fragment got no submission).
        lr: outer learning rate (the spec's value; rounded to binary32 here).
        mu: momentum (rounded to binary32 here).
        nesterov: Nesterov's look-ahead (True) or plain heavy-ball momentum.
    Returns:
        ``(p', m')``: new float32 tensors on the same device (NaN as ``CANONICAL_NAN``); the
        inputs are not modified.
    Raises:
        TypeError: a tensor is not float32. ValueError: shapes or devices differ.
    """
    for t, what in ((p, "p"), (m, "m"), (g, "g")):
        if t.dtype != torch.float32:
            raise TypeError(f"nesterov_step: {what} must be float32, got {t.dtype}")
        if t.shape != p.shape or t.device != p.device:
            raise ValueError(f"nesterov_step: {what} is {tuple(t.shape)} on {t.device}, "
                             f"p is {tuple(p.shape)} on {p.device}")
    lr_t, mu_t = _const(lr, p), _const(mu, p)
    m_new = (mu_t * m) + g
    u = g + (mu_t * m_new) if nesterov else m_new
    p_new = p - (lr_t * u)
    return _canon_nan(p_new), _canon_nan(m_new)

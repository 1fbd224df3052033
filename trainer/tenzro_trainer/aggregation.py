"""Aggregation rules over K pseudo-gradients of one fragment, and payload validation.

Rules (each maps ``{submitter: {name: tensor}}`` to ``{name: tensor}``, fp32):

- :class:`Mean`: the coordinate-wise mean (FedAvg / DiLoCo's all-reduce; McMahan et al. 2017).
- :class:`TrimmedMean`: per coordinate, drop the ``b = floor(K * alpha_bps / 10000)`` largest and
  smallest values and average the rest (Yin et al. 2018, "Byzantine-robust distributed learning:
  towards optimal statistical rates", ICML, Sec. 3, Definition 2).
- :class:`CoordinateMedian`: the coordinate-wise median, the mean of the two middle values when K
  is even (Yin et al. 2018, Definition 1).
- :class:`CenteredClip`: iterated clipping around the previous aggregate (Karimireddy, He & Jaggi
  2021); stateful, not coordinate-wise, simulator only.
- :class:`Krum`: the submission whose summed squared distance to its ``K - f - 2`` nearest
  neighbours is smallest (Blanchard et al. 2017, "Machine learning with adversaries: Byzantine
  tolerant gradient descent", NeurIPS, Sec. 4); ``m > 1`` averages the m best (Multi-Krum).

Determinism: submissions are ordered by ascending submitter key before anything is computed
(callers key them by :func:`trainer_key`, so the order is ascending trainer index), and Mean, TrimmedMean and CoordinateMedian reduce through :mod:`tenzro_trainer.canonical`,
the binary32 arithmetic of ``contracts/PROTOCOL.md`` section 1: the same inputs in any order give
bit-for-bit the same aggregate on the CPU, on CUDA and in the on-chain referee. Rows stay on the
device of the submitted tensors. Krum's scores are float64 and not part of the canonical
arithmetic (the protocol refuses Krum in Open-tier tasks); ties go to the smaller key.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch
from torch import Tensor

from tenzro_trainer import canonical
from tenzro_trainer.errors import AggregationError, PayloadRejected

Update = Mapping[str, Tensor]


def trainer_key(index: int) -> str:
    """The submitter key of trainer ``index`` (its on-chain enrollment index, 0..255): zero-padded,
    so the rules' ascending key order is ascending trainer index, PROTOCOL.md section 1's input
    order (the order the on-chain referee sums in). Raises ValueError for a negative index."""
    if index < 0:
        raise ValueError(f"trainer index must be >= 0, got {index}")
    return f"{index:05d}"


def _stack(updates: Mapping[str, Update]) -> tuple[list[str], list[tuple[str, torch.Size]], Tensor]:
    """Order by ascending submitter key, check the names and shapes agree, flatten to (K, P) fp32.

    Each row is the submission's tensors in ascending name order, each flattened row-major (the
    vector layout of PROTOCOL.md section 2). The rows are on the device of the first submission's
    first tensor (others are moved there)."""
    if not updates:
        raise AggregationError("no submissions to aggregate")
    keys = sorted(updates)
    first = updates[keys[0]]
    layout = [(n, first[n].shape) for n in sorted(first)]
    device = first[layout[0][0]].device if layout else torch.device("cpu")
    rows = []
    for k in keys:
        u = updates[k]
        if sorted(u) != [n for n, _ in layout]:
            raise AggregationError(f"submission {k!r} has tensors {sorted(u)}, expected {[n for n, _ in layout]}")
        for n, shape in layout:
            if u[n].shape != shape:
                raise AggregationError(f"submission {k!r}: tensor {n!r} has shape {tuple(u[n].shape)}, expected {tuple(shape)}")
        rows.append(torch.cat([u[n].detach().to(device, torch.float32).reshape(-1) for n, _ in layout]))
    return keys, layout, torch.stack(rows)


def _unflatten(vec: Tensor, layout: list[tuple[str, torch.Size]]) -> dict[str, Tensor]:
    out, i = {}, 0
    for n, shape in layout:
        k = math.prod(shape)
        out[n] = vec[i : i + k].reshape(shape).clone()
        i += k
    return out


class Rule:
    """Base class: ``rule(updates)`` with ``updates = {submitter: {name: tensor}}`` returns
    ``{name: fp32 tensor}`` on the submissions' device.

    The rows of the (K, P) matrix that `reduce` gets are the submissions in ascending key order
    (Python string order). Protocol v2 callers key submissions by zero-padded trainer index
    (``"0003"``), so the rows are in ascending trainer index, the order PROTOCOL.md section 1 sums
    in. Only `Mean` (and Krum's average of its picks) depends on that order; the sorting rules do not.

    Raises:
        AggregationError: no submissions, or their names / shapes disagree.
    """

    name = "Rule"

    def __call__(self, updates: Mapping[str, Update]) -> dict[str, Tensor]:
        keys, layout, x = _stack(updates)
        return _unflatten(self.reduce(x), layout)

    def reduce(self, x: Tensor) -> Tensor:  # (K, P) -> (P,)
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.name}()"


class Mean(Rule):
    """Coordinate-wise mean (not robust: one attacker moves it arbitrarily far):
    `canonical.mean`, summed in row order."""

    name = "Mean"

    def reduce(self, x: Tensor) -> Tensor:
        return canonical.mean(x)


class TrimmedMean(Rule):
    """Coordinate-wise trimmed mean, trimming ``floor(K * alpha_bps / 10000)`` from each end
    (Yin et al. 2018). ``alpha_bps`` is in basis points: 2000 = 20%. Computed by
    `canonical.trimmed_mean` (totalOrder sort, kept values summed in sorted order).

    Raises:
        AggregationError: the trim would leave nothing (2b >= K).
    """

    name = "TrimmedMean"

    def __init__(self, alpha_bps: int = 1000):
        if not 0 <= int(alpha_bps) < 5000:
            raise AggregationError(f"TrimmedMean alpha_bps must be in [0, 5000), got {alpha_bps}")
        self.alpha_bps = int(alpha_bps)

    def trim_count(self, k: int) -> int:
        return (k * self.alpha_bps) // 10000

    def reduce(self, x: Tensor) -> Tensor:
        return canonical.trimmed_mean(x, self.alpha_bps)

    def __repr__(self) -> str:
        return f"TrimmedMean(alpha_bps={self.alpha_bps})"


class CoordinateMedian(Rule):
    """Coordinate-wise median (Yin et al. 2018); for even K the mean of the two middle values
    (`canonical.coordinate_median`: totalOrder sort, ``fl(fl(a + b) / 2)``)."""

    name = "CoordinateMedian"

    def reduce(self, x: Tensor) -> Tensor:
        return canonical.coordinate_median(x)


class Krum(Rule):
    """Krum / Multi-Krum (Blanchard et al. 2017). Needs ``K >= 2f + 3``.

    Score of submission i: sum of squared L2 distances to its ``K - f - 2`` nearest other
    submissions; the ``m`` lowest scores (ties: smaller submitter key) are averaged.
    """

    name = "Krum"

    def __init__(self, f: int = 1, m: int = 1):
        if int(f) < 0 or int(m) < 1:
            raise AggregationError(f"Krum needs f >= 0 and m >= 1, got f={f}, m={m}")
        self.f, self.m = int(f), int(m)
        self.last_selected: list[int] = []

    def scores(self, x: Tensor) -> Tensor:
        """(K,) float64 Krum scores of the rows of x (K, P)."""
        k = x.shape[0]
        if k < 2 * self.f + 3:
            raise AggregationError(f"Krum(f={self.f}) needs at least {2 * self.f + 3} submissions, got {k}")
        d = torch.zeros(k, k, dtype=torch.float64)
        for i in range(k):
            for j in range(i + 1, k):
                d[i, j] = d[j, i] = float(torch.linalg.vector_norm(x[i] - x[j], dtype=torch.float64)) ** 2
        n = k - self.f - 2
        return torch.stack([torch.sort(torch.cat([d[i, :i], d[i, i + 1 :]])).values[:n].sum() for i in range(k)])

    def reduce(self, x: Tensor) -> Tensor:
        sc = self.scores(x).tolist()
        order = sorted(range(len(sc)), key=lambda i: (sc[i], i))
        self.last_selected = order[: self.m]
        return canonical.mean(x[self.last_selected])

    def __repr__(self) -> str:
        return f"Krum(f={self.f}, m={self.m})"


class CenteredClip(Rule):
    """Centered clipping (Karimireddy, He & Jaggi 2021, "Learning from History for Byzantine Robust
    Optimization", ICML, Algorithm 2), with history: starting from the center ``v`` (this rule's
    previous output, the coordinate median of the first round's inputs),
    ``iters`` times ``v <- v + (1/K) sum_i (x_i - v) * min(1, tau / ||x_i - v||)`` over the
    fragment's whole vector. An input farther than ``tau`` from the center moves it by at most
    ``tau / K``, so f attackers shift a round's aggregate by at most ``f * tau / K`` per iteration.

    Stateful: use one instance per fragment (the center is that fragment's history). Not
    coordinate-wise (the clip factor depends on whole-vector norms), so no single coordinate proves
    it wrong: it is for the simulator and a future tier, never an Open-tier task (the registry's
    rule enum has no entry for it). float32 tensor arithmetic, not the canonical one.

    Args:
        tau: clipping radius, in the pseudo-gradient's units (L2 norm of one fragment); > 0.
        iters: clipping iterations per round (>= 1; the paper's analysis uses 1 with momentum).
    Raises:
        AggregationError: tau <= 0 or iters < 1.
    """

    name = "CenteredClip"

    def __init__(self, tau: float = 1.0, iters: int = 3):
        if not float(tau) > 0 or int(iters) < 1:
            raise AggregationError(f"CenteredClip needs tau > 0 and iters >= 1, got tau={tau}, iters={iters}")
        self.tau, self.iters = float(tau), int(iters)
        self.center: Tensor | None = None

    def reduce(self, x: Tensor) -> Tensor:
        v = canonical.coordinate_median(x) if self.center is None or self.center.shape != x.shape[1:] else self.center
        for _ in range(self.iters):
            diff = x - v
            norms = torch.linalg.vector_norm(diff, dim=1, keepdim=True)
            scale = torch.clamp(self.tau / torch.clamp(norms, min=1e-30), max=1.0)
            v = v + (diff * scale).mean(dim=0)
        self.center = v.detach().clone()
        return v

    def __repr__(self) -> str:
        return f"CenteredClip(tau={self.tau:g}, iters={self.iters})"


RULES = {"Mean": Mean, "TrimmedMean": TrimmedMean, "CoordinateMedian": CoordinateMedian, "Krum": Krum,
         "CenteredClip": CenteredClip}
_ALIASES = {"mean": "Mean", "trimmedmean": "TrimmedMean", "trimmed_mean": "TrimmedMean", "median": "CoordinateMedian",
            "coordinatemedian": "CoordinateMedian", "coordinate_median": "CoordinateMedian", "krum": "Krum",
            "centeredclip": "CenteredClip", "centered_clip": "CenteredClip"}


def build_rule(name: str, params: Mapping[str, object] | None = None) -> Rule:
    """A rule from the task spec's rule name and parameters.

    ``"Mean"``; ``"TrimmedMean"`` with ``alpha_bps``; ``"CoordinateMedian"``; ``"Krum"`` with ``f``
    (and optional ``m``); ``"CenteredClip"`` with ``tau`` (float) and optional ``iters``. Names are
    matched case-insensitively (``"trimmed_mean"`` works too).

    Raises:
        AggregationError: unknown rule or parameters.
    """
    key = _ALIASES.get(name.replace("-", "_").lower(), name)
    if key not in RULES:
        raise AggregationError(f"unknown aggregation rule {name!r}; known: {sorted(RULES)}")
    try:
        return RULES[key](**{k: (float(v) if k == "tau" else int(v)) for k, v in (params or {}).items()})
    except TypeError as exc:
        raise AggregationError(f"bad parameters {dict(params or {})} for {key}: {exc}") from exc


# ---------------------------------------------------------------- validation


def payload_norm(tensors: Mapping[str, Tensor]) -> float:
    """Global L2 norm of a payload (fp64 accumulation over the sorted names)."""
    total = 0.0
    for n in sorted(tensors):
        total += float(torch.linalg.vector_norm(tensors[n].detach(), dtype=torch.float64)) ** 2
    return math.sqrt(total)


def validate_payload(
    tensors: Mapping[str, Tensor],
    expected_shapes_dtypes: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
    norm_multiple: float | None = None,
    median_norm: float | None = None,
) -> float:
    """Check one decoded pseudo-gradient against the fragment's layout.

    Checks, in order: the set of names; each tensor's shape and dtype; that every value is finite;
    and, when ``norm_multiple`` and ``median_norm`` are given, that the payload's L2 norm is at
    most ``norm_multiple * median_norm``.

    Returns:
        the payload's L2 norm.
    Raises:
        PayloadRejected: with ``reason`` in {"names", "shape", "dtype", "non_finite", "norm"}
            and the offending tensor's name.
    """
    got, want = set(tensors), set(expected_shapes_dtypes)
    if got != want:
        missing, extra = sorted(want - got), sorted(got - want)
        raise PayloadRejected("names", f"missing {missing}, unexpected {extra}",
                              tensor=(missing or extra)[0])
    for n in sorted(want):
        shape, dtype = expected_shapes_dtypes[n]
        t = tensors[n]
        if tuple(t.shape) != tuple(shape):
            raise PayloadRejected("shape", f"shape {tuple(t.shape)}, expected {tuple(shape)}", tensor=n)
        if t.dtype != dtype:
            raise PayloadRejected("dtype", f"dtype {t.dtype}, expected {dtype}", tensor=n)
        if not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise PayloadRejected("non_finite", f"{bad} non-finite value(s) (NaN or inf)", tensor=n)
    norm = payload_norm(tensors)
    if norm_multiple is not None and median_norm is not None and norm > norm_multiple * median_norm:
        raise PayloadRejected(
            "norm", f"L2 norm {norm:.6g} exceeds {norm_multiple:g} x median norm {median_norm:.6g}"
        )
    return norm


def screen_payloads(
    payloads: Mapping[str, Mapping[str, Tensor]],
    expected_shapes_dtypes: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
    norm_multiple: float | None = 10.0,
) -> tuple[dict[str, Mapping[str, Tensor]], dict[str, PayloadRejected]]:
    """Validate a round's payloads of one fragment in two passes: structure and finiteness first,
    then the norm test against the median norm of the structurally valid ones.

    Returns:
        (accepted {submitter: tensors}, rejected {submitter: PayloadRejected}).
    """
    accepted, rejected, norms = {}, {}, {}
    for k in sorted(payloads):
        try:
            norms[k] = validate_payload(payloads[k], expected_shapes_dtypes)
            accepted[k] = payloads[k]
        except PayloadRejected as exc:
            rejected[k] = exc
    if norm_multiple is not None and norms:
        med = float(torch.tensor(sorted(norms.values()), dtype=torch.float64).median())
        for k in sorted(norms):
            if norms[k] > norm_multiple * med:
                rejected[k] = PayloadRejected(
                    "norm", f"L2 norm {norms[k]:.6g} exceeds {norm_multiple:g} x median norm {med:.6g}"
                )
                del accepted[k]
    return accepted, rejected

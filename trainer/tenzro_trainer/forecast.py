"""Forecasting with a trained model on raw series of any length, for any horizon.

What a user of the sealed model (``tenzro forecast``) and the zero-shot benchmark both need:

- **Histories of any length**: the last ``context_len`` points are used; a shorter history is
  left-padded with NaN for a masked model (``ModelConfig.masked``: the model sees the padding
  mask) or with its first value for an unmasked one.
- **Raw units**: every window is first standardized by its own observed mean and std (a flat
  history by ``|mean|``, or 1), so the model's std floor is relative, then mapped back.
- **Rolling out** (TimesFM / Chronos-Bolt decoding): for horizons longer than the head's, the
  median (the point forecast of a point head) is appended to the context and the model is called
  again until ``h`` steps exist; each call's quantiles are kept for its steps.
- **Flip invariance and positivity** (TimesFM 2.5's ``force_flip_invariance`` / ``infer_is_positive``,
  both on in ``tenzro forecast``): the forecast of a series averaged with the negated forecast of the
  negated series; a series with no negative value gets no negative quantile.
- **Quantile levels**: the model's own levels, or others by linear interpolation between them
  (clamped to the outermost level); a point head answers its point for every level.

Usage::

    fc = forecast_histories(model, [y1, y2], h=48, quantiles=(0.1, 0.5, 0.9))   # (2, 3, 48)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from tenzro_trainer.errors import DataError
from tenzro_trainer.models.common import PatchForecaster

MIN_HISTORY = 3


def _prepare(history: np.ndarray, L: int, masked: bool) -> tuple[np.ndarray, float, float]:
    y = np.asarray(history, dtype="float64")[-L:]
    if not masked and np.isnan(y).any():
        idx = np.arange(len(y))
        ok = ~np.isnan(y)
        y = np.interp(idx, idx[ok], y[ok])
    m = float(np.nanmean(y))
    s = float(np.nanstd(y))
    s = s if s > 1e-12 * max(1.0, abs(m)) else (abs(m) if abs(m) > 0 else 1.0)
    z = (y - m) / s
    if len(z) < L:
        pad = np.full(L - len(z), np.nan if masked else z[~np.isnan(z)][0])
        z = np.concatenate([pad, z])
    return z, m, s


def interpolate_quantiles(fc: np.ndarray, levels: Sequence[float], wanted: Sequence[float]) -> np.ndarray:
    """Map (n, len(levels), h) quantile forecasts to the ``wanted`` levels by linear interpolation
    (clamped outside ``levels``). A single level (a point head) is repeated."""
    if len(levels) == 1:
        return np.repeat(fc, len(wanted), axis=1)
    levels = np.asarray(levels)
    out = np.empty((fc.shape[0], len(wanted), fc.shape[2]))
    for j, q in enumerate(wanted):
        k = int(np.clip(np.searchsorted(levels, q) - 1, 0, len(levels) - 2))
        w = float(np.clip((q - levels[k]) / (levels[k + 1] - levels[k]), 0.0, 1.0))
        out[:, j] = (1 - w) * fc[:, k] + w * fc[:, k + 1]
    return out


def forecast_histories(model: PatchForecaster, histories: Sequence[np.ndarray], h: int,
                       quantiles: Sequence[float] | None = None, batch_size: int = 256,
                       flip: bool = False, infer_positive: bool = False) -> np.ndarray:
    """Quantile forecasts of ``h`` steps after each history, in the histories' units.

    Args:
        histories: 1-D float arrays, any lengths >= ``MIN_HISTORY`` observed points (NaN = missing).
        h: forecast length (any positive integer; rolls out past the model's horizon).
        quantiles: levels to return (default: the model's levels, or ``(0.5,)`` for a point head).
        flip: make the forecast flip-invariant: average the forecast of each history with the
            negated forecast of the negated history (its level ``q`` from the flipped forecast's
            ``1 - q``), so that negating a series negates its forecast exactly; TimesFM 2.5's
            ``ForecastConfig.force_flip_invariance``. Twice the model calls.
        infer_positive: a history with no negative value gets no negative forecast (every level
            clipped at 0: counts, sales, irradiance at night); TimesFM 2.5's ``infer_is_positive``.
    Returns:
        (n, len(quantiles), h) float64, non-decreasing along the quantile axis.
    Raises:
        DataError: a history with fewer than ``MIN_HISTORY`` observed points, or ``h < 1``.
    """
    if h < 1:
        raise DataError(f"forecast horizon must be positive, got {h}")
    histories = [np.asarray(y, dtype="float64") for y in histories]
    for i, y in enumerate(histories):
        if int(np.sum(~np.isnan(y))) < MIN_HISTORY:
            raise DataError(f"history {i} has fewer than {MIN_HISTORY} observed points")
    wanted = tuple(quantiles) if quantiles is not None else (model.quantile_levels or (0.5,))
    fc = _forecast(model, histories, h, wanted, batch_size)
    if flip:
        # the negated histories' forecast at levels 1 - wanted (asked in ascending order, then
        # reversed): its row j negated is level wanted[j] of the series
        mirrored = _forecast(model, [-y for y in histories], h,
                             [1.0 - q for q in reversed(wanted)], batch_size)[:, ::-1]
        fc = np.sort((fc - mirrored) / 2, axis=1)
    if infer_positive:
        positive = np.array([np.nanmin(y) >= 0 for y in histories])
        fc[positive] = np.maximum(fc[positive], 0.0)
    return fc


@torch.no_grad()
def _forecast(model: PatchForecaster, histories: Sequence[np.ndarray], h: int, wanted: Sequence[float],
              batch_size: int) -> np.ndarray:
    """`forecast_histories` without its checks and flip: (n, len(wanted), h) float64, ``wanted``
    in ascending order."""
    levels = model.quantile_levels or (0.5,)
    model.eval()
    device = next(model.parameters()).device
    L, H = model.context_len, model.horizon
    med = levels.index(0.5) if 0.5 in levels else 0
    out = []
    for b in range(0, len(histories), batch_size):
        prep = [_prepare(y, L, model.masked) for y in histories[b : b + batch_size]]
        ctx = torch.tensor(np.stack([p[0] for p in prep]), dtype=torch.float32, device=device)
        steps = []
        while sum(s.shape[-1] for s in steps) < h:
            fc = model.forecast_quantiles(ctx)  # (B, n_q, H) in the standardized units
            steps.append(fc.cpu().double())
            ctx = torch.cat([ctx[:, H:], fc[:, med]], dim=1) if H < L else fc[:, med, -L:]
        fc = torch.cat(steps, dim=-1)[..., :h].numpy()
        m = np.array([p[1] for p in prep])[:, None, None]
        s = np.array([p[2] for p in prep])[:, None, None]
        out.append(np.sort(interpolate_quantiles(fc, levels, wanted), axis=1) * s + m)
    return np.concatenate(out)


def forecast_ensemble(models: Sequence[PatchForecaster], histories: Sequence[np.ndarray], h: int,
                      quantiles: Sequence[float] | None = None, flip: bool = False,
                      infer_positive: bool = False) -> np.ndarray:
    """The members' quantile forecasts averaged level by level (quantile averaging, "Vincentization":
    Lichtendahl, Grushka-Cockayne and Winkler, "Is it better to average probabilities or quantiles?",
    Management Science 59(7), 2013); one member is `forecast_histories` itself.

    Args:
        models: the members (for instance the sealed models of runs that differ only in their seed);
            any architectures, each answering the same ``quantiles``.
        histories, h: as `forecast_histories`.
        quantiles: levels to return (default: the first member's levels, or ``(0.5,)``).
        flip, infer_positive: as `forecast_histories`, for each member.
    Returns:
        (n, len(quantiles), h) float64, non-decreasing along the quantile axis (a mean of
        non-decreasing rows).
    Raises:
        DataError: no member, or what `forecast_histories` raises.
    """
    if not models:
        raise DataError("an ensemble needs at least one member")
    wanted = tuple(quantiles) if quantiles is not None else (models[0].quantile_levels or (0.5,))
    return np.mean([forecast_histories(m, histories, h, wanted, flip=flip, infer_positive=infer_positive)
                    for m in models], axis=0)


def model_forecaster(*models: PatchForecaster, flip: bool = False, infer_positive: bool = False):
    """``models`` (one, or the members of an ensemble: `forecast_ensemble`, with its ``flip`` and
    ``infer_positive``) as a :data:`tenzro_trainer.zeroshot.Forecaster` (the season is not used)."""

    def fn(histories, h, season, quantiles):
        return forecast_ensemble(models, histories, h, quantiles, flip=flip, infer_positive=infer_positive)

    return fn


__all__ = ["MIN_HISTORY", "forecast_ensemble", "forecast_histories", "interpolate_quantiles", "model_forecaster"]

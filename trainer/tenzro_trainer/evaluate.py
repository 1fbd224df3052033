"""Evaluation on held-out rolling-origin windows (EVALUATION.md).

- held-out loss: MSE on targets normalized by each window's context statistics (the training loss's units);
- MASE (Hyndman & Koehler 2006, "Another look at measures of forecast accuracy", IJF 22(4)):
  MAE of the forecast divided by the in-sample MAE of the seasonal naive forecast on the
  series' *training part* (season m from the manifest; 1 when unknown);
- sMAPE: ``mean(2 |y - yhat| / (|y| + |yhat|))`` in percent (terms with a zero denominator count 0),
  in the original units.

Per-series figures average that series' windows; the summary takes the mean of the per-series
losses and the geometric mean of the per-series MASE, so each series weighs the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch
from torch import Tensor

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.data.collection import seasonality
from tenzro_trainer.data.windows import EvalWindows, Split, heldout_windows
from tenzro_trainer.models import build_model
from tenzro_trainer.models.common import PatchForecaster, context_stats


def mase_scale(train: np.ndarray, season: int) -> float:
    """In-sample MAE of the seasonal naive forecast (lag ``season``; falls back to lag 1 when the
    training part is shorter than two seasons; tiny values floored at 1e-8)."""
    m = season if len(train) > 2 * season else 1
    return max(float(np.mean(np.abs(train[m:] - train[:-m]))), 1e-8)


def smape(y: np.ndarray, yhat: np.ndarray) -> float:
    """Symmetric MAPE in percent over all entries."""
    den = np.abs(y) + np.abs(yhat)
    terms = np.where(den > 0, 2 * np.abs(y - yhat) / np.where(den > 0, den, 1), 0.0)
    return float(100 * terms.mean())


@dataclass
class EvalResult:
    """Summary and per-series metrics."""

    loss: float
    mase: float  # geometric mean over series
    smape: float  # mean over series
    per_series: dict[str, dict[str, float]]

    def as_dict(self) -> dict:
        return {"loss": self.loss, "mase": self.mase, "smape": self.smape}


def normalized_mse(context: Tensor, target: Tensor, forecast: Tensor) -> Tensor:
    """Per-window MSE in the context-normalized units. All (n, ·) tensors; returns (n,).
    NaN in ``context`` (padding of short histories) is skipped by the statistics."""
    _, sigma = context_stats(context, masked=bool(torch.isnan(context).any()))
    return (((forecast - target) / sigma) ** 2).mean(dim=1)


@torch.no_grad()
def predict(model: PatchForecaster, context: Tensor, batch_size: int = 1024) -> Tensor:
    """Forecasts (n, horizon) fp32 on the CPU for contexts (n, context_len)."""
    model.eval()
    device = next(model.parameters()).device
    out = [model.forecast(context[i : i + batch_size].to(device)).cpu() for i in range(0, len(context), batch_size)]
    return torch.cat(out)


def score_forecasts(split: Split, windows: EvalWindows, forecast: Tensor, seasons: dict[str, int]) -> EvalResult:
    """Metrics of any forecasts (e.g. a statistical baseline's) on ``windows``; ``forecast`` is
    (n, horizon) in the split's per-series-scaled units."""
    losses = normalized_mse(windows.context, windows.target, forecast).numpy()
    y, f = windows.target.numpy().astype("float64"), forecast.numpy().astype("float64")
    per: dict[str, dict[str, float]] = {}
    series = np.array(windows.series)
    for u in sorted(set(windows.series)):
        idx = np.flatnonzero(series == u)
        scale = mase_scale(split.train(u), seasons.get(u, 1))
        mae = np.abs(y[idx] - f[idx]).mean(axis=1)
        per[u] = {
            "loss": float(losses[idx].mean()),
            "mase": float((mae / scale).mean()),
            "smape": smape(split.unscale(u, y[idx]), split.unscale(u, f[idx])),
            "windows": int(len(idx)),
        }
    mases = [max(v["mase"], 1e-12) for v in per.values()]
    return EvalResult(
        loss=float(np.mean([v["loss"] for v in per.values()])),
        mase=float(math.exp(np.mean(np.log(mases)))),
        smape=float(np.mean([v["smape"] for v in per.values()])),
        per_series=per,
    )


def evaluate(model: PatchForecaster, split: Split, windows: EvalWindows, seasons: dict[str, int] | None = None) -> EvalResult:
    """Held-out loss, MASE and sMAPE of ``model`` on ``windows`` (see the module docstring)."""
    return score_forecasts(split, windows, predict(model, windows.context), seasons or {})


@torch.no_grad()
def window_loss(model: PatchForecaster, windows: Tensor, batch_size: int = 1024) -> float:
    """Mean training loss (all outputs, normalized MSE) on fixed windows (n, context_len + horizon)."""
    model.eval()
    device = next(model.parameters()).device
    tot, n = 0.0, 0
    for i in range(0, len(windows), batch_size):
        b = windows[i : i + batch_size].to(device)
        tot += float(model.loss(b)) * len(b)
        n += len(b)
    return tot / n


class HeldoutEvaluator:
    """``evaluator(state) -> EvalResult`` on the same held-out windows at every call, so metrics
    of successive global weights compare like with like (up to ``windows_per_series`` rolling
    origins in each series' held-out tail; seasonal periods from the manifest). The model lives on
    ``device`` (fp32); metrics are computed on the CPU."""

    def __init__(self, model_cfg: ModelConfig, split: Split, windows_per_series: int = 12,
                 device: str | torch.device = "cpu"):
        self.split = split
        self.windows = heldout_windows(split, windows_per_series)
        self.seasons = seasonality(split.unique_ids)
        self.model = build_model(model_cfg).to(device)

    def __call__(self, state: Mapping[str, Tensor]) -> EvalResult:
        self.model.load_state_dict(dict(state))
        return evaluate(self.model, self.split, self.windows, self.seasons)

"""Zero-shot evaluation: forecasts on series no training run has seen, scored the way the field does.

Protocol (GIFT-Eval / Chronos Benchmark II conventions, adapted to single series):

- **Series**: the zero-shot collection (:mod:`tenzro_trainer.data.heldout`), disjoint from every
  training collection by source.
- **Windows**: rolling origins over the last ``test_frac`` of each series, at most
  ``max_windows`` of them, spaced ``max(horizon, test_span // max_windows)`` apart, the last one
  ending at the series' end. A forecaster sees everything before the origin (a model reads at
  most its context; the statistical baselines at most ``history`` points).
- **MASE** (Hyndman & Koehler 2006): MAE of the point forecast (the median) over the window,
  divided by the in-sample MAE of the seasonal naive forecast on the window's past (lag = the
  series' season; lag 1 when the past is shorter than two seasons). Per series: mean over windows.
- **WQL** (weighted quantile loss, the CRPS approximation of Chronos, Ansari et al. 2024, Sec. 5.2):
  ``mean_q [2 * sum_t pinball_q(y_t, yhat_q,t) / sum_t |y_t|]`` over all windows of a series,
  quantiles 0.1, ..., 0.9.
- **Relative scores**: per series, the method's score divided by SeasonalNaive's; the summary is the
  geometric mean over series (each series weighs the same), as in Chronos' aggregate relative score.

Baselines come from statsforecast (SeasonalNaive, AutoETS, AutoARIMA, AutoTheta), with their
Gaussian prediction intervals turned into quantiles (level ``100 (1 - 2q)`` for q < 0.5).

Usage::

    tasks = zero_shot_tasks()
    snaive = evaluate_forecaster(tasks, statsforecast_forecaster("SeasonalNaive"))
    mine = evaluate_forecaster(tasks, model_forecaster(model))          # tenzro_trainer.forecast
    print(relative_summary(mine, snaive))                               # {"mase": ..., "wql": ...}
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from tenzro_trainer.data.heldout import ZeroShotSeries, window_origins, zero_shot_collection
from tenzro_trainer.errors import DataError
from tenzro_trainer.evaluate import mase_scale

QUANTILES: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
BASELINES = ("SeasonalNaive", "AutoETS", "AutoARIMA", "AutoTheta")

# fn(histories, horizon, season, quantiles) -> (n_windows, n_quantiles, horizon) float64
Forecaster = Callable[[Sequence[np.ndarray], int, int, Sequence[float]], np.ndarray]


@dataclass
class ZeroShotTask:
    """One series with its evaluation origins.

    Attributes:
        y: the whole series, float64, original units.
        origins: indices of the first forecast step of each window (ascending).
    """

    unique_id: str
    y: np.ndarray
    origins: list[int]
    horizon: int
    season: int
    domain: str
    frequency: str

    def histories(self) -> list[np.ndarray]:
        return [self.y[:o] for o in self.origins]

    def targets(self) -> np.ndarray:
        """(n_windows, horizon) float64."""
        return np.stack([self.y[o : o + self.horizon] for o in self.origins])


def zero_shot_tasks(df: pd.DataFrame | None = None, infos: Sequence[ZeroShotSeries] | None = None,
                    max_windows: int = 10, test_frac: float = 0.4) -> list[ZeroShotTask]:
    """The evaluation tasks of the zero-shot collection (or of ``df`` described by ``infos``)."""
    if df is None or infos is None:
        df, infos = zero_shot_collection()
    groups = {u: g["y"].to_numpy(dtype="float64") for u, g in df.groupby("unique_id", sort=True)}
    tasks = []
    for info in sorted(infos, key=lambda i: i.unique_id):
        y = pd.Series(groups[info.unique_id]).interpolate(limit_direction="both").to_numpy()
        tasks.append(ZeroShotTask(info.unique_id, y, window_origins(len(y), info.horizon, max_windows, test_frac),
                                  info.horizon, info.season, info.domain, info.frequency))
    return tasks


def pinball(y: np.ndarray, yq: np.ndarray, q: float) -> np.ndarray:
    """Quantile (pinball) loss ``max(q (y - yq), (q - 1) (y - yq))``, elementwise."""
    d = y - yq
    return np.maximum(q * d, (q - 1.0) * d)


def score_task(task: ZeroShotTask, forecast: np.ndarray, quantiles: Sequence[float] = QUANTILES) -> dict[str, float]:
    """MASE and WQL of one series' forecasts.

    Args:
        forecast: (n_windows, n_quantiles, horizon); the point forecast is the 0.5 quantile.
    Returns:
        {"mase": mean over windows, "wql": over all windows, "windows": n}.
    Raises:
        DataError: wrong shape, non-finite forecasts or no 0.5 quantile.
    """
    y = task.targets()
    if forecast.shape != (len(task.origins), len(quantiles), task.horizon):
        raise DataError(f"{task.unique_id}: forecast shape {forecast.shape}, expected "
                        f"{(len(task.origins), len(quantiles), task.horizon)}")
    if not np.isfinite(forecast).all():
        raise DataError(f"{task.unique_id}: non-finite forecasts")
    try:
        med = forecast[:, list(quantiles).index(0.5), :]
    except ValueError:
        raise DataError("the quantiles must include 0.5 (the point forecast)") from None
    mases = [np.abs(y[i] - med[i]).mean() / mase_scale(task.y[: o], task.season) for i, o in enumerate(task.origins)]
    denom = max(float(np.abs(y).sum()), 1e-8)
    wql = float(np.mean([2 * pinball(y, forecast[:, j, :], q).sum() / denom for j, q in enumerate(quantiles)]))
    return {"mase": float(np.mean(mases)), "wql": wql, "windows": len(task.origins)}


@dataclass
class MethodScores:
    """Per-series scores of one method: uid -> {"mase", "wql", "windows"}; ``failures`` counts
    windows whose fit failed and fell back to SeasonalNaive (statistical baselines only)."""

    name: str
    per_series: dict[str, dict[str, float]]
    failures: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def evaluate_forecaster(tasks: Sequence[ZeroShotTask], forecaster: Forecaster, name: str = "model",
                        quantiles: Sequence[float] = QUANTILES) -> MethodScores:
    """Run ``forecaster`` on every task's windows and score them."""
    import time

    t0 = time.perf_counter()
    per, failures = {}, 0
    for task in tasks:
        fc = np.asarray(forecaster(task.histories(), task.horizon, task.season, quantiles), dtype="float64")
        failures += int(getattr(forecaster, "last_failures", 0))
        per[task.unique_id] = score_task(task, fc, quantiles)
    return MethodScores(name, per, failures, time.perf_counter() - t0)


def geometric_mean(values) -> float:
    vals = [max(float(v), 1e-12) for v in values]
    return float(math.exp(np.mean(np.log(vals))))


def relative_summary(scores: MethodScores, baseline: MethodScores, uids: Sequence[str] | None = None) -> dict[str, float]:
    """Geometric means over series of ``scores / baseline`` for MASE and WQL (on ``uids``, default all)."""
    uids = sorted(baseline.per_series) if uids is None else uids
    out = {}
    for metric in ("mase", "wql"):
        out[metric] = geometric_mean(scores.per_series[u][metric] / max(baseline.per_series[u][metric], 1e-12)
                                     for u in uids)
    return out



def zero_shot_score(model, max_windows: int = 3, flip: bool = True, infer_positive: bool = True) -> dict:
    """A trained model's zero-shot quality in one figure: its geometric-mean MASE and WQL relative to
    SeasonalNaive on the zero-shot collection, up to ``max_windows`` rolling windows per series
    (3: a few seconds on a CPU; the benchmark uses 10).

    Args:
        model: a :class:`~tenzro_trainer.models.PatchForecaster` with its weights loaded.
        flip, infer_positive: as `tenzro_trainer.forecast.forecast_histories` (on by default, as in
            ``tenzro forecast``).

    Returns:
        ``{"relative_mase", "relative_wql", "series", "windows", "beats_seasonal_naive"}``; the last
        is the number of series whose MASE is below SeasonalNaive's.
    """
    from tenzro_trainer.forecast import model_forecaster

    tasks = zero_shot_tasks(max_windows=max_windows)
    mine = evaluate_forecaster(tasks, model_forecaster(model, flip=flip, infer_positive=infer_positive))
    snaive = evaluate_forecaster(tasks, statsforecast_forecaster("SeasonalNaive"), "SeasonalNaive")
    rel = relative_summary(mine, snaive)
    wins = sum(mine.per_series[t.unique_id]["mase"] < snaive.per_series[t.unique_id]["mase"] for t in tasks)
    return {"relative_mase": rel["mase"], "relative_wql": rel["wql"], "series": len(tasks),
            "windows": sum(len(t.origins) for t in tasks), "beats_seasonal_naive": wins}


#: The reference recipe's recorded zero-shot figures (``trainer/benchmarks/zero_shot.py``).
REFERENCE_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "zero_shot.json"


def reference_figures(path: Path = REFERENCE_RESULTS) -> dict | None:
    """The recorded zero-shot figures of the reference recipe, for a summary to put next to its own
    model's: ``{"label", "relative_mase", "relative_wql", "seeds", "members", "models", "rounds",
    "windows_per_series", "flip", "infer_positive", "dataset_hash", "baselines": {name: relative MASE}}``
    (``flip`` / ``infer_positive``: how the forecasts were made, `forecast_histories`; relative scores:
    geometric mean over the set's series, SeasonalNaive = 1, averaged over the ``models`` scored;
    ``members``: the runs of each scored model, more than 1 for a forecast ensemble), or None when
    the file is absent or not a results file.
    """
    try:
        d = json.loads(path.read_text())
        s, a = d["summary"], d["args"]
        return {"label": a["label"], "relative_mase": float(s["model_relative_mase_mean"]),
                "relative_wql": float(s["model_relative_wql_mean"]), "seeds": list(a["seeds"]),
                "members": int(d.get("members", 1)), "models": len(s["per_seed"]),
                "rounds": int(a["rounds"]), "windows_per_series": int(a["max_windows"]),
                "flip": bool(a.get("flip")), "infer_positive": bool(a.get("infer_positive")),
                "dataset_hash": d["dataset_hash"],
                "baselines": {k: float(v["mase"]) for k, v in s["baselines"].items() if k != "SeasonalNaive"}}
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- statistical baselines -------------------------------------------------------------------

def _sf_model(name: str, season: int, n: int):
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta, SeasonalNaive

    m = season if n >= 2 * season + 2 else 1  # too short for a seasonal fit
    if name == "SeasonalNaive":
        return SeasonalNaive(season_length=season if n > season else 1)
    if name == "AutoETS":
        return AutoETS(season_length=m if m <= 24 else 1)  # statsforecast's ETS: seasons up to 24
    if name == "AutoARIMA":  # restricted search (approximation, small orders): a full one takes minutes at m=24
        return AutoARIMA(season_length=m if m <= 24 else 1, approximation=True, max_p=3, max_q=3, max_P=1, max_Q=1)
    if name == "AutoTheta":
        return AutoTheta(season_length=m)
    raise DataError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")


def _levels(quantiles: Sequence[float]) -> list[int]:
    return sorted({int(round(100 * (1 - 2 * min(q, 1 - q)))) for q in quantiles if abs(q - 0.5) > 1e-9})


def _to_quantiles(out: dict, quantiles: Sequence[float], h: int) -> np.ndarray:
    rows = []
    for q in quantiles:
        if abs(q - 0.5) < 1e-9:
            rows.append(out["mean"])
        else:
            lvl = int(round(100 * (1 - 2 * min(q, 1 - q))))
            rows.append(out[f"lo-{lvl}"] if q < 0.5 else out[f"hi-{lvl}"])
    return np.asarray(rows, dtype="float64").reshape(len(quantiles), h)


def statsforecast_forecaster(name: str, history: int = 512, arima_seasonal_history: int = 336) -> Forecaster:
    """A statsforecast baseline as a :data:`Forecaster`: fitted per window on at most ``history``
    points before the origin (AutoARIMA with a season of 24 or more: ``arima_seasonal_history``).
    A fit that fails falls back to SeasonalNaive and is counted in ``forecaster.last_failures``."""

    def fn(histories, h, season, quantiles):
        fn.last_failures = 0
        levels = _levels(quantiles)
        out = []
        for y in histories:
            cap = arima_seasonal_history if name == "AutoARIMA" and season >= 24 else history
            y = np.asarray(y[-cap:], dtype="float64")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    res = _sf_model(name, season, len(y)).forecast(y=y, h=h, level=levels)
                    fc = _to_quantiles(res, quantiles, h)
                    if not np.isfinite(fc).all():
                        raise FloatingPointError("non-finite forecast")
                except Exception:  # noqa: BLE001 - a failed fit falls back, counted
                    fn.last_failures += 1
                    res = _sf_model("SeasonalNaive", season, len(y)).forecast(y=y, h=h, level=levels)
                    fc = _to_quantiles(res, quantiles, h)
            out.append(fc)
        return np.stack(out)

    fn.last_failures = 0
    return fn


__all__ = ["BASELINES", "Forecaster", "MethodScores", "QUANTILES", "REFERENCE_RESULTS", "ZeroShotTask",
           "evaluate_forecaster", "geometric_mean", "pinball", "reference_figures", "relative_summary", "score_task",
           "statsforecast_forecaster", "window_origins", "zero_shot_score", "zero_shot_tasks"]

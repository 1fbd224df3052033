"""Benchmark: forecast quality of a DiLoCo-trained model against statsforecast's SeasonalNaive and AutoETS
(and optionally AutoARIMA) on the same held-out rolling-origin windows, with a MASE table per series and
the geometric mean; all methods measured in this run.

The statistical models are fitted per window on the series' history up to the forecast origin (at most
``--history`` points, in the original units); the neural model sees only its context (64 points).

    .venv/bin/python trainer/benchmarks/forecast_quality.py
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
import torch

from _common import machine, write
from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data import default_collection, heldout_windows, seasonality, train_heldout_split
from tenzro_trainer.evaluate import predict, score_forecasts
from tenzro_trainer.models import build_model
from tenzro_trainer.simulate import SimConfig, simulate


def stat_forecasts(split, windows, seasons, model_factory, history):
    """(n, horizon) forecasts of a statsforecast model, in the split's scaled units."""
    out = np.zeros(tuple(windows.target.shape), dtype="float64")
    h = split.horizon
    for i, (u, o) in enumerate(zip(windows.series, windows.origin)):
        y = split.unscale(u, split.values[u][max(0, o - history) : o])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                f = model_factory(seasons[u], len(y)).forecast(y=y, h=h)["mean"]
            except Exception:  # noqa: BLE001 - a failed fit falls back to the last value, counted below
                f = np.full(h, y[-1])
                stat_forecasts.failures += 1
        out[i] = (np.asarray(f) - split.mean[u]) / split.std[u]
    return torch.from_numpy(out.astype("float32"))


stat_forecasts.failures = 0


def main() -> None:
    from statsforecast.models import AutoARIMA, AutoETS, SeasonalNaive

    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--family", default="timesfm")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--H", type=int, default=24)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--history", type=int, default=512)
    ap.add_argument("--arima", action="store_true", help="also fit AutoARIMA (slow)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    df = default_collection()
    model_cfg = ModelConfig.preset(args.preset, args.family)
    cfg = SimConfig(model=model_cfg, inner=InnerConfig(steps=args.H, batch_size=args.batch, seed=args.seed),
                    workers=args.workers, rounds=args.rounds, fragments=4, seed=args.seed)
    t0 = time.perf_counter()
    sim = simulate(cfg, df)
    train_s = time.perf_counter() - t0
    split = train_heldout_split(df, model_cfg.context_len, model_cfg.horizon, cfg.heldout_frac)
    windows = heldout_windows(split, cfg.max_windows_per_series)
    seasons = seasonality(split.unique_ids)
    model = build_model(model_cfg)
    model.load_state_dict(sim.state)

    results, timing = {}, {}
    t = time.perf_counter()
    results["DiLoCo model"] = score_forecasts(split, windows, predict(model, windows.context), seasons)
    timing["DiLoCo model"] = time.perf_counter() - t
    last = windows.context[:, -1:].expand(-1, split.horizon)
    results["Naive (last value)"] = score_forecasts(split, windows, last, seasons)
    factories = {
        "SeasonalNaive": lambda m, n: SeasonalNaive(season_length=m),
        "AutoETS": lambda m, n: AutoETS(season_length=m if m <= 24 and n >= 2 * m + 2 else 1),
    }
    if args.arima:
        factories["AutoARIMA"] = lambda m, n: AutoARIMA(season_length=m if m <= 24 and n >= 2 * m + 2 else 1)
    failures = {}
    for name, fac in factories.items():
        stat_forecasts.failures = 0
        t = time.perf_counter()
        results[name] = score_forecasts(split, windows, stat_forecasts(split, windows, seasons, fac, args.history), seasons)
        timing[name] = time.perf_counter() - t
        failures[name] = stat_forecasts.failures
        print(f"{name}: MASE {results[name].mase:.3f} ({timing[name]:.0f}s)", flush=True)

    names = list(results)
    m = machine()
    lines = [
        "# Forecast quality on held-out windows: trained model vs statistical baselines",
        "",
        f"Model: {args.family} `{args.preset}` ({sim.num_params} parameters), trained with DiLoCo: M={args.workers}, "
        f"H={args.H}, {args.rounds} rounds, batch {args.batch}, seed {args.seed} ({train_s:.0f} s). "
        f"Windows: {len(windows.series)} rolling origins in the held-out tails of {len(split.unique_ids)} series "
        f"(up to {cfg.max_windows_per_series} per series), horizon {split.horizon}. MASE: MAE over the in-sample "
        "seasonal-naive MAE of the series' training part (Hyndman & Koehler 2006); per series the mean over its windows; "
        "summary the geometric mean over series. Statistical models (statsforecast) are fitted per window on up to "
        f"{args.history} points of history before the origin; seasonal periods above 24 (weekly data, m=52) fall back "
        "to non-seasonal ETS/ARIMA. The model sees only its 64-point context.",
        "",
        f"Machine: {m['cpus']} CPUs shared with other helpers' jobs, load average {m['loadavg_1_5_15']} at the end.",
        "",
        "| method | MASE (geo-mean) | ratio to model | sMAPE % (mean) | held-out loss | time s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    base = results["DiLoCo model"].mase
    for n in names:
        r = results[n]
        lines.append(f"| {n} | {r.mase:.3f} | {r.mase / base:.3f} | {r.smape:.2f} | {r.loss:.4f} | {timing.get(n, 0):.1f} |")
    wins = {n: sum(results["DiLoCo model"].per_series[u]["mase"] < results[n].per_series[u]["mase"] for u in split.unique_ids)
            for n in names if n != "DiLoCo model"}
    lines += ["", "Series where the model's MASE is lower: " + ", ".join(f"vs {n} {w}/{len(split.unique_ids)}" for n, w in wins.items()),
              f"Failed statistical fits (fell back to the last value): {failures}.", "",
              "## MASE per series", "",
              "| series | season | windows | " + " | ".join(names) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in names) + " |"]
    for u in split.unique_ids:
        row = [f"{results[n].per_series[u]['mase']:.3f}" for n in names]
        best = min(range(len(names)), key=lambda i: results[names[i]].per_series[u]["mase"])
        row[best] = f"**{row[best]}**"
        lines.append(f"| {u} | {seasons[u]} | {results[names[0]].per_series[u]['windows']} | " + " | ".join(row) + " |")
    lines.append("| **geometric mean** | | | " + " | ".join(f"**{results[n].mase:.3f}**" for n in names) + " |")
    write("forecast_quality", "\n".join(lines), {
        "args": vars(args), "machine": m, "train_s": train_s, "timing_s": timing, "failures": failures,
        "summary": {n: results[n].as_dict() for n in names},
        "per_series": {n: results[n].per_series for n in names},
    })
    print("\n".join(lines[:20]))


if __name__ == "__main__":
    main()

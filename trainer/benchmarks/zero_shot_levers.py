"""Benchmark: levers of the CPU reference recipe measured on the zero-shot set (issue #28).

Each lever is a change to one part of the recipe of ``zero_shot.py`` (timesfm ``cpu-ref``, DiLoCo in
the simulator: M=4, H=100, batch 64, inner AdamW lr 1e-3, outer Nesterov 0.7 / 0.9, the training
mixture), trained for one seed and scored at several rounds on the wide zero-shot set with
statsforecast's baselines from results/zero_shot_baselines.json (relative MASE / WQL as in
zero_shot.md). The variants patch the model's loss and normalization in this process only:

- ``base``: the recipe as it is (``PatchForecaster.loss``: the quantile loss over every output
  token, each window normalized by its whole context's mean and std).
- ``last``: the loss on the last output token only. Every other token's targets lie inside the
  context whose mean and std normalized its inputs, so it learns from a normalization that has
  seen its future; the last one alone forecasts as inference does.
- ``first``: TimesFM's causal normalization (Das et al. 2024, Sec. 4): by the mean and std of the
  first patch with an observed point; tokens before it are left out of the loss.
- ``mad``: scale by the context's mean absolute first difference (floored at 5 % of its std), so a
  smooth series' step-to-step moves are not lost under the spread of its level.
- ``naive``: the quantile loss in units of the context's mean absolute step (the scale MASE divides
  by) instead of its std: each window's loss weighted by std / mean |first difference|, capped at
  10 (a smooth trend's step is a hundredth of its spread, so a wobble the std-scaled loss
  hardly sees is the whole of its MASE); ``naivesqrt``: the square root of that weight.
- ``trunc``: half the training windows have their context cut (NaN, as the padding of a short
  series) to an observed length drawn log-uniformly from 8 to 512 points, so short contexts are
  trained from every frequency, not only from the series that are short.
- ``cos``: the inner AdamW lr on a cosine from 1e-3 to 1e-4 over the rounds.
- ``TSV=2`` (environment): the mixture with TrendSeason version 2 (``tenzro_trainer.data.synthetic``).
- ``PATCH=16`` (environment, to ``train`` and ``score``): input and output patches of 16 steps.
- ``MIX=REAL,TSMIXUP,KERNELSYNTH,TRENDSEASON`` (environment, to ``train``): the mixture's shares.
- tail averaging (a comma-joined list to ``score``): the mean of the global weights of several
  rounds, scored as one model; a forecast ensemble (a +-joined list): the mean of the quantile
  forecasts of several models.

    # train one variant (one torch thread), keeping the global weights of the rounds named
    .venv/bin/python trainer/benchmarks/zero_shot_levers.py train base --seed 0 --rounds 45 --keep 20 25 30 35 40 45
    # score kept weights (a comma-joined list is their average; A+B the mean of two models' forecasts)
    .venv/bin/python trainer/benchmarks/zero_shot_levers.py score base base-s0-r30 base-s0-r20,base-s0-r25,base-s0-r30

The figures are in results/zero_shot_levers.md (written by hand from the score lines, with the
commands that made them).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import torch

import zero_shot as zs
from tenzro_trainer.models.common import PatchForecaster, context_stats, quantile_loss

KEPT = Path(os.environ.get("LEVERS_DIR", zs.CACHE / "levers"))
PATCH = int(os.environ.get("PATCH", "0"))  # input and output patch length; 0: cpu-ref's
VARIANTS = ("base", "last", "first", "mad", "cos", "naive", "naivesqrt", "trunc")


def _first_patch_stats(ctx: torch.Tensor, p: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean and floored std (B, 1) of each context's first patch with an observed point, and that
    patch's index (B,)."""
    B, L = ctx.shape
    patches = ctx.reshape(B, L // p, p)
    first = ((~torch.isnan(patches)).sum(-1) > 0).to(torch.int64).argmax(dim=1)
    mu, sigma = context_stats(patches[torch.arange(B), first], masked=True)
    return mu, sigma, first


def _diff_stats(ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Observed mean (B, 1) and mean absolute first difference (B, 1), floored at 5 % of the std and 0.01."""
    mu, std = context_stats(ctx, floor=0.0, masked=True)
    d = (ctx[:, 1:] - ctx[:, :-1]).abs()
    mad = torch.nanmean(d, dim=1, keepdim=True).nan_to_num(0.0)
    return mu, torch.maximum(mad, torch.maximum(0.05 * std, torch.full_like(std, 0.01)))


def _naive_weight(ctx: torch.Tensor, sigma: torch.Tensor, cap: float = 10.0) -> torch.Tensor:
    """sigma / mean |first difference| of each context (B, 1), in [1 / cap, cap]; 1 where fewer than two
    consecutive points are observed."""
    d = (ctx[:, 1:] - ctx[:, :-1]).abs()
    mad = torch.nanmean(d, dim=1, keepdim=True)
    w = (sigma / mad.clamp_min(1e-12)).clamp(1.0 / cap, cap)
    return torch.where(torch.isnan(mad), torch.ones_like(w), w)


def patch_model(variant: str) -> None:
    """Replace ``PatchForecaster.loss`` and ``forecast_quantiles`` (quantile heads) by the variant's."""

    def stats(ctx: torch.Tensor, p: int):
        """(mu, sigma, index of the first observed patch or None)."""
        if variant == "first":
            return _first_patch_stats(ctx, p)
        return (*(_diff_stats(ctx) if variant == "mad" else context_stats(ctx, masked=True)), None)

    def loss(self, window):
        L = self.context_len
        if variant == "trunc":
            cut = torch.rand(len(window)) < 0.5
            keep = torch.exp(torch.empty(len(window)).uniform_(math.log(8), math.log(L))).long()
            drop = (torch.arange(L)[None, :] < (L - keep)[:, None]) & cut[:, None]
            window = torch.cat([window[:, :L].masked_fill(drop, float("nan")), window[:, L:]], dim=1)
        mu, sigma, first = stats(window[:, :L], self.patch_len)
        z = (window - mu) / sigma
        pred, target = self(z[:, :L]), self.training_targets(z).float()
        if variant == "last":
            pred, target = pred[:, -1:], target[:, -1:]
        if variant in ("naive", "naivesqrt"):
            w = _naive_weight(window[:, :L], sigma)
            w = (w.sqrt() if variant == "naivesqrt" else w)[:, :, None]  # (B, 1, 1) over (B, n_outputs, h)
            obs = (~torch.isnan(target)).float()
            # the pinball loss scales with its argument: quantile_loss of w-scaled pred and target is the
            # w-weighted sum over the observed count; renormalized, the w-weighted mean
            levels = torch.tensor(self.cfg.quantiles, device=pred.device)
            scaled = quantile_loss(pred.float() * w[..., None], target * w, levels)
            return scaled * obs.sum() / (obs * w).sum().clamp_min(1e-12)
        if first is not None:
            n = L // self.patch_len
            keep = torch.arange(n - self.n_outputs, n)[None, :] >= first[:, None]
            target = torch.where(keep[..., None], target, torch.full_like(target, float("nan")))
        return quantile_loss(pred.float(), target, torch.tensor(self.cfg.quantiles, device=pred.device))

    @torch.no_grad()
    def forecast_quantiles(self, context):
        mu, sigma, _ = stats(context, self.patch_len)
        out = self((context - mu) / sigma)[:, -1].float()
        return out.sort(dim=1).values * sigma.unsqueeze(1) + mu.unsqueeze(1)

    PatchForecaster.loss = loss
    PatchForecaster.forecast_quantiles = forecast_quantiles


def cosine_inner_lr(rounds: int, floor: float = 0.1) -> None:
    """The inner lr of round r (0-based) of ``rounds``: lr x (floor + (1 - floor) x (1 + cos(pi r / (rounds - 1))) / 2)."""
    from tenzro_trainer.inner import InnerTrainer

    run = InnerTrainer.run

    def scheduled(self, *a, **k):
        r = getattr(self, "_levers_round", 0)
        self._levers_round = r + 1
        for group in self.optimizer.param_groups:
            group["lr"] = self.cfg.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * r / max(1, rounds - 1))))
        return run(self, *a, **k)

    InnerTrainer.run = scheduled


def model_config(width: int | None):
    """``cpu-ref``, widened to ``width`` (d_model; d_ff twice it, 4 heads) and / or with input and
    output patches of ``PATCH`` steps (environment; cpu-ref's 32 when unset)."""
    from dataclasses import replace

    from tenzro_trainer.config import ModelConfig

    cfg = ModelConfig.preset("cpu-ref", "timesfm")
    cfg = cfg if width is None else replace(cfg, d_model=width, d_ff=2 * width)
    return cfg if not PATCH else replace(cfg, patch_len=PATCH)


def train(variant: str, seed: int, rounds: int, keep: set[int], width: int | None = None) -> None:
    from tenzro_trainer import simulate as sim
    from tenzro_trainer.config import InnerConfig, OuterConfig
    from tenzro_trainer.data import dataset_hash
    from tenzro_trainer.data.mixture import MixtureConfig

    if variant == "cos":
        cosine_inner_lr(rounds)
    tsv = int(os.environ.get("TSV", "1"))
    mix = os.environ.get("MIX")
    df = zs.cached_mixture(MixtureConfig.with_shares(mix.split(",") if mix else None, trendseason_version=tsv))
    h = dataset_hash(df)
    print(f"mixture (TrendSeason version {tsv}): hash {h}", flush=True)
    tag = (f"{variant}{'-tsv2' if tsv == 2 else ''}{f'-w{width}' if width else ''}{f'-p{PATCH}' if PATCH else ''}"
           f"{'-mix' + mix.replace(',', '_') if mix else ''}-s{seed}")
    KEPT.mkdir(parents=True, exist_ok=True)
    evaluate, seen = sim._Eval.__call__, [0]

    def keep_state(self, state):  # called with the initial weights, then after every round
        r, seen[0] = seen[0], seen[0] + 1
        if r in keep:
            torch.save(state, KEPT / f"{tag}-r{r}.pt")
        return evaluate(self, state)

    sim._Eval.__call__ = keep_state
    cfg = sim.SimConfig(model=model_config(width),
                        inner=InnerConfig(steps=100, lr=1e-3, batch_size=64, seed=seed), outer=OuterConfig(), workers=4,
                        rounds=rounds, fragments=4, seed=seed, max_windows_per_series=2, train_windows_per_series=2,
                        dataset_hash=h)
    t = time.perf_counter()
    sim.simulate(cfg, df, log=lambda r: print(f"{tag} round {r['round']}: train {r['train_loss']:.4f} "
                                              f"({r['seconds']:.0f} s)", flush=True))
    print(f"{tag}: trained {rounds} rounds in {time.perf_counter() - t:.0f} s", flush=True)


def score(names: list[str], width: int | None = None) -> None:
    from tenzro_trainer.data.heldout import zero_shot_set_ids
    from tenzro_trainer.forecast import model_forecaster
    from tenzro_trainer.model_dir import average_weights
    from tenzro_trainer.models import build_model
    from tenzro_trainer.zeroshot import evaluate_forecaster, relative_summary

    keep = set(zero_shot_set_ids("wide"))
    tasks = [t for t in zs.zero_shot_tasks(max_windows=10) if t.unique_id in keep]
    snaive = zs.cached_baselines(tasks, max_windows=10)["SeasonalNaive"]
    groups = {g: [t.unique_id for t in ts] for g, ts in zs.task_groups(tasks).items()}
    print("| weights | " + " | ".join(groups) + " |")

    def member(weights: str):  # one model: the average of the comma-joined rounds' weights
        model = build_model(model_config(width))
        model.load_state_dict(average_weights([torch.load(KEPT / f"{n}.pt") for n in weights.split(",")]))
        return model

    for name in names:
        sc = evaluate_forecaster(tasks, model_forecaster(*(member(w) for w in name.split("+"))), name)
        cells = [relative_summary(sc, snaive, us) for us in groups.values()]
        print(f"| {name} | " + " | ".join(f"{c['mase']:.3f} / {c['wql']:.3f}" for c in cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("variant", choices=VARIANTS)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--rounds", type=int, default=30)
    t.add_argument("--keep", type=int, nargs="+", default=[30])
    s = sub.add_parser("score")
    for p in (t, s):
        p.add_argument("--width", type=int, default=None, help="d_model of a widened cpu-ref (d_ff twice it)")
    s.add_argument("variant", choices=VARIANTS)
    s.add_argument("weights", nargs="+", help="kept weights (tag-sS-rR), a comma-joined list (their average), or "
                                              "a +-joined list of those (the mean of the models' quantile forecasts)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    patch_model(args.variant)
    if args.cmd == "train":
        train(args.variant, args.seed, args.rounds, set(args.keep) | {args.rounds}, args.width)
    else:
        score(args.weights, args.width)


if __name__ == "__main__":
    main()

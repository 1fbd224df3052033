"""The measuring stages of `scripts/gpu_check.py`, one per subcommand; each writes one JSON file.

    python trainer/benchmarks/gpu_stages.py throughput --bundle .gpu-bundle --json /tmp/t.json [--dry]
    python trainer/benchmarks/gpu_stages.py zero-shot  --bundle .gpu-bundle --json /tmp/z.json --budget-s 150 [--dry]

``throughput``: samples/s and peak device memory (bytes, ``torch.cuda.max_memory_allocated``) of the
inner loop (`InnerTrainer`) in bf16 autocast and in fp32, and of a plain PyTorch loop (the textbook
``autocast / backward / clip / AdamW.step``) on the same model, batch and sampler; medians of timed
steps after warm-up steps, a CUDA synchronize after each step.

``zero-shot``: the ``gpu-ref`` recipe (timesfm ~29M, context 512, 9 quantiles) trained by DiLoCo in
the simulator (M=4, H=100, batch 64, inner lr 1e-3, outer Nesterov 0.7 / 0.9) on the training mixture,
bf16 on the GPU, for a fixed wall-clock budget: the number of rounds is the budget over the measured
time of a round (M * H inner steps); then scored on the zero-shot set (`tenzro_trainer.zeroshot`),
relative MASE and WQL against SeasonalNaive from ``results/zero_shot_baselines.json`` (the same windows).

The data come from the bundle (`scripts/gpu_check.py bundle`: Parquet files and the zero-shot
manifest), so a device with none of the data packages installed runs them. ``--dry``: the CPU half,
small (the ``cpu-test`` / ``demo`` presets, a few steps, fp32), to prove everything is wired.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tenzro_trainer import evaluate
from tenzro_trainer.config import InnerConfig, ModelConfig, OuterConfig
from tenzro_trainer.data import WindowDataset, dataset_hash, train_heldout_split
from tenzro_trainer.data.heldout import ZeroShotSeries
from tenzro_trainer.forecast import model_forecaster
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.models import build_model
from tenzro_trainer.simulate import SimConfig, simulate
from tenzro_trainer.zeroshot import MethodScores, evaluate_forecaster, relative_summary, zero_shot_tasks

RESULTS = Path(__file__).resolve().parent / "results"


def _device(dry: bool) -> torch.device:
    return torch.device("cpu" if dry else "cuda")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def plain_loop_steps(model, data: WindowDataset, batch: int, steps: int, dtype: str, device: torch.device,
                     clip: float, opt) -> list[float]:
    """The reference: the textbook PyTorch training step, timed per step (s)."""
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        x = data.sample(batch).to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bf16"):
            loss = model.loss(x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return times


def throughput(args) -> dict:
    """Samples/s and peak memory of InnerTrainer bf16 / fp32 and of the plain loop, same model and batch."""
    device = _device(args.dry)
    cfg = ModelConfig.preset("cpu-test" if args.dry else "gpu-ref", "timesfm")
    split = train_heldout_split(pd.read_parquet(Path(args.bundle) / "collection.parquet"), cfg.context_len,
                                cfg.horizon, min_context=cfg.effective_min_context)
    warm, steps = (1, 2) if args.dry else (5, args.steps)
    dtypes = ["fp32"] if args.dry else ["bf16", "fp32"]
    rows = []
    # the plain loop at the recipe's batch; the inner loop also at a larger one (a 29M model at batch 64
    # leaves an H100 waiting on kernel launches)
    runs = [("InnerTrainer", d, b) for b in args.batches for d in dtypes] + [("plain PyTorch", d, args.batches[0])
                                                                            for d in dtypes]
    for loop, dtype, batch in runs:
        _reset_memory(device)
        inner = InnerConfig(steps=steps, batch_size=batch, device=str(device), dtype=dtype)
        data = WindowDataset(split, seed=0)
        if loop == "InnerTrainer":
            worker = InnerTrainer(cfg, inner, data)
            worker.run(None, steps=warm)
            _reset_memory(device)
            times = worker.run(None).step_times
            model = worker.model
        else:
            torch.manual_seed(0)
            model = build_model(cfg).to(device)
            opt = torch.optim.AdamW(model.parameters(), lr=inner.lr, weight_decay=inner.weight_decay,
                                    betas=inner.betas)
            plain_loop_steps(model, data, batch, warm, dtype, device, inner.grad_clip, opt)
            _reset_memory(device)
            times = plain_loop_steps(model, data, batch, steps, dtype, device, inner.grad_clip, opt)
        rows.append({"loop": loop, "dtype": dtype, "steps": steps, "batch": batch,
                     "median_step_s": statistics.median(times),
                     "samples_per_s": batch / statistics.median(times), "peak_memory_bytes": _peak(device)})
        print(f"{loop} {dtype} batch {batch}: {rows[-1]['samples_per_s']:.0f} samples/s", flush=True)
        del model
    return {"preset": cfg.to_dict(), "num_params": sum(p.numel() for p in build_model(cfg).parameters()),
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu", "rows": rows}


def load_zero_shot(bundle: Path, max_windows: int):
    """The zero-shot tasks from the bundle (long-format Parquet + manifest rows)."""
    infos = [ZeroShotSeries(**row) for row in json.loads((bundle / "zero_shot_infos.json").read_text())]
    return zero_shot_tasks(pd.read_parquet(bundle / "zero_shot.parquet"), infos, max_windows=max_windows)


def zero_shot(args) -> dict:
    """The gpu-ref recipe trained for ``--budget-s`` seconds, then its zero-shot figure."""
    device = _device(args.dry)
    bundle = Path(args.bundle)
    preset, workers, h, batch = ("demo", 2, 2, 8) if args.dry else ("gpu-ref", 4, 100, args.batches[0])
    dtype = "fp32" if args.dry else "bf16"
    cfg = ModelConfig.preset(preset, "timesfm")
    df = pd.read_parquet(bundle / "mixture.parquet")
    # the held-out evaluator's seasonal periods from the bundle: the manifests they come from read
    # files of data packages a lent machine does not have
    seasons = json.loads((bundle / "seasons.json").read_text())
    evaluate.seasonality = lambda ids: {u: seasons.get(u, 1) for u in ids}
    tasks = load_zero_shot(bundle, 10)
    if args.dry:
        tasks = tasks[:3]
    inner = InnerConfig(steps=h, lr=1e-3, batch_size=batch, seed=0, device=str(device), dtype=dtype)
    # one worker's step time on this device sets the rounds that fit the budget
    probe = InnerTrainer(cfg, inner, WindowDataset(train_heldout_split(
        df, cfg.context_len, cfg.horizon, min_context=cfg.effective_min_context), seed=0))
    probe.run(None, steps=3)
    step_s = statistics.median(probe.run(None, steps=10).step_times)
    del probe
    _reset_memory(device)
    round_s = workers * h * step_s * 1.4  # + outer step, payload codec, held-out loss per round (measured 1.37)
    rounds = 1 if args.dry else max(1, int(args.budget_s // round_s))
    print(f"zero-shot: step {step_s * 1e3:.1f} ms, {rounds} round(s) in the {args.budget_s:.0f} s budget", flush=True)
    sim_cfg = SimConfig(model=cfg, inner=inner, outer=OuterConfig(), workers=workers, rounds=rounds, fragments=4,
                        seed=0, max_windows_per_series=2, train_windows_per_series=2, dataset_hash=dataset_hash(df))
    t0 = time.perf_counter()
    sim = simulate(sim_cfg, df, log=lambda r: print(
        f"round {r['round']}: train {r['train_loss']:.4f} held-out {r['heldout_loss']:.4f}", flush=True))
    train_s = time.perf_counter() - t0
    model = build_model(cfg).to(device)
    model.load_state_dict(sim.state)
    model.eval()
    t1 = time.perf_counter()
    scores = evaluate_forecaster(tasks, model_forecaster(model), "model")
    out = {"preset": preset, "num_params": sim.num_params, "workers": workers, "H": h, "batch": batch,
           "dtype": dtype, "rounds": rounds, "step_s": step_s, "train_s": train_s,
           "eval_s": time.perf_counter() - t1, "series": len(tasks),
           "windows": sum(len(t.origins) for t in tasks), "final_heldout_loss": sim.rounds[-1]["heldout_loss"]}
    base = json.loads((RESULTS / "zero_shot_baselines.json").read_text())["methods"]
    uids = [t.unique_id for t in tasks]
    rel = {}
    for name, m in base.items():
        if not all(u in m["per_series"] for u in uids):
            continue
        rel[name] = relative_summary(MethodScores(name, m["per_series"], m["failures"], m["seconds"]),
                                     MethodScores("SeasonalNaive", base["SeasonalNaive"]["per_series"], 0, 0), uids)
    out["relative"] = relative_summary(scores, MethodScores("SeasonalNaive", base["SeasonalNaive"]["per_series"], 0, 0),
                                       uids)
    out["baselines_relative"] = rel
    print(f"zero-shot relative MASE {out['relative']['mase']:.3f}, WQL {out['relative']['wql']:.3f}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="one measuring stage of scripts/gpu_check.py")
    ap.add_argument("stage", choices=["throughput", "zero-shot"])
    ap.add_argument("--bundle", default=".gpu-bundle")
    ap.add_argument("--json", required=True, help="write the stage's figures here")
    ap.add_argument("--dry", action="store_true", help="the CPU half, small")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per throughput row")
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 512],
                    help="throughput batches (the first is the recipe's and the plain loop's)")
    ap.add_argument("--budget-s", type=float, default=150.0, help="zero-shot training budget (wall clock, s)")
    args = ap.parse_args(argv)
    if args.dry:
        torch.set_num_threads(1)
        args.batches = [8]
    elif not torch.cuda.is_available():
        print("no CUDA device: run with --dry on a CPU", file=sys.stderr)
        return 2
    np.random.seed(0)
    figures = (throughput if args.stage == "throughput" else zero_shot)(args)
    Path(args.json).write_text(json.dumps(figures, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

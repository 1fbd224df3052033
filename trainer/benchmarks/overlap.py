"""Benchmark: the loss cost of overlap (the one-step-delayed outer update of Streaming / eager DiLoCo).

With ``overlap_steps = d`` a trainer runs the first d of round r+1's H inner steps from its own
round-r weights while the syncer finalizes round r, then rebases on the committed weights
(`tenzro_trainer.inner.InnerTrainer.rebase`) and runs the other H - d; d = H puts the whole round one
outer step behind. Hiding d steps' worth of communication costs some loss: this measures how much,
with the simulator (`tenzro_trainer.simulate`, M = 8, `demo` preset, 4 fragments, H = 24, batch 32,
outer Nesterov 0.7 / 0.9, Mean, no screen), per seed relative to d = 0, on the mean held-out loss of
the last three rounds and the loss on fixed training windows (EVALUATION.md).

    .venv/bin/python trainer/benchmarks/overlap.py --seeds 0 1 2 --rounds 30
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from _common import machine, write
from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data import default_collection
from tenzro_trainer.simulate import SimConfig, simulate


def mean_sd(xs: list[float]) -> str:
    return f"{statistics.fmean(xs):.3f} ± {statistics.stdev(xs) if len(xs) > 1 else 0.0:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--H", type=int, default=24)
    ap.add_argument("--overlaps", type=int, nargs="+", default=[0, 6, 12, 24])
    args = ap.parse_args()
    torch.set_num_threads(1)
    df = default_collection()
    runs: dict[int, dict[int, dict]] = {}
    for d in args.overlaps:
        for seed in args.seeds:
            cfg = SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=args.H, batch_size=32),
                            workers=args.workers, rounds=args.rounds, fragments=4, seed=seed, overlap_steps=d)
            t0 = time.perf_counter()
            res = simulate(cfg, df)
            held = [r["heldout_loss"] for r in res.rounds]
            runs.setdefault(d, {})[seed] = {"last3": statistics.fmean(held[-3:]),
                                            "train_window": res.rounds[-1]["train_window_loss"],
                                            "curve": held, "wall_s": time.perf_counter() - t0}
            print(f"overlap {d} seed {seed}: last3 {runs[d][seed]['last3']:.4f}", flush=True)
    base = runs[args.overlaps[0]]
    lines = ["# Overlap: loss cost of the one-step-delayed outer update", "",
             f"M = {args.workers}, `demo` preset in 4 fragments, H = {args.H}, batch 32, outer Nesterov 0.7 / 0.9, "
             f"Mean, {args.rounds} rounds, seeds {args.seeds}. d = inner steps of a round run before the previous "
             f"round's weights arrive (then rebased). Ratios per seed to d = {args.overlaps[0]}, mean ± sd.", "",
             "| d (of H) | held-out last-3 | ratio | train-window | ratio |", "| --- | --- | --- | --- | --- |"]
    for d in args.overlaps:
        r = runs[d]
        lines.append(f"| {d} of {args.H} | {mean_sd([r[s]['last3'] for s in args.seeds])} | "
                     f"{mean_sd([r[s]['last3'] / base[s]['last3'] for s in args.seeds])} | "
                     f"{mean_sd([r[s]['train_window'] for s in args.seeds])} | "
                     f"{mean_sd([r[s]['train_window'] / base[s]['train_window'] for s in args.seeds])} |")
    full = max(args.overlaps)
    cost = statistics.fmean(runs[full][s]["last3"] / base[s]["last3"] for s in args.seeds)
    lines += ["", f"Machine: {machine()}", "",
              f"overlap loss ratio at d = {full} of {args.H} (held-out last-3 vs no overlap): {cost:.3f}"]
    write("overlap", "\n".join(lines), {"runs": {str(d): v for d, v in runs.items()}, "seeds": args.seeds})
    print(lines[-1])


if __name__ == "__main__":
    main()

"""Benchmark: DiLoCo (M workers, H inner steps) against fully synchronous data-parallel AdamW with the
same total inner steps (rounds x H) and the same global batch (M x batch), both measured in this run.

For each M and seed: DiLoCo with the reference outer optimizer (Nesterov lr 0.7, momentum 0.9) and
the synchronous baseline at each learning rate of ``--sync-lrs``; the baseline reported is the
learning rate with the lowest held-out loss averaged over the seeds (a tuned baseline,
EVALUATION.md). DiLoCo's inner learning rate can be tuned over ``--diloco-lrs`` the same way.
Held-out loss and MASE are on rolling-origin windows of every series' held-out tail; the loss on
fixed training windows is reported too. Bytes: per worker, fp32 tensor data (see simulate.py).

    .venv/bin/python trainer/benchmarks/convergence.py --seeds 0 1 --workers 4 8
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from _common import machine, write
from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data import default_collection
from tenzro_trainer.simulate import SimConfig, simulate, simulate_sync


def mean_sd(xs):
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--H", type=int, default=24)
    ap.add_argument("--batch", type=int, default=32, help="per-worker batch; the global batch is M x batch")
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--family", default="timesfm")
    ap.add_argument("--fragments", type=int, default=4)
    ap.add_argument("--diloco-lrs", type=float, nargs="+", default=[3e-4])
    ap.add_argument("--sync-lrs", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", default="convergence")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    df = default_collection()
    model = ModelConfig.preset(args.preset, args.family)
    t_start = time.perf_counter()
    runs = []  # one row per (method, M, lr, seed)
    for M in args.workers:
        for seed in args.seeds:
            for lr in args.diloco_lrs:
                cfg = SimConfig(model=model, inner=InnerConfig(steps=args.H, batch_size=args.batch, lr=lr, seed=seed),
                                workers=M, rounds=args.rounds, fragments=args.fragments, seed=seed)
                res = simulate(cfg, df)
                runs.append({"method": "diloco", "M": M, "lr": lr, "seed": seed, **res.rounds[-1],
                             "curve": [r["heldout_loss"] for r in res.rounds], "wall_s": res.wall_s, "params": res.num_params})
                print(f"diloco M={M} seed={seed} lr={lr}: heldout {res.rounds[-1]['heldout_loss']:.4f} "
                      f"mase {res.rounds[-1]['mase']:.3f} ({res.wall_s:.0f}s)", flush=True)
            for lr in args.sync_lrs:
                cfg = SimConfig(model=model, inner=InnerConfig(steps=args.H, batch_size=args.batch, lr=lr, seed=seed),
                                workers=M, rounds=args.rounds, fragments=args.fragments, seed=seed)
                res = simulate_sync(cfg, df, lr=lr)
                runs.append({"method": "sync", "M": M, "lr": lr, "seed": seed, **res.rounds[-1],
                             "curve": [r["heldout_loss"] for r in res.rounds], "wall_s": res.wall_s, "params": res.num_params})
                print(f"sync   M={M} seed={seed} lr={lr}: heldout {res.rounds[-1]['heldout_loss']:.4f} "
                      f"mase {res.rounds[-1]['mase']:.3f} ({res.wall_s:.0f}s)", flush=True)
    total_s = time.perf_counter() - t_start

    def pick(method, M):
        lrs = sorted({r["lr"] for r in runs if r["method"] == method and r["M"] == M})
        best = min(lrs, key=lambda lr: statistics.fmean(r["heldout_loss"] for r in runs
                                                         if r["method"] == method and r["M"] == M and r["lr"] == lr))
        return best, [r for r in runs if r["method"] == method and r["M"] == M and r["lr"] == best]

    m = machine()
    lines = [
        f"# Convergence: DiLoCo vs synchronous data-parallel AdamW at equal compute",
        "",
        f"Model: {args.family} preset `{args.preset}` ({runs[0]['params']} parameters), context {model.context_len}, "
        f"horizon {model.horizon}. Data: the default collection (49 real series), held-out tail per series, up to 12 "
        f"rolling origins each. H={args.H}, {args.rounds} rounds = {args.rounds * args.H} inner steps per worker; per-worker "
        f"batch {args.batch}, global batch M x {args.batch}. DiLoCo: inner AdamW (wd 0.01, betas 0.9/0.95), outer Nesterov "
        f"lr 0.7 momentum 0.9, {args.fragments} fragments, Mean aggregation, payloads through the safetensors codec. "
        f"Sync: {args.rounds * args.H} AdamW steps at the global batch, lr tuned over {args.sync_lrs}; DiLoCo inner lr over "
        f"{args.diloco_lrs}; both chosen by mean held-out loss over seeds {args.seeds}.",
        "",
        f"Machine: {m['cpus']} CPUs shared with other helpers' jobs, torch threads {args.threads}, load average "
        f"{m['loadavg_1_5_15']} at the end; total wall time {total_s:.0f} s.",
        "",
        "| M | method | lr | held-out loss (mean ± sd) | MASE (geo-mean) | train-window loss | bytes / worker | ratio loss DiLoCo/sync | ratio bytes sync/DiLoCo |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    summary = []
    for M in args.workers:
        dlr, d = pick("diloco", M)
        slr, s = pick("sync", M)
        dl, sl = mean_sd([r["heldout_loss"] for r in d]), mean_sd([r["heldout_loss"] for r in s])
        dm, sm = mean_sd([r["mase"] for r in d]), mean_sd([r["mase"] for r in s])
        dt, st = mean_sd([r["train_window_loss"] for r in d]), mean_sd([r["train_window_loss"] for r in s])
        db, sb = d[0]["tensor_bytes_per_worker"], s[0]["tensor_bytes_per_worker"]
        per_seed = [a["heldout_loss"] / b["heldout_loss"] for a, b in zip(sorted(d, key=lambda r: r["seed"]),
                                                                            sorted(s, key=lambda r: r["seed"]))]
        ratio, bytes_ratio = dl[0] / sl[0], sb / db
        summary.append({"M": M, "diloco_lr": dlr, "sync_lr": slr, "diloco_heldout": dl, "sync_heldout": sl,
                        "diloco_mase": dm, "sync_mase": sm, "diloco_train": dt, "sync_train": st,
                        "loss_ratio": ratio, "loss_ratio_per_seed": per_seed, "train_window_ratio": dt[0] / st[0], "bytes_diloco": db, "bytes_sync": sb,
                        "bytes_ratio": bytes_ratio, "encoded_bytes_diloco": d[0]["encoded_bytes_per_worker"],
                        "meets_loss_floor": ratio <= 1.05, "meets_bytes_floor": bytes_ratio >= 24})
        lines.append(f"| {M} | DiLoCo | {dlr:g} | {dl[0]:.4f} ± {dl[1]:.4f} | {dm[0]:.3f} ± {dm[1]:.3f} | {dt[0]:.4f} ± {dt[1]:.4f} "
                     f"| {db / 1e6:.2f} MB | {ratio:.3f} (per seed {', '.join(f'{x:.3f}' for x in per_seed)}) | {bytes_ratio:.1f}x |")
        lines.append(f"| {M} | sync DP | {slr:g} | {sl[0]:.4f} ± {sl[1]:.4f} | {sm[0]:.3f} ± {sm[1]:.3f} | {st[0]:.4f} ± {st[1]:.4f} "
                     f"| {sb / 1e6:.2f} MB | 1 | 1 |")
    lines += ["", "Floors (issue 4): DiLoCo held-out loss <= 1.05 x sync; >= 24x fewer bytes.", ""]
    for s in summary:
        lines.append(f"- M={s['M']}: loss ratio {s['loss_ratio']:.3f} -> {'meets' if s['meets_loss_floor'] else 'MISSES'} "
                     f"the 1.05 floor; bytes ratio {s['bytes_ratio']:.1f}x -> {'meets' if s['meets_bytes_floor'] else 'MISSES'} "
                     f"the 24x floor (with safetensors headers DiLoCo sends {s['encoded_bytes_diloco'] / 1e6:.3f} MB, "
                     f"ratio {s['bytes_sync'] / s['encoded_bytes_diloco']:.2f}x); train-window loss ratio "
                     f"{s['train_window_ratio']:.3f}.")
    lines += ["", "## All runs", "", "| method | M | lr | seed | held-out loss | MASE | sMAPE % | train-window loss | wall s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        lines.append(f"| {r['method']} | {r['M']} | {r['lr']:g} | {r['seed']} | {r['heldout_loss']:.4f} | {r['mase']:.3f} | "
                     f"{r['smape']:.2f} | {r['train_window_loss']:.4f} | {r['wall_s']:.0f} |")
    write(args.name, "\n".join(lines), {"args": vars(args), "machine": m, "summary": summary, "runs": runs})
    print("\n".join(lines))


if __name__ == "__main__":
    main()

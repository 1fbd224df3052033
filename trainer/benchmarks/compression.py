"""Benchmark: compressed outer gradients. Bytes one trainer uploads per round under each codec, against
uncompressed DiLoCo (fp32 payloads) and synchronous data-parallel (H fp32 gradients per round), and
the held-out loss after the same number of rounds relative to uncompressed DiLoCo and to a tuned
synchronous data-parallel baseline, same seed.

Bytes are exact: every payload the simulator sends is measured (safetensors header included) and
checked against ``tenzro_trainer.compression.round_upload_bytes``; "data" counts tensor bytes
only. Losses: held-out MSE on rolling-origin windows (up to 12 per series), final round and the
mean of the last three rounds, and the loss on fixed training windows (steadier, EVALUATION.md).
Each run uses ``tenzro_trainer.simulate`` with ``SimConfig.compression`` (per-worker error feedback
where the codec has it). Codecs marked "SparseLoCo outer" replace outer Nesterov (lr 0.7, momentum
0.9) with plain SGD lr 1.0, no momentum, as SparseLoCo does (its error feedback plays the momentum).

The synchronous baseline (``tenzro_trainer.simulate_sync``: same model, data, workers and global
batch, rounds x H AdamW steps) is tuned as EVALUATION.md asks: its learning rate is swept over
``--sync-lrs`` and the one with the lowest mean over seeds of the last three rounds' held-out loss
is the reference of the "vs sync DP" loss ratios (:func:`pick_sync_lr`, :func:`bytes_ratio_at_loss`).

    .venv/bin/python trainer/benchmarks/compression.py --seeds 0 1 2 --rounds 30
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

from _common import machine, write
from tenzro_trainer.compression import MXCodec, NoCompression, TopKCodec, data_bytes, round_upload_bytes, sync_dp_bytes
from tenzro_trainer.config import InnerConfig, ModelConfig, OuterConfig
from tenzro_trainer.data import default_collection
from tenzro_trainer.fragments import partition
from tenzro_trainer.models import build_model
from tenzro_trainer.simulate import SimConfig, simulate, simulate_sync

NESTEROV = OuterConfig()
SPARSELOCO_OUTER = OuterConfig(lr=1.0, momentum=0.0, nesterov=False)

# name -> (codec, outer optimizer, description)
CODECS = {
    "fp32": (NoCompression(), NESTEROV, "uncompressed (reference)"),
    "mx_int8": (MXCodec(element="int8"), NESTEROV, "MXINT8"),
    "mx_fp8": (MXCodec(element="fp8_e4m3"), NESTEROV, "MXFP8 E4M3"),
    "mx_fp6": (MXCodec(element="fp6_e3m2"), NESTEROV, "MXFP6 E3M2"),
    "mx_fp4": (MXCodec(element="fp4_e2m1"), NESTEROV, "MXFP4 E2M1"),
    "mx_fp4_ef": (MXCodec(element="fp4_e2m1", error_feedback=True), NESTEROV, "MXFP4 E2M1, error feedback"),
    "topk3_2b": (TopKCodec(k=123, chunk=4096, bits=2), NESTEROV, "top 3% (123 of 4096), 2-bit, EF"),
    "topk1_2b": (TopKCodec(k=41, chunk=4096, bits=2), NESTEROV, "top 1% (41 of 4096), 2-bit, EF"),
    "topk1_fp32": (TopKCodec(k=41, chunk=4096, bits=32), NESTEROV, "top 1%, fp32 values, EF"),
    "topk3_2b_sl": (TopKCodec(k=123, chunk=4096, bits=2), SPARSELOCO_OUTER, "top 3%, 2-bit, EF; SparseLoCo outer"),
    "topk3_2b_sl2": (TopKCodec(k=123, chunk=4096, bits=2), OuterConfig(lr=2.0, momentum=0.0, nesterov=False),
                     "top 3%, 2-bit, EF; outer SGD lr 2.0, no momentum"),
    "topk1_2b_sl": (TopKCodec(k=41, chunk=4096, bits=2), SPARSELOCO_OUTER, "top 1%, 2-bit, EF; SparseLoCo outer"),
    "topk1_2b_sl_ef95": (TopKCodec(k=41, chunk=4096, bits=2, ef_decay=0.95), SPARSELOCO_OUTER,
                         "top 1%, 2-bit, EF decay 0.95; SparseLoCo outer"),
}
DEFAULT_LOSS_CODECS = ["fp32", "mx_int8", "mx_fp8", "mx_fp4", "topk3_2b", "topk3_2b_sl", "topk3_2b_sl2", "topk1_2b_sl"]


def mean_sd(xs):
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def pick_sync_lr(sweep: dict[float, list[float]]) -> float:
    """The learning rate of ``sweep`` (lr -> one loss per seed) with the lowest mean loss; a
    non-finite mean (a diverged seed) never wins, and equal means go to the first lr given.

    Raises:
        ValueError: every lr has a non-finite mean loss.
    """
    finite = {lr: statistics.fmean(xs) for lr, xs in sweep.items() if math.isfinite(statistics.fmean(xs))}
    if not finite:
        raise ValueError(f"every sync learning rate diverged: {sorted(sweep)}")
    return min(finite, key=finite.__getitem__)


def curve_min(curves: list[list[float]]) -> tuple[int, float]:
    """(round, loss) of the minimum of the per-round mean over seeds of held-out curves (round 0 = init)."""
    mean = [statistics.fmean(xs) for xs in zip(*curves)]
    i = min(range(len(mean)), key=mean.__getitem__)
    return i, mean[i]


def bytes_ratio_at_loss(rows: list[dict], max_loss_ratio: float) -> dict | None:
    """The row with the largest ``vs_sync`` (bytes fewer than sync DP) among rows whose mean loss
    ratio vs sync DP (``loss_vs_sync[0]``) is at most ``max_loss_ratio``; None when none is."""
    ok = [r for r in rows if r["loss_vs_sync"][0] <= max_loss_ratio]
    return max(ok, key=lambda r: r["vs_sync"]) if ok else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--H", type=int, default=24)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--fragments", type=int, default=4)
    ap.add_argument("--loss-codecs", nargs="+", default=DEFAULT_LOSS_CODECS, choices=sorted(CODECS))
    ap.add_argument("--sync-lrs", type=float, nargs="+", default=[1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
                    help="inner learning rates of the synchronous data-parallel sweep")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", default="compression")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = ModelConfig.preset(args.preset)
    state = build_model(model).state_dict()
    P = sum(t.numel() for t in state.values())
    layouts = [{n: tuple(state[n].shape) for n in names} for names in partition(state, args.fragments)]
    sync_round = sync_dp_bytes(P, args.H)
    fp32_round = round_upload_bytes(NoCompression(), layouts)

    # ---- bytes: exact, from the layouts (the simulated runs below are checked against it)
    bytes_rows = []
    for name, (codec, _, desc) in CODECS.items():
        total = round_upload_bytes(codec, layouts)
        data = sum(data_bytes(codec, sum(int(torch.Size(s).numel()) for s in lay.values())) for lay in layouts)
        bytes_rows.append({"codec": name, "desc": desc, "round_bytes": total, "data_bytes": data,
                           "vs_fp32": fp32_round / total, "vs_sync": sync_round / total, "vs_sync_data": sync_round / data})

    # ---- loss at equal rounds
    df = default_collection()
    t_start = time.perf_counter()
    runs, sync_runs = [], []
    for seed in args.seeds:
        for lr in args.sync_lrs:
            cfg = SimConfig(model=model, inner=InnerConfig(steps=args.H, batch_size=args.batch, seed=seed),
                            workers=args.workers, rounds=args.rounds, fragments=args.fragments, seed=seed)
            res = simulate_sync(cfg, df, lr=lr)
            held = [r["heldout_loss"] for r in res.rounds]
            sync_runs.append({"lr": lr, "seed": seed, "final": held[-1], "last3": statistics.fmean(held[-3:]),
                              "train_window": res.rounds[-1]["train_window_loss"], "mase": res.rounds[-1]["mase"],
                              "upload_bytes": res.rounds[-1]["upload_bytes"], "curve": held, "wall_s": res.wall_s})
            print(f"seed {seed} sync DP lr {lr:<8g} held-out final {held[-1]:.4f} last3 {sync_runs[-1]['last3']:.4f} "
                  f"train-window {sync_runs[-1]['train_window']:.4f} ({res.wall_s:.0f}s)", flush=True)
        for name in args.loss_codecs:
            codec, outer, _ = CODECS[name]
            cfg = SimConfig(model=model, inner=InnerConfig(steps=args.H, batch_size=args.batch, seed=seed), outer=outer,
                            workers=args.workers, rounds=args.rounds, fragments=args.fragments, seed=seed,
                            compression=None if isinstance(codec, NoCompression) else codec)
            res = simulate(cfg, df)
            held = [r["heldout_loss"] for r in res.rounds]
            up = res.rounds[-1]["upload_bytes"]
            expected = round_upload_bytes(codec, layouts, {"task": cfg.task, "round": str(args.rounds), "trainer": "worker000",
                                                           "dtype": "float32", "kind": "pseudo_gradient", "fragment": "0"})
            runs.append({"codec": name, "seed": seed, "final": held[-1], "last3": statistics.fmean(held[-3:]),
                         "train_window": res.rounds[-1]["train_window_loss"], "mase": res.rounds[-1]["mase"],
                         "upload_bytes": up, "accounting_bytes": expected, "curve": held, "wall_s": res.wall_s})
            print(f"seed {seed} {name:18s} held-out final {held[-1]:.4f} last3 {runs[-1]['last3']:.4f} "
                  f"train-window {runs[-1]['train_window']:.4f} upload {up} B/round ({res.wall_s:.0f}s)", flush=True)
    total_s = time.perf_counter() - t_start

    def ratio(name, key):
        per_seed = []
        for seed in args.seeds:
            a = next(r for r in runs if r["codec"] == name and r["seed"] == seed)
            b = next(r for r in runs if r["codec"] == "fp32" and r["seed"] == seed)
            per_seed.append(a[key] / b[key])
        return per_seed

    # ---- the tuned synchronous baseline: the lr with the lowest mean last-3 held-out loss
    sweep = {lr: [r["last3"] for r in sync_runs if r["lr"] == lr] for lr in args.sync_lrs}
    sync_lr = pick_sync_lr(sweep)
    sync_ref = {r["seed"]: r for r in sync_runs if r["lr"] == sync_lr}

    def ratio_sync(name, key):
        return [next(r for r in runs if r["codec"] == name and r["seed"] == seed)[key] / sync_ref[seed][key]
                for seed in args.seeds]

    m = machine()
    n_rounds_note = "" if len(args.seeds) >= 3 and args.rounds >= 30 else " (fewer seeds/rounds than the issue's bar)"
    lines = [
        "# Compressed outer gradients: bytes per round and loss at equal rounds",
        "",
        f"Model: timesfm preset `{args.preset}` ({P} parameters) in {args.fragments} fragments; M={args.workers} workers, "
        f"H={args.H}, per-worker batch {args.batch}, {args.rounds} rounds, seeds {args.seeds}{n_rounds_note}; Mean "
        f"aggregation, no screen. Data: the default collection, held-out tail, up to 12 rolling origins per series.",
        "",
        f"Machine: {m['cpus']} CPUs shared with other jobs, torch threads {args.threads}, load average "
        f"{m['loadavg_1_5_15']} at the end; loss runs took {total_s:.0f} s.",
        "",
        "## Bytes one trainer uploads per round",
        "",
        f"Uncompressed DiLoCo: {fp32_round} B per round (fp32 payloads with headers); synchronous data-parallel: "
        f"H x 4 x P = {sync_round} B per round (fp32 gradients, no headers). Exact for these fragments "
        f"(`round_upload_bytes`; every simulated round measured the same). The syncer's broadcast of the new "
        f"weights (fp32, {4 * P} B of data per round) is not compressed and not counted here.",
        "",
        "| codec | what | bytes / round | of which tensor data | fewer than fp32 DiLoCo | fewer than sync DP | (data only) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b in bytes_rows:
        lines.append(f"| {b['codec']} | {b['desc']} | {b['round_bytes']} | {b['data_bytes']} | {b['vs_fp32']:.1f}x | "
                     f"{b['vs_sync']:.0f}x | {b['vs_sync_data']:.0f}x |")
    lines += [
        "",
        "## Held-out loss relative to uncompressed DiLoCo, same seed, same rounds",
        "",
        "Ratios per seed (codec / fp32); mean ± sd over seeds. `last3` = mean held-out loss of the last three rounds.",
        "",
        "| codec | bytes fewer than sync DP | held-out final | held-out last3 | last3 per seed | train-window loss | absolute last3 (mean ± sd) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    summary = []
    by_name = {b["codec"]: b for b in bytes_rows}
    for name in args.loss_codecs:
        fin, l3, tw = ratio(name, "final"), ratio(name, "last3"), ratio(name, "train_window")
        absl3 = mean_sd([r["last3"] for r in runs if r["codec"] == name])
        s = {"codec": name, "final": mean_sd(fin), "last3": mean_sd(l3), "last3_per_seed": l3, "train_window": mean_sd(tw),
             "vs_sync": by_name[name]["vs_sync"], "abs_last3": absl3}
        summary.append(s)
        lines.append(f"| {name} | {s['vs_sync']:.0f}x | {s['final'][0]:.3f} ± {s['final'][1]:.3f} | "
                     f"{s['last3'][0]:.3f} ± {s['last3'][1]:.3f} | {', '.join(f'{x:.3f}' for x in l3)} | "
                     f"{s['train_window'][0]:.3f} ± {s['train_window'][1]:.3f} | {absl3[0]:.4f} ± {absl3[1]:.4f} |")
    ok = [s for s in summary if s["codec"] != "fp32" and s["last3"][0] <= 1.05 and s["train_window"][0] <= 1.05]
    best = max(ok, key=lambda s: s["vs_sync"]) if ok else None
    lines += [
        "",
        "The held-out loss of this small model at 30 rounds is a weak judge: the slower-learning top-k runs sit at a "
        "lower held-out loss than fp32 while their loss on fixed training windows is clearly worse (underfitting, "
        "which the held-out tail does not punish yet). A codec counts as 'equal loss' below only when both its "
        "held-out last-3 ratio and its train-window ratio are <= 1.05, each the mean over seeds, relative to "
        "*uncompressed DiLoCo* (not a tuned synchronous baseline):",
        "",
        "    bytes ratio vs sync DP at loss ratio (vs uncompressed DiLoCo; held-out last-3 and train-window) <= 1.05: "
        + (f"{best['vs_sync']:.0f}x ({best['codec']}: held-out last3 {best['last3'][0]:.3f}, train-window "
           f"{best['train_window'][0]:.3f})" if best else "none"),
    ]
    edge = sync_lr in (min(args.sync_lrs), max(args.sync_lrs))
    lines += [
        "",
        "## Tuned synchronous data-parallel baseline",
        "",
        f"`simulate_sync`: the same model, data, shards and initial weights, global batch {args.workers} x {args.batch} "
        f"= {args.workers * args.batch} windows per step (each worker's share from its own shard), "
        f"{args.rounds} x {args.H} = {args.rounds * args.H} AdamW steps, evaluated every {args.H} steps (a 'round'). "
        f"Its inner learning rate is swept (DiLoCo's inner lr is {InnerConfig().lr:g}); the lr with the lowest mean "
        f"over seeds of the last-3 held-out loss is the reference below. Ratios in this table: sync DP at that lr / "
        f"uncompressed DiLoCo (fp32), same seed.",
        "",
        "| sync lr | held-out last3 (mean ± sd) | last3 per seed | held-out final (mean ± sd) | train-window (mean ± sd) "
        "| last3 vs fp32 DiLoCo | train-window vs fp32 DiLoCo | lowest mean held-out (round) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    sweep_rows = []
    fp32_by_seed = {r["seed"]: r for r in runs if r["codec"] == "fp32"}
    for lr in args.sync_lrs:
        rs = [next(r for r in sync_runs if r["lr"] == lr and r["seed"] == seed) for seed in args.seeds]
        row = {"lr": lr, "last3": mean_sd([r["last3"] for r in rs]), "last3_per_seed": [r["last3"] for r in rs],
               "final": mean_sd([r["final"] for r in rs]), "train_window": mean_sd([r["train_window"] for r in rs]),
               "last3_vs_fp32": mean_sd([r["last3"] / fp32_by_seed[r["seed"]]["last3"] for r in rs]),
               "train_window_vs_fp32": mean_sd([r["train_window"] / fp32_by_seed[r["seed"]]["train_window"] for r in rs]),
               "curve_min": curve_min([r["curve"] for r in rs])}
        sweep_rows.append(row)
        vs = (f"{row['last3_vs_fp32'][0]:.3f} ± {row['last3_vs_fp32'][1]:.3f} | "
              f"{row['train_window_vs_fp32'][0]:.3f} ± {row['train_window_vs_fp32'][1]:.3f}")
        lines.append(f"| {lr:g}{' (chosen)' if lr == sync_lr else ''} | {row['last3'][0]:.4f} ± {row['last3'][1]:.4f} | "
                     f"{', '.join(f'{x:.4f}' for x in row['last3_per_seed'])} | "
                     f"{row['final'][0]:.4f} ± {row['final'][1]:.4f} | "
                     f"{row['train_window'][0]:.4f} ± {row['train_window'][1]:.4f} | {vs} | "
                     f"{row['curve_min'][1]:.4f} ({row['curve_min'][0]}) |")
    ranked = sorted((r for r in sweep_rows if math.isfinite(r["last3"][0])), key=lambda r: r["last3"][0])
    runner = ranked[1] if len(ranked) > 1 else None
    lines += [
        "",
        f"Chosen: lr {sync_lr:g}" + (" (at the edge of the sweep: a wider sweep might find a better one)" if edge
                                    else " (inside the sweep: both neighbours are worse)")
        + (f"; runner-up lr {runner['lr']:g}, {100 * (runner['last3'][0] / ranked[0]['last3'][0] - 1):.2f}% higher "
           f"mean last-3 held-out loss (the seed-to-seed sd of the chosen lr is {ranked[0]['last3'][1]:.4f})." if runner
           else "."),
        "",
        "## Loss vs the tuned synchronous baseline, with bytes",
        "",
        f"Loss ratio = the codec's mean held-out loss over the last three rounds / sync DP's (lr {sync_lr:g}), same "
        f"seed; mean ± sd over seeds. Sync DP at equal steps and samples uploads H x 4 x P = {sync_round} B per "
        f"worker per round; bytes ratio = that / the codec's bytes per round. The train-window ratio (same "
        f"definition on the fixed training windows, final round) is shown as a check; it does not enter the line "
        f"at the end.",
        "",
        "| codec | bytes fewer than sync DP | held-out last3 vs sync DP | last3 per seed | train-window vs sync DP "
        "| lowest mean held-out (round) | lowest vs sync DP's lowest at any lr |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    sync_min = curve_min([sync_ref[seed]["curve"] for seed in args.seeds])
    sync_any = min(sweep_rows, key=lambda r: r["curve_min"][1] if math.isfinite(r["curve_min"][1]) else math.inf)
    vs_sync_rows = []
    for name in args.loss_codecs:
        l3, tw = ratio_sync(name, "last3"), ratio_sync(name, "train_window")
        row = {"codec": name, "vs_sync": by_name[name]["vs_sync"], "loss_vs_sync": mean_sd(l3),
               "loss_vs_sync_per_seed": l3, "train_window_vs_sync": mean_sd(tw),
               "curve_min": curve_min([r["curve"] for r in runs if r["codec"] == name])}
        vs_sync_rows.append(row)
        lines.append(f"| {name} | {row['vs_sync']:.0f}x | {row['loss_vs_sync'][0]:.3f} ± {row['loss_vs_sync'][1]:.3f} | "
                     f"{', '.join(f'{x:.3f}' for x in l3)} | {row['train_window_vs_sync'][0]:.3f} ± "
                     f"{row['train_window_vs_sync'][1]:.3f} | {row['curve_min'][1]:.4f} ({row['curve_min'][0]}) | "
                     f"{row['curve_min'][1] / sync_any['curve_min'][1]:.3f} |")
    at105, at102 = bytes_ratio_at_loss(vs_sync_rows, 1.05), bytes_ratio_at_loss(vs_sync_rows, 1.02)
    ok105 = [r for r in vs_sync_rows if r["loss_vs_sync"][0] <= 1.05]
    tw_best = min(sweep_rows, key=lambda r: r["train_window"][0])
    chosen_row = next(r for r in sweep_rows if r["lr"] == sync_lr)
    sync_ref_last3 = statistics.fmean(sync_ref[seed]["last3"] for seed in args.seeds)
    strict = bytes_ratio_at_loss([r for r in vs_sync_rows if r["train_window_vs_sync"][0] <= 1.05], 1.05)

    def verdict(best, need):
        if best is None:
            return "not met (no codec qualifies)"
        return f"{'met' if best['vs_sync'] >= need else 'not met'} ({best['vs_sync']:.0f}x, {best['codec']})"

    lines += [
        "",
        f"The issue's floor is at least 100x fewer bytes than sync DP at a loss ratio <= 1.05, its target 400x at "
        f"<= 1.02 (loss ratio vs the tuned sync DP, mean over seeds of the last-3 held-out loss). Floor: "
        f"{verdict(at105, 100)}; target: {verdict(at102, 400)}. With the stricter reading (the train-window ratio vs "
        f"sync DP also <= 1.05): "
        + (f"{strict['vs_sync']:.0f}x ({strict['codec']})." if strict else "no codec qualifies."),
        "",
        f"Read the held-out ratios with care. The mean held-out curve of the chosen sync DP is lowest at round "
        f"{sync_min[0]} ({sync_min[1]:.4f}); its last-3 mean is {sync_ref_last3:.4f} "
        f"({100 * (sync_ref_last3 / sync_min[1] - 1):+.1f}%)"
        + (": it rises after its minimum (the model overfits the training series), so at a fixed late round the "
           "held-out loss rewards runs that learn slowly" if sync_min[0] < args.rounds - 2 else "")
        + f". In the sweep the lowest train-window loss is at lr {tw_best['lr']:g} ({tw_best['train_window'][0]:.4f}), "
        f"the lowest held-out last-3 at lr {sync_lr:g}, whose train-window loss is "
        f"{chosen_row['train_window_vs_fp32'][0]:.3f}x uncompressed DiLoCo's"
        + (" (the tuned baseline is under-trained: the held-out criterion prefers it because the held-out tail "
           "punishes fitting the training series)" if chosen_row["train_window_vs_fp32"][0] > 1.05 else "")
        + f". The codecs within 1.05 on held-out loss have train-window "
        f"ratios vs sync DP of "
        + (f"{min(r['train_window_vs_sync'][0] for r in ok105):.3f}-{max(r['train_window_vs_sync'][0] for r in ok105):.3f}"
           if ok105 else "(none)")
        + ". The 'lowest' columns (the best round of each mean curve, a checkpoint picked on held-out data, so "
        f"optimistic for every run alike; sync DP's lowest at any lr is {sync_any['curve_min'][1]:.4f}, lr "
        f"{sync_any['lr']:g}, round {sync_any['curve_min'][0]}) are a diagnostic, not the metric of the line below.",
    ]
    lines += [
        "",
        "Every simulated round's upload matched the accounting: "
        + ("yes" if all(r["upload_bytes"] == r["accounting_bytes"] for r in runs) else "NO, see json"),
        "",
        "## All runs",
        "",
        "| codec | seed | held-out final | held-out last3 | train-window | MASE | upload B/round | wall s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        lines.append(f"| {r['codec']} | {r['seed']} | {r['final']:.4f} | {r['last3']:.4f} | {r['train_window']:.4f} | "
                     f"{r['mase']:.3f} | {r['upload_bytes']} | {r['wall_s']:.0f} |")
    for r in sync_runs:
        lines.append(f"| sync DP lr {r['lr']:g} | {r['seed']} | {r['final']:.4f} | {r['last3']:.4f} | "
                     f"{r['train_window']:.4f} | {r['mase']:.3f} | {r['upload_bytes']} | {r['wall_s']:.0f} |")
    lines += ["", "bytes ratio vs sync DP at loss ratio <= 1.05: " + (f"{at105['vs_sync']:.0f}x" if at105 else "none")]
    write(args.name, "\n".join(lines), {"args": vars(args), "machine": m, "params": P, "sync_round_bytes": sync_round,
                                        "fp32_round_bytes": fp32_round, "bytes": bytes_rows, "summary": summary,
                                        "runs": runs, "sync_lr": sync_lr, "sync_sweep": sweep_rows,
                                        "sync_runs": sync_runs, "vs_sync": vs_sync_rows})
    print("\n".join(lines))


if __name__ == "__main__":
    main()

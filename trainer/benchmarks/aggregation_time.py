"""Benchmark: time per aggregation rule for K pseudo-gradients over P parameters (default K=6, P=10M),
plus payload validation and the codec, against a plain ``torch.stack(...).mean(0)`` measured in the same run.

    .venv/bin/python trainer/benchmarks/aggregation_time.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from _common import machine, write
from tenzro_trainer.aggregation import CoordinateMedian, Krum, Mean, TrimmedMean, screen_payloads
from tenzro_trainer.codec import decode_fragment, encode_fragment


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--params", type=int, default=10_000_000)
    ap.add_argument("--tensors", type=int, default=10, help="the P parameters are split into this many tensors")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    per = args.params // args.tensors
    ups = {f"0x{i:040x}": {f"layer{j}.weight": torch.randn(per, generator=g) for j in range(args.tensors)} for i in range(args.k)}
    layout = {n: ((per,), torch.float32) for n in ups[next(iter(ups))]}
    rules = [Mean(), TrimmedMean(alpha_bps=1700), CoordinateMedian(), Krum(f=1)]
    rows = []
    base_med, base_min = timed(lambda: torch.stack([torch.cat(list(u.values())) for u in ups.values()]).mean(0), args.repeats)
    rows.append(("baseline: torch.stack(...).mean(0)", base_med, base_min))
    for r in rules:
        med, mn = timed(lambda: r(ups), args.repeats)
        rows.append((repr(r), med, mn))
    med, mn = timed(lambda: screen_payloads(ups, layout, norm_multiple=10.0), args.repeats)
    rows.append(("validation: screen_payloads (names, shapes, dtype, finite, norm)", med, mn))
    meta = dict(task="1", round=1, fragment=0, trainer="t", dtype="float32", kind="pseudo_gradient")
    one = ups[next(iter(ups))]
    blob = encode_fragment(one, meta)
    med, mn = timed(lambda: encode_fragment(one, meta), args.repeats)
    rows.append((f"codec: encode one payload ({len(blob) / 1e6:.1f} MB)", med, mn))
    med, mn = timed(lambda: decode_fragment(blob), args.repeats)
    rows.append(("codec: decode one payload", med, mn))
    m = machine()
    lines = [
        f"# Aggregation time: K={args.k} pseudo-gradients of {args.params / 1e6:g}M fp32 parameters",
        "",
        f"{args.tensors} tensors of {per} parameters per submission; {args.repeats} repeats; "
        f"torch threads {args.threads}; machine: {m['cpus']} CPUs shared with other jobs, load average "
        f"{m['loadavg_1_5_15']} at the end of the run ({m['utc']} UTC).",
        "",
        "| operation | median s | min s | vs baseline (median) |",
        "| --- | --- | --- | --- |",
    ]
    for name, med, mn in rows:
        lines.append(f"| {name} | {med:.3f} | {mn:.3f} | {med / base_med:.2f}x |")
    lines += ["", "Krum does K(K-1)/2 = 15 pairwise distances over 10M coordinates; median and trimmed mean sort K values per coordinate."]
    write("aggregation_time", "\n".join(lines),
          {"args": vars(args), "machine": m, "rows": [{"op": n, "median_s": a, "min_s": b} for n, a, b in rows]})
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Benchmark: held-out loss per round of DiLoCo at the demo's scale for several outer
optimizer settings (lr, Nesterov momentum), with no chain (`tenzro_trainer.simulate`). The
first row, lr 0.7 / momentum 0.9 (DiLoCo's values), is the baseline measured in the same run;
it reproduces the curve `make demo` prints (4 trainers, F=12, H=24, batch 64, demo preset).

    .venv/bin/python trainer/benchmarks/outer_momentum.py
"""

from __future__ import annotations

import argparse

import torch

from _common import machine, write
from tenzro_trainer.config import InnerConfig, OuterConfig
from tenzro_trainer.simulate import SimConfig, simulate

SETTINGS = [(0.7, 0.9), (0.7, 0.5), (0.7, 0.3), (1.0, 0.5), (0.4, 0.9)]  # (lr, momentum); first = baseline


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for lr, momentum in SETTINGS:
        cfg = SimConfig(inner=InnerConfig(steps=24, batch_size=64), outer=OuterConfig(lr=lr, momentum=momentum),
                        workers=4, rounds=args.rounds, fragments=12)
        losses = [r["heldout_loss"] for r in simulate(cfg).rounds]
        rows.append({"lr": lr, "momentum": momentum, "heldout_loss": losses})
        print(f"lr {lr} momentum {momentum}: " + " ".join(f"{x:.3f}" for x in losses), flush=True)
    base = rows[0]["heldout_loss"]
    head = "| lr | momentum | " + " | ".join(f"r{r}" for r in range(args.rounds + 1)) + " | final / baseline |"
    lines = ["# Outer optimizer settings at the demo's scale (no chain)", "",
             "Held-out loss of the global weights after each round (r0 = initial weights); 4 workers, "
             "F = 12, H = 24, per-worker batch 64, demo preset, Mean aggregation, seed 0. Baseline: "
             "lr 0.7, Nesterov momentum 0.9 (DiLoCo, Douillard et al. 2023, Sec. 2).", "",
             f"Machine: {machine()}", "", head, "|" + " --- |" * (args.rounds + 4)]
    for row in rows:
        loss = row["heldout_loss"]
        lines.append(f"| {row['lr']} | {row['momentum']} | " + " | ".join(f"{x:.3f}" for x in loss)
                     + f" | {loss[-1] / base[-1]:.3f} |")
    md, _ = write("outer_momentum", "\n".join(lines), {"machine": machine(), "rows": rows})
    print(f"wrote {md}")


if __name__ == "__main__":
    main()

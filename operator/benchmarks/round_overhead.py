"""Share of a round's wall time spent outside the inner steps (IPFS, chain, aggregation), demo scale.

Reads the per-round timing files the daemons write during a run
(`<workdir>/syncer/syncer-rounds.jsonl`, `<workdir>/trainer-*/trainer-rounds.jsonl`) and
compares, round by round, the round's wall time (opened on-chain -> finalized) with the
inner-step time of the trainers measured in the same run.

    python operator/benchmarks/round_overhead.py                 # runs `make demo`'s job first
    python operator/benchmarks/round_overhead.py --workdir DIR   # a finished demo's work dir

Prints a table and writes operator/benchmarks/results/round_overhead.md.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "operator" / "benchmarks" / "results" / "round_overhead.md"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def overhead_rows(workdir: Path) -> list[dict]:
    """One row per round: wall, trainer inner / fetch / submit (means over trainers), syncer split."""
    syncer = {r["round"]: r for r in _jsonl(next(workdir.glob("syncer/**/syncer-rounds.jsonl")))}
    trainers = [_jsonl(p) for p in sorted(workdir.glob("trainer-*/**/trainer-rounds.jsonl"))]
    rows = []
    for r, s in sorted(syncer.items()):
        tr = [x for t in trainers for x in t if x["round"] == r]
        if not tr:
            continue
        inner = statistics.mean(x["inner_s"] for x in tr)
        rows.append({
            "round": r, "wall_s": s["wall_s"], "inner_s": inner,
            "trainer_fetch_s": statistics.mean(x["fetch_s"] for x in tr),
            "trainer_submit_s": statistics.mean(x["submit_s"] for x in tr),
            "syncer_fetch_validate_s": s["fetch_s"] + s["validate_s"], "syncer_aggregate_s": s["aggregate_s"],
            "syncer_pin_s": s["pin_s"], "syncer_chain_s": s["chain_s"],
            "outside_share": max(0.0, 1.0 - inner / s["wall_s"]) if s["wall_s"] > 0 else float("nan"),
        })
    return rows


def render(rows: list[dict], command: str, note: str) -> str:
    cols = ["round", "wall_s", "inner_s", "outside_share", "trainer_fetch_s", "trainer_submit_s",
            "syncer_fetch_validate_s", "syncer_aggregate_s", "syncer_pin_s", "syncer_chain_s"]
    lines = ["# Round overhead at demo scale", "", f"Command: `{command}`", "", note, "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c]) for c in cols) + " |")
    steady = [r["outside_share"] for r in rows[1:]] or [r["outside_share"] for r in rows]
    lines += ["", f"Share of round wall time outside the inner steps, rounds after the first: "
                  f"mean {statistics.mean(steady):.2f}, min {min(steady):.2f}, max {max(steady):.2f} "
                  f"(round 0 includes the daemons' start-up)."]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--workdir", type=click.Path(path_type=Path, exists=True), default=None,
              help="A finished demo's work dir (default: run the demo now).")
def main(workdir: Path | None) -> None:
    console = Console()
    if workdir is None:
        from tenzro_operator.demo import DemoSettings, run_demo

        task = f"bench-{int(time.time())}"
        workdir = REPO / ".devnet" / "demo" / task
        run_demo(DemoSettings(task_id=task, workdir=workdir))
    rows = overhead_rows(workdir)
    t = Table(title="round overhead (seconds)")
    for c in rows[0]:
        t.add_column(c, justify="right")
    for row in rows:
        t.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()))
    console.print(t)
    import os

    note = (f"Machine: {os.cpu_count()} CPU cores, 1 syncer and the trainers as separate processes on the "
            f"same machine; wall = round opened on-chain (block time, 1 s resolution) to finalized. "
            f"'Outside' is everything but the H inner steps: weight download, pseudo-gradient encode + pin + "
            f"sign + submit (one transaction per fragment), the syncer's validation, aggregation, pinning and "
            f"finalize, and its straggler wait after quorum (`straggler_wait_s`). At demo scale the model is "
            f"tiny (90k parameters, inner steps under a second), so these fixed costs dominate; they do not "
            f"grow with H, so the share falls as the model and H grow.")
    RESULTS.write_text(render(rows, "python " + " ".join(sys.argv), note))
    console.print(f"written {RESULTS}")


if __name__ == "__main__":
    main()

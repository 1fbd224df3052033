"""Watcher lag at demo scale: how far behind the chain the watcher's check of each round lands.

`make demo`'s job runs a watcher beside the syncer and the trainers (`tenzro_operator.demo`); it
writes one line per round checked to ``<workdir>/watcher/watcher-rounds.jsonl``: the replay time
(fetch every accepted payload, decode, aggregate, outer step, encode, hash) and the lag, in
blocks and in chain seconds, between the round's commit and the end of its check. This script
runs that job (or reads a finished one) and tabulates them.

    python operator/benchmarks/watcher_lag.py                 # runs `make demo`'s job first (devnet up)
    python operator/benchmarks/watcher_lag.py --workdir DIR   # a finished demo's work dir

Prints a table and writes operator/benchmarks/results/watcher_lag.md. `make demo` runs the v1
flow, where a wrong round has no on-chain remedy; the time from a wrong commit to its fraud proof
landing is measured on the root flow by operator/benchmarks/proof_latency.py.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from tenzro_operator.demo import watcher_rounds

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "operator" / "benchmarks" / "results" / "watcher_lag.md"
COLS = ("round", "ok", "accepted", "payloads", "replay_s", "lag_blocks", "lag_s")


def render(rows: list[dict], command: str) -> str:
    """The results file: the command, the machine, one row per round, the summary lines."""
    lines = ["# Watcher lag at demo scale", "", f"Command: `{command}`", "",
             f"Machine: {os.cpu_count()} CPU cores shared by the syncer, {{M}} trainers and the watcher (separate "
             "processes); devnet blocks come only with transactions, so a lag in blocks counts the transactions "
             "mined meanwhile. lag_s: chain seconds from the round's commit to the end of its check (1 s "
             "resolution). replay_s: the watcher's own time to replay the round.", "",
             "| " + " | ".join(COLS) + " |", "|" + "---|" * len(COLS)]
    for r in rows:
        lines.append("| " + " | ".join(str(r[c]) for c in COLS) + " |")
    lags = [r["lag_s"] for r in rows]
    replays = [r["replay_s"] for r in rows]
    lines += ["", f"rounds checked: {len(rows)}, mismatches: {sum(1 for r in rows if not r['ok'])}",
              f"watcher lag per round, median: {statistics.median(lags):.1f} s (max {max(lags):.1f} s)",
              f"watcher replay per round, median: {statistics.median(replays):.2f} s"]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--workdir", type=click.Path(path_type=Path, exists=True), default=None,
              help="A finished demo's work dir (default: run the demo now).")
@click.option("--trainers", default=4, show_default=True, help="M of the demo run")
def main(workdir: Path | None, trainers: int) -> None:
    console = Console()
    if workdir is None:
        from tenzro_operator.demo import DemoSettings, run_demo

        task = f"watch-{int(time.time())}"
        workdir = REPO / ".devnet" / "demo" / task
        run_demo(DemoSettings(task_id=task, workdir=workdir, trainers=trainers, flow="v1"))  # results describe v1
    rows = watcher_rounds(workdir / "watcher")["rounds"]
    if not rows:
        raise SystemExit(f"no watcher-rounds.jsonl under {workdir / 'watcher'}: not a demo work dir with a watcher")
    t = Table(title="watcher: one row per round checked")
    for c in COLS:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*(str(r[c]) for c in COLS))
    console.print(t)
    RESULTS.write_text(render(rows, "python " + " ".join(sys.argv)).replace("{M}", str(trainers)))
    console.print(f"written {RESULTS}")


if __name__ == "__main__":
    main()

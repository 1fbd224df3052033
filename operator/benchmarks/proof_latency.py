"""Time from a wrong commit to its fraud proof landing, and the watcher's lag per round, at demo
scale on the root flow.

Runs `make demo-adversarial`'s job (`tenzro_operator.demo_adversarial`: syncer A commits one wrong
weight in round 1, a watcher with a key recomputes each round as it lands and sends
``proveAggregate``), then reads from the chain the block of A's wrong ``RoundCommitted`` and of the
``RoundProvenWrong`` that convicted it (timestamps, 1 s resolution; devnet blocks come only with
transactions), and from the watcher's ``watcher-rounds.jsonl`` its lag and replay time per round.

    python operator/benchmarks/proof_latency.py --rpc URL --ipfs URL --deployments PATH   # devnet up, deployed

Prints the figures and writes operator/benchmarks/results/proof_latency.md.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import click

from tenzro_operator.chain import ChainClient
from tenzro_operator.demo import DemoSettings
from tenzro_operator.demo_adversarial import ADVERSARIAL, run_adversarial

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "operator" / "benchmarks" / "results" / "proof_latency.md"


def measure(chain: ChainClient, task_id: bytes, watcher_dir: Path) -> dict:
    """The proof latency (seconds and blocks per proven round) and the watcher's rows."""
    head = chain.block_number()
    commits = chain.get_logs(chain.deployment.deploy_block, head, ["RoundCommitted"], task_id=task_id)
    proofs = []
    for p in chain.get_logs(chain.deployment.deploy_block, head, ["RoundProvenWrong"], task_id=task_id):
        r, pb = int(p["args"]["round"]), int(p["block_number"])
        wrong = max((c for c in commits if int(c["args"]["round"]) == r and int(c["block_number"]) < pb),
                    key=lambda c: int(c["block_number"]))
        cb = int(wrong["block_number"])
        proofs.append({"round": r, "commit_block": cb, "proof_block": pb, "blocks": pb - cb,
                       "seconds": chain.block_timestamp(pb) - chain.block_timestamp(cb)})
    path = watcher_dir / "watcher-rounds.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
    return {"proofs": proofs, "watcher": rows}


def render(m: dict, command: str, wall_s: float) -> str:
    lines = ["# Fraud-proof latency at demo scale (root flow)", "", f"Command: `{command}`", "",
             f"Machine: {os.cpu_count()} CPU cores shared by two syncers, six trainers and the watcher (separate "
             f"processes); the scenario took {wall_s:.0f} s. Seconds are chain seconds between the blocks (1 s "
             "resolution); devnet blocks come only with transactions.", "",
             "| round proven wrong | wrong commit block | proof block | blocks | seconds |", "|---|---|---|---|---|"]
    for p in m["proofs"]:
        lines.append(f"| {p['round']} | {p['commit_block']} | {p['proof_block']} | {p['blocks']} | {p['seconds']} |")
    lines += ["", "| round | ok | replay_s | lag_blocks | lag_s |", "|---|---|---|---|---|"]
    for r in m["watcher"]:
        lines.append(f"| {r['round']} | {r['ok']} | {r['replay_s']} | {r['lag_blocks']} | {r['lag_s']} |")
    lags = [r["lag_s"] for r in m["watcher"]] or [0.0]
    lines += ["", f"rounds checked: {len(m['watcher'])}, proofs upheld: {len(m['proofs'])}",
              f"watcher lag per round, median: {statistics.median(lags):.1f} s (max {max(lags):.1f} s)",
              "time from a wrong commit to its proof landing: "
              + (", ".join(f"{p['seconds']} s ({p['blocks']} blocks)" for p in m["proofs"]) or "no proof")]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--rpc", default=DemoSettings.rpc, show_default=True)
@click.option("--ipfs", default=DemoSettings.ipfs, show_default=True)
@click.option("--deployments", type=click.Path(path_type=Path), default=DemoSettings.deployments, show_default=True)
def main(rpc: str, ipfs: str, deployments: Path) -> None:
    work = REPO / ".devnet" / "demo" / f"proof-latency-{int(time.time())}"
    deployments = deployments.resolve()  # the daemons' configs live elsewhere
    t0 = time.monotonic()
    summary = run_adversarial(replace(ADVERSARIAL, rpc=rpc, ipfs=ipfs, deployments=deployments, workdir=work,
                                      out=work / "out"))
    m = measure(ChainClient(rpc, deployments), bytes.fromhex(summary["task_id"][2:]), work / "watcher")
    text = render(m, "python " + " ".join(["operator/benchmarks/proof_latency.py", *sys.argv[1:]]),
                  time.monotonic() - t0)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

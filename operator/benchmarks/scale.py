"""How the main job's cost grows with M and F: the real daemons on a devnet, one run per shape.

For every (M, F) of the grid the demo's job runs with a tiny model (`TINY_MODEL`, so that CPU is
not what limits it): the sponsor posts the task, one syncer and M trainers start as separate
processes, the run goes until sealed. Measured per round:

* gas: every transaction of the round, from its receipt (`round_gas`);
* latency along the round's critical path, from the timings the daemons write
  (``syncer-rounds.jsonl``, ``trainer-rounds.jsonl``), seconds: the round's wall time (opened
  on-chain to finalized) split into the slowest trainer's ``inner`` (H inner steps), ``ipfs``
  (its weight fetch, encode + pin, plus the syncer's weight pins) and ``chain`` (its submissions
  sent and mined, plus the syncer's finalize and reports), the syncer's ``agg`` (aggregation +
  outer step), and ``wait``, the rest (chain polling, the syncer's validation of the last
  payloads, processes waiting for the CPU); ``validate`` is the syncer's fetch + check of all
  M x F payloads, which overlaps the trainers' submissions;
* the syncer's CPU seconds and peak resident memory, and the IPFS bytes through the node
  (`round_probe`, `ipfs_meter`);
* whether every round finalized with its quorum and the run sealed.

    python operator/benchmarks/scale.py                        # M in {4,8,16,32}, F in {4,12}
    python operator/benchmarks/scale.py --m 4 --f 4 --rounds 2 --no-write   # a quick check (~1 min)
    python operator/benchmarks/scale.py --from-json results/scale.json      # report again, run nothing

By default a devnet of its own (anvil + IPFS node on free ports, contracts deployed by
``ape run deploy``) is started and stopped; ``--rpc/--ipfs/--deployments`` use a running one.
Writes ``operator/benchmarks/results/scale.md`` (the text under its ``## Analysis`` heading is
kept across re-runs) and ``scale.json`` (every round's raw figures).
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import click
from rich.console import Console

from ipfs_meter import IpfsMeter
from round_gas import run_gas
from round_probe import RoundProbe
from tenzro_operator import devnet
from tenzro_operator.chain import RunStatus
from tenzro_operator.demo import DemoError, DemoSettings, check_settings, launch_daemons, post_demo_task, stop, \
    wait_sealed
from tenzro_operator.errors import TenzroError

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "operator" / "benchmarks" / "results"
TINY_MODEL = {"preset": "demo", "d_model": 32, "d_ff": 64, "n_layers": 2}  # 24,672 parameters at F >= 1
ANALYSIS = "## Analysis"
REFERENCE = (8, 12)  # (M, F) of the line the issue asks for
SAVED_SETTINGS = ("rounds", "inner_steps", "batch_size", "grace_window_ms", "model_metadata", "syncer_options")
console = Console()


# ------------------------------------------------------------------ one run


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def round_rows(work: Path, probe_rows: list[dict], gas_rounds: dict[int, dict]) -> list[dict]:
    """Per-round figures of one run (see the module docstring for the latency split; seconds,
    gas units, bytes, MiB) from its work dir, the `RoundProbe` rows and `RunGas.rounds`."""
    syncer = {r["round"]: r for r in _jsonl(work / "syncer" / "syncer-rounds.jsonl")}
    trainers = [x for p in sorted(work.glob("trainer-*/trainer-rounds.jsonl")) for x in _jsonl(p)]
    probe = {r["round"]: r for r in probe_rows}
    rows = []
    for r, s in sorted(syncer.items()):
        tr = [t for t in trainers if t["round"] == r]
        slow = max(tr, key=lambda t: t["wall_s"]) if tr else {}
        t_chain = slow.get("chain_s", 0.0)
        inner = slow.get("inner_s", 0.0)
        ipfs = slow.get("fetch_s", 0.0) + slow.get("submit_s", 0.0) - t_chain + s["pin_s"]
        chain = t_chain + s["chain_s"]
        agg = s["aggregate_s"]
        g = gas_rounds.get(r, {"gas": 0, "txs": 0, "by_method": {}})
        p = probe.get(r, {})
        rows.append({
            "round": r, "quorum_met": s["quorum_met"], "submissions": s["submissions"], "accepted": s["accepted"],
            "gas": g["gas"], "txs": g["txs"], "by_method": g["by_method"],
            "wall_s": s["wall_s"], "inner_s": inner, "ipfs_s": ipfs, "chain_s": chain, "agg_s": agg,
            "wait_s": max(0.0, s["wall_s"] - inner - ipfs - chain - agg),
            "validate_s": s["fetch_s"] + s["validate_s"],
            "mean_trainer_s": statistics.mean(t["wall_s"] for t in tr) if tr else 0.0,
            "syncer_cpu_s": p.get("cpu_s"), "syncer_peak_rss_mib": p.get("peak_rss_mib"),
            "ipfs_bytes": (p["ipfs_up"] + p["ipfs_down"]) if p else None,
            "ipfs_up": p.get("ipfs_up"), "ipfs_down": p.get("ipfs_down"),
        })
    return rows


def run_shape(base: DemoSettings, m: int, f: int, meter: IpfsMeter) -> dict:
    """One run at M = ``m``, F = ``f`` (K = ceil(0.75 M)); returns its settings, per-round rows,
    the per-run gas and whether it sealed."""
    k = math.ceil(0.75 * m)
    task = f"scale-m{m}-f{f}-{int(time.time())}"
    s = DemoSettings(**{**base.__dict__, "trainers": m, "quorum": k, "fragments": f, "task_id": task,
                        "workdir": base.workdir / task, "timeout_s": 300 + 30 * m * base.rounds})
    t0 = time.monotonic()
    posted = post_demo_task(s)
    procs = launch_daemons(s, posted.task, posted.keys, posted.work, watcher=False)  # as measured
    probe = RoundProbe(posted.work / "syncer" / "syncer-rounds.jsonl", procs[0].popen.pid, meter).start()
    error = None
    try:
        wait_sealed(posted.sponsor, posted.task_id, procs, s)
    except DemoError as exc:
        error = str(exc)
        console.print(f"[red]M={m}, F={f}: {exc}[/]")
    finally:
        probe_rows = probe.stop()
        stop(procs)
    chain = posted.sponsor
    run = chain.get_run(posted.task_id)
    gas = run_gas(chain, posted.task_id, posted.posted_block, chain.block_number(), set(posted.addresses.values()))
    rows = round_rows(posted.work, probe_rows, gas.rounds)
    sealed = (run.status == RunStatus.SEALED and len(rows) == s.rounds and all(r["quorum_met"] for r in rows))
    return {"m": m, "f": f, "k": k, "h": s.inner_steps, "rounds": s.rounds, "task": task,
            "task_id": "0x" + posted.task_id.hex(), "params": posted.spec.architecture.param_count,
            "sealed": sealed, "error": error, "wall_s": time.monotonic() - t0, "rows": rows,
            "per_run_gas": gas.per_run, "per_run_by_method": gas.per_run_by_method, "work": str(posted.work)}


def rebuild(res: dict) -> dict:
    """A result of an earlier run (``scale.json``) with its rows computed again from its work dir
    (after a change to the latency split); gas and probe figures are kept as measured."""
    rows = res["rows"]
    gas = {r["round"]: {k: r[k] for k in ("gas", "txs", "by_method")} for r in rows}
    probe = [{"round": r["round"], "cpu_s": r["syncer_cpu_s"], "peak_rss_mib": r["syncer_peak_rss_mib"],
              "ipfs_up": r.get("ipfs_up", r["ipfs_bytes"]), "ipfs_down": r.get("ipfs_down", 0)}
             for r in rows if r.get("ipfs_bytes") is not None]
    return {**res, "rows": round_rows(Path(res["work"]), probe, gas)}


# ------------------------------------------------------------------ summary and report


def summarize(res: dict) -> dict:
    """One table line: gas as the mean over every round; the rest as means over the rounds after
    the first (round 0 holds the daemons' start-up), or round 0 when there is only one."""
    rows = res["rows"]
    steady = rows[1:] or rows

    def mean(key):
        vals = [r[key] for r in steady if r.get(key) is not None]
        return statistics.mean(vals) if vals else float("nan")

    fin = [r["by_method"].get("commitRound", {}).get("gas", 0) for r in rows]
    subs = [r["by_method"].get("submitOuterGradient", {}).get("txs", 0) for r in rows]
    return {"M": res["m"], "F": res["f"], "K": res["k"], "sealed": "yes" if res["sealed"] else "NO",
            "gas/round": round(statistics.mean(r["gas"] for r in rows)) if rows else 0,
            "submits/round": statistics.mean(subs) if subs else 0,
            "finalize gas": round(statistics.mean(fin)) if fin else 0,
            "wall s": mean("wall_s"), "inner s": mean("inner_s"), "ipfs s": mean("ipfs_s"), "chain s": mean("chain_s"),
            "agg s": mean("agg_s"), "wait s": mean("wait_s"), "validate s": mean("validate_s"),
            "syncer CPU s": mean("syncer_cpu_s"),
            "syncer peak MiB": max((r["syncer_peak_rss_mib"] for r in steady if r.get("syncer_peak_rss_mib")),
                                   default=float("nan")),
            "IPFS MB/round": mean("ipfs_bytes") / 1e6}


def _fmt(v) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}")
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def markdown_table(lines: list[dict]) -> list[str]:
    cols = list(lines[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" if c == "sealed" else "---:" for c in cols) + "|"]
    out += ["| " + " | ".join(_fmt(line[c]) for c in cols) + " |" for line in lines]
    return out


def growth(lines: list[dict]) -> list[str]:
    """Per F: how much each quantity grew from the smallest to the largest M (ratios)."""
    out = []
    for f in sorted({x["F"] for x in lines}):
        row = sorted((x for x in lines if x["F"] == f), key=lambda x: x["M"])
        if len(row) < 2:
            continue
        a, b = row[0], row[-1]
        parts = []
        for key in ("gas/round", "syncer CPU s", "IPFS MB/round", "wall s", "wait s", "inner s", "syncer peak MiB"):
            if a[key] and not math.isnan(a[key]) and not math.isnan(b[key]):
                parts.append(f"{key} x{b[key] / a[key]:.1f}")
        out.append(f"- F = {f}, M {a['M']} -> {b['M']} (x{b['M'] / a['M']:g}): " + ", ".join(parts))
    return out


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()


def contracts_line() -> str:
    """Which contracts were measured: the checkout's commit, the last commit touching contracts/,
    and whether contracts/ had uncommitted changes."""
    dirty = bool(_git("status", "--porcelain", "--", "contracts"))
    return (f"contracts of commit `{_git('rev-parse', '--short=12', 'HEAD')}` (last change to `contracts/`: "
            f"`{_git('log', '-1', '--format=%h %s', '--', 'contracts')[:110]}`)"
            + ("; `contracts/` had uncommitted changes" if dirty else ", `contracts/` clean"))


def render(results: list[dict], command: str, base: DemoSettings, old_analysis: str, measured: str) -> str:
    lines = [summarize(r) for r in results]
    ref = next((x for x in lines if (x["M"], x["F"]) == REFERENCE), None)
    params = results[0]["params"] if results else 0
    text = [
        "# How the main job's cost grows with M (devnet)", "",
        f"Command: `{command}`", "",
        f"Measured {measured}.", "",
        f"Each line is one run of the main job on anvil with the contracts deployed by `ape run deploy` and the "
        f"Helia IPFS node: 1 syncer and M trainer daemons as separate processes on this one machine, "
        f"K = ceil(0.75 M) (6 at M = 8, the reference), H = {base.inner_steps}, batch {base.batch_size}, "
        f"{base.rounds} rounds, a tiny model ({params:,} parameters: `{json.dumps(base.model_metadata)}`) so that "
        f"training is not the bottleneck, the syncer's held-out evaluation off, "
        f"straggler wait {base.syncer_options.get('straggler_wait_s')} s and a "
        f"{base.grace_window_ms / 1000:g} s round window so that every trainer gets every round in.", "",
        "Columns: `gas/round`, every transaction of a round from its receipt (all submissions, the finalize, "
        "any report), mean over the run's rounds; `submits/round` and `finalize gas` the same means. Latency in "
        "seconds, means over the rounds after the first (round 0 holds the daemons' start-up), along the "
        "round's critical path, so that the five parts add up to `wall` (round opened on-chain, block time at "
        "1 s resolution, to finalized): `inner` the slowest trainer's H inner steps; `ipfs` its weight fetch, "
        "encode and pin, plus the syncer's weight pins; `chain` its submissions sent and mined, plus the "
        "syncer's finalize; `agg` the syncer's aggregation + outer step; `wait` the rest (chain polling every "
        "0.5 s, validating the last payloads, processes waiting for the 2 cores). `validate s` is the syncer's "
        "fetch + check of all M x F payloads (it runs while the trainers submit, so it is not on the path). "
        "`syncer CPU s`: user + system seconds of the syncer process per round; `syncer peak MiB`: its largest "
        "resident set in any round (VmHWM, reset every round); `IPFS MB/round`: bytes to and from the IPFS "
        "node on the wire, every client, per round.",
        "",
        *markdown_table(lines), "",
        f"devnet gas per round at M=8, F=12: {ref['gas/round'] if ref else 'not measured'}", "",
        "Growth from the smallest to the largest M measured:", "", *growth(lines), "",
        "Gas by transaction kind, per round, at each shape (mean over the rounds):", "",
    ]
    for r in results:
        kinds: dict[str, list[int]] = {}
        for row in r["rows"]:
            for name, v in row["by_method"].items():
                kinds.setdefault(name, []).append(v["gas"] / max(v["txs"], 1))
        text.append(f"- M = {r['m']}, F = {r['f']}: " + ", ".join(
            f"{name} {statistics.mean(v):,.0f} gas/tx" for name, v in sorted(kinds.items()))
            + f"; once per run {r['per_run_gas']:,} gas" + (f"; error: {r['error']}" if r["error"] else ""))
    text += ["", "## v1 baseline (issue 12)", "",
             "As the issue found it with `python -m tenzro_operator.demo --trainers 7 --quorum 5` (5 rounds, 53 s): "
             "84 `submitOuterGradient` transactions averaging 46.5k gas plus a `finalizeRound` averaging 446k, "
             "about 4.35M gas per round; contracts/GAS.md at M = 8, F = 12: 5,009,542 gas per round (round 0).", ""]
    text.append(old_analysis.strip() if old_analysis.strip() else
                f"{ANALYSIS}\n\n(write the knee here: what grows first, and why; kept when the script re-runs)")
    return "\n".join(text) + "\n"


def _old_analysis(path: Path) -> str:
    try:
        body = path.read_text()
    except FileNotFoundError:
        return ""
    i = body.find(ANALYSIS)
    return body[i:] if i >= 0 else ""


# ------------------------------------------------------------------ devnet


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def own_devnet(data_dir: Path) -> tuple[devnet.DevnetConfig, Path]:
    """Start anvil and an IPFS node on free ports under ``data_dir`` and deploy with the real
    script; returns (config, deployment record)."""
    cfg = devnet.DevnetConfig(data_dir=data_dir, rpc_port=_free_port(), ipfs_port=_free_port())
    devnet.up(cfg)
    out = data_dir / "deployments.json"
    env = {**os.environ, "APE_FOUNDRY_HOST": cfg.rpc_url,
           "PATH": f"{REPO / 'node_modules/.bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    console.print(f"devnet on {cfg.rpc_url} / {cfg.ipfs_url}; deploying with `ape run deploy`")
    r = subprocess.run([str(Path(sys.executable).parent / "ape"), "run", "deploy", "--network",
                        "ethereum:local:foundry", "--out", str(out)], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=1200)
    if r.returncode != 0:
        devnet.down(cfg)
        raise TenzroError(f"ape run deploy failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return cfg, out


# ------------------------------------------------------------------ CLI


def _ints(ctx, param, value: str) -> list[int]:
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: want comma-separated integers, e.g. 4,8,16") from None
    if not out or min(out) < 1:
        raise click.BadParameter(f"{value!r}: want positive integers")
    return out


@click.command()
@click.option("--m", "ms", default="4,8,16,32", show_default=True, callback=_ints, help="Trainer counts M.")
@click.option("--f", "fs", default="4,12", show_default=True, callback=_ints, help="Fragment counts F.")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1, 1024))
@click.option("--inner-steps", default=8, show_default=True, type=click.IntRange(1), help="H")
@click.option("--batch-size", default=16, show_default=True, type=click.IntRange(1))
@click.option("--straggler-wait-s", default=60.0, show_default=True, type=click.FloatRange(0),
              help="The syncer's wait for the remaining trainers once it has K per fragment.")
@click.option("--rpc", default=None, help="Use this running devnet (with --ipfs and --deployments).")
@click.option("--ipfs", default=None)
@click.option("--deployments", type=click.Path(path_type=Path, exists=True), default=None)
@click.option("--write/--no-write", default=True, show_default=True, help="Write results/scale.md and scale.json.")
@click.option("--from-json", "from_json", type=click.Path(path_type=Path, exists=True), default=None,
              help="Run nothing: report again from an earlier scale.json (and its runs' work dirs).")
def main(ms, fs, rounds, inner_steps, batch_size, straggler_wait_s, rpc, ipfs, deployments, write, from_json) -> None:
    """Run the main job at every (M, F) of the grid on the devnet and report what each round costs."""
    if from_json is not None:
        saved = json.loads(from_json.read_text())
        base = DemoSettings(**{k: v for k, v in saved["settings"].items() if k in SAVED_SETTINGS})
        report([rebuild(r) for r in saved["results"]], saved["command"], base, write, saved["measured"])
        return
    if any(v is not None for v in (rpc, ipfs, deployments)) and None in (rpc, ipfs, deployments):
        raise click.UsageError("--rpc, --ipfs and --deployments go together (or none: a devnet of its own)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = DemoSettings(rounds=rounds, inner_steps=inner_steps, batch_size=batch_size, grace_window_ms=120_000,
                        challenge_window_ms=60_000, model_metadata=dict(TINY_MODEL),
                        syncer_options={"evaluate": False, "straggler_wait_s": straggler_wait_s},
                        workdir=REPO / ".devnet" / f"bench-scale-{stamp}", out=REPO / "out" / "bench-scale")
    try:
        for m in ms:
            for f in fs:
                check_settings(DemoSettings(**{**base.__dict__, "trainers": m, "quorum": math.ceil(0.75 * m),
                                               "fragments": f}))
    except DemoError as exc:
        raise click.UsageError(f"M={m}, F={f}: {exc}") from None
    cfg, measured = None, measured_on()
    if rpc is None:
        cfg, deployments = own_devnet(base.workdir / "devnet")
        rpc, ipfs = cfg.rpc_url, cfg.ipfs_url
    meter = IpfsMeter(ipfs).start()
    base.rpc, base.ipfs, base.deployments = rpc, meter.url, deployments
    results = []
    try:
        for m in ms:
            for f in fs:
                console.rule(f"M = {m}, F = {f}")
                results.append(run_shape(base, m, f, meter))
                line = summarize(results[-1])
                console.print("  ".join(f"{k}={_fmt(v)}" for k, v in line.items()))
    except (TenzroError, KeyboardInterrupt) as exc:
        console.print(f"[red]stopped: {exc}[/]")
    finally:
        meter.stop()
        if cfg is not None:
            devnet.down(cfg)
    if not results:
        sys.exit(1)
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])
    report(results, command, base, write, measured)
    sys.exit(0 if all(r["sealed"] for r in results) else 1)


def measured_on() -> str:
    """When, on what machine and with which contracts (one line for scale.md)."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPU cores, {mem:.0f} GiB, "
            f"{platform.python_implementation()} {platform.python_version()}; {contracts_line()}")


def report(results: list[dict], command: str, base: DemoSettings, write: bool, measured: str) -> None:
    """Print the table; write scale.md (keeping its analysis) and scale.json, or print the page."""
    print("\n".join(markdown_table([summarize(r) for r in results])))
    md = render(results, command, base, _old_analysis(RESULTS / "scale.md"), measured)
    if not write:
        console.print(md)
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale.md").write_text(md)
    settings = {k: getattr(base, k) for k in SAVED_SETTINGS}
    (RESULTS / "scale.json").write_text(json.dumps({"command": command, "measured": measured, "settings": settings,
                                                    "results": results},
                                                   indent=1, default=str) + "\n")
    console.print(f"written {RESULTS / 'scale.md'} and scale.json")

if __name__ == "__main__":
    main()

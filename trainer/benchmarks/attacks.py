"""Benchmark: Byzantine trainers against every aggregation rule, with and without the norm screen and
loss-improvement scoring. The figure of merit of issue #10: does the default rule of a new spec hold
every attack within 1.05x of the run in which the Byzantine trainers are simply absent?

Set-up (`tenzro_trainer.simulate`, the issue's): M = 8 trainers, the ``demo`` model preset in 4
fragments, H = 24 inner AdamW steps, batch 32, outer Nesterov 0.7 / 0.9, one data shard per
trainer, ``--rounds`` rounds (30), seeds ``--seeds``. f = 2 or 3 trainers (the last indices) are
Byzantine and forge every fragment's payload with one attack of `tenzro_trainer.attacks`; the
screen (norm <= 10 x the round's median norm) and scoring (64 windows of the trainer's own shard,
payloads that do not lower the loss left out, as the root-flow syncer does) run before the rule.

Metric (EVALUATION.md): per run the mean held-out loss of the last three rounds; per cell the ratio
to the *reference*, the same configuration and seed with the f Byzantine trainers absent (their
shards are then untrained too, so the ratio charges the rule only for what the attack does), as
mean +- sd over seeds. A cell holds when the mean ratio is <= 1.05. A run whose rule cannot
aggregate a round (Krum with fewer than 2f + 3 inputs) halts: the cell is ``halt``.

Issue #26 (credit for work only) adds its attackers (free-rider variants, lazy, Min-Max, Min-Sum,
score-aware poisoning, colluding boosters), run against the default and the scoring-only default
of before, and per cell the share of the forged payloads *credited* (``byzantine_accepted``); the
default is now ROBUST_DEFAULTS with the syncer's credit gate (`tenzro_trainer.credit`). The file
ends with the issue's three lines (worst credited share at 2 and at 3 of 8, attacks held at 3 of 8).
``--defaults-only`` runs those two rows alone, ``--seed-major`` every row's first seed first.

Every run is cached in ``results/attacks_runs.json`` as it finishes, so the script resumes where
it stopped; ``--report`` rewrites the tables from the cache alone. Runs go in priority order: the
default configuration at 2 of 8, then at 3 of 8, then the others at 2 of 8, then at 3 of 8.

    .venv/bin/python trainer/benchmarks/attacks.py --seeds 0 1 2 --rounds 30 --jobs 2

``--cache PATH`` resumes and extends another copy of the cache (a bigger machine's run, merged back
by copying the file: it holds every run of the one it started from). Each run records the machine
that made it (``env``); the report names the rows made on more than one machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import torch

from _common import RESULTS, machine, write
from tenzro_trainer.attacks import ATTACK_NAMES
from tenzro_trainer.config import ROBUST_DEFAULTS, InnerConfig, ModelConfig
from tenzro_trainer.errors import AggregationError

WORKERS, FRAGMENTS, H, BATCH = 8, 4, 24, 32
ATTACKS = [a for a in ATTACK_NAMES if a != "absent"]
# the attacks of issue #10; the others (issue #26's) run against the default and the scoring-only default
OLD_ATTACKS = ["sign_flip", "scale100", "gaussian10", "alie", "ipm0.1", "ipm100", "nan", "stale", "free_rider"]
HOLD = 1.05
CREDIT_FLOOR = 0.05  # issue #26: at most 5 % of the forged payloads credited
HONEST_FLOOR = 0.95  # and at least 95 % of the honest ones in the attackers-absent run
CACHE = RESULTS / "attacks_runs.json"
ENV = f"torch {torch.__version__}, {os.cpu_count()} cpus"  # where a run was made
# measured: 6 runs made on both machines (the default's absent run at f = 2, seed 0, and 5 CenteredClip
# runs at f = 3, seed 0)
CROSS_MACHINE = "6 runs made on both machines differ by at most 3.8e-6 relative in their last-3 loss"


@dataclass(frozen=True)
class Defence:
    """One column group of the matrix: a rule with its parameters, the norm screen, scoring."""

    rule: str
    params: dict = field(default_factory=dict, hash=False, compare=False)
    screen: bool = True
    scoring: bool = False
    credit: bool = False  # the credit checks of issue #26 (tenzro_trainer.credit) instead of score > 0

    @property
    def name(self) -> str:
        p = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return (f"{self.rule}({p})" if p else self.rule) + (" + screen" if self.screen else "") + \
            (" + scoring" if self.scoring else "") + (" + credit" if self.credit else "")


# the syncer's scoring since issue #26 is the credit gate: the default is ROBUST_DEFAULTS with it
DEFAULT = Defence(ROBUST_DEFAULTS["rule"], dict(ROBUST_DEFAULTS["rule_params"]), screen=True,
                  scoring=ROBUST_DEFAULTS["scoring"], credit=True)
SCORING_ONLY = Defence(ROBUST_DEFAULTS["rule"], dict(ROBUST_DEFAULTS["rule_params"]), screen=True, scoring=True)
TRIM = {"alpha_bps": 2500}
CLIP = {"tau": 0.3, "iters": 3}  # about the honest pseudo-gradients' spread (L2 0.2-0.3 per fragment)
DEFENCES = [
    DEFAULT,
    SCORING_ONLY,  # the default before issue #26
    Defence("Mean", screen=True),  # the sponsor default before this benchmark
    Defence("Mean", screen=True, scoring=True),
    Defence("TrimmedMean", TRIM, screen=True),
    Defence("CoordinateMedian", screen=True),
    Defence("CoordinateMedian", screen=True, scoring=True),
    Defence("Krum", {"f": 2}, screen=True),
    Defence("CenteredClip", CLIP, screen=True),
    Defence("CenteredClip", CLIP, screen=True, scoring=True),
    Defence("Mean", screen=False),
    Defence("TrimmedMean", TRIM, screen=False),
    Defence("CoordinateMedian", screen=False),
    Defence("Krum", {"f": 2}, screen=False),
    Defence("CenteredClip", CLIP, screen=False),
    Defence("Krum", {"f": 2}, screen=True, scoring=True),
    # scoring without the screen
    Defence("Mean", scoring=True, screen=False),
    Defence("TrimmedMean", TRIM, scoring=True, screen=False),
    Defence("CoordinateMedian", scoring=True, screen=False),
    Defence("CenteredClip", CLIP, scoring=True, screen=False),
    Defence("Krum", {"f": 2}, scoring=True, screen=False),
]
DEFENCES = list(dict.fromkeys(DEFENCES))  # the default may coincide with a listed one


def run_key(defence: Defence, byz: int, attack: str, seed: int, rounds: int) -> str:
    return f"{defence.name} | f={byz} | {attack} | seed={seed} | rounds={rounds}"


_DF = None


def _run(defence: Defence, byz: int, attack: str, seed: int, rounds: int) -> dict:
    """One simulated run; returns its figures (a halted run: ``halted`` = the round)."""
    global _DF
    torch.set_num_threads(1)
    from tenzro_trainer.data import default_collection
    from tenzro_trainer.simulate import SimConfig, simulate

    if _DF is None:
        _DF = default_collection()
    cfg = SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=H, batch_size=BATCH), workers=WORKERS,
                    rounds=rounds, fragments=FRAGMENTS, rule=defence.rule, rule_params=dict(defence.params),
                    norm_multiple=10.0 if defence.screen else None, seed=seed, scoring=64 if defence.scoring else 0,
                    attackers={WORKERS - 1 - j: attack for j in range(byz)}, credit={} if defence.credit else None)
    rows: list[dict] = []
    t0 = time.perf_counter()
    try:
        simulate(cfg, _DF, log=rows.append)
    except AggregationError as exc:
        return {"env": ENV, "halted": len(rows), "error": str(exc), "wall_s": time.perf_counter() - t0}
    held = [r["heldout_loss"] for r in rows]
    return {"env": ENV, "last3": statistics.fmean(held[-3:]), "final": held[-1],
            "train_window": rows[-1]["train_window_loss"], "rejected": sum(r["rejected"] for r in rows),
            "byzantine_accepted": sum(r["byzantine_accepted"] for r in rows), "curve": held,
            "byzantine_genuine_sent": sum(r.get("byzantine_genuine_sent", 0) for r in rows),
            "byzantine_genuine_credited": sum(r.get("byzantine_genuine_credited", 0) for r in rows),
            "honest_sent": sum(r.get("honest_sent", 0) for r in rows),
            "honest_credited": sum(r.get("honest_credited", 0) for r in rows),
            "barred": rows[-1].get("barred", 0), "honest_barred": rows[-1].get("honest_barred", 0),
            "wall_s": time.perf_counter() - t0}


def _load(cache: Path) -> dict:
    return json.loads(cache.read_text())["runs"] if cache.exists() else {}


def _save(runs: dict, cache: Path) -> None:
    """Write the cache atomically (a run killed mid-write leaves the previous file)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"runs": runs}, indent=1, sort_keys=True) + "\n")
    tmp.replace(cache)


def attacks_of(defence: Defence) -> list[str]:
    """The attacks a defence's row runs: every one for the default and the scoring-only default,
    issue #10's for the others."""
    return ATTACKS if defence in (DEFAULT, SCORING_ONLY) else OLD_ATTACKS


def plan(seeds: list[int], rounds: int, fractions: list[int]) -> list[tuple]:
    """Every run of the matrix in priority order: the default at each fraction, then the others."""
    out = []
    for k, byz in enumerate(fractions):
        for defence in DEFENCES:
            for seed in seeds:
                for attack in ["absent", *attacks_of(defence)]:
                    out.append((k if defence == DEFAULT else len(fractions) + k, defence, byz, attack, seed))
    out.sort(key=lambda t: t[0])  # stable: keeps the defences' order within a priority
    return [(d, b, a, s, rounds) for _, d, b, a, s in out]


def cell(runs: dict, defence: Defence, byz: int, attack: str, seeds: list[int], rounds: int,
         against: Defence | None = None) -> dict | None:
    """Ratios of the attack's runs to the reference's (the same defence with the f Byzantine trainers
    absent, or the absent run of ``against``), per seed; None until every run is there."""
    ratios, halted = [], None
    for s in seeds:
        a = runs.get(run_key(defence, byz, attack, s, rounds))
        ref = runs.get(run_key(against or defence, byz, "absent", s, rounds))
        if a is None or ref is None:
            return None
        if "halted" in ref:
            return {"ref_halted": ref["halted"]}
        if "halted" in a:
            halted = a["halted"] if halted is None else min(halted, a["halted"])
            continue
        ratios.append(a["last3"] / ref["last3"] if math.isfinite(a["last3"]) else math.inf)
    if halted is not None:
        return {"halted": halted}
    finite = [r for r in ratios if math.isfinite(r)]
    mean = statistics.fmean(ratios) if len(finite) == len(ratios) else math.inf
    sd = statistics.stdev(ratios) if len(finite) == len(ratios) and len(ratios) > 1 else 0.0
    return {"mean": mean, "sd": sd, "per_seed": ratios, "held": mean <= HOLD}


def _fmt(c: dict | None) -> str:
    if c is None:
        return "…"
    if "ref_halted" in c:
        return f"ref halts (r{c['ref_halted']})"
    if "halted" in c:
        return f"halt (r{c['halted']})"
    if not math.isfinite(c["mean"]):
        return "diverges ✗"
    return f"{c['mean']:.3f} ± {c['sd']:.3f}" + ("" if c["held"] else " ✗")


def report(runs: dict, seeds: list[int], rounds: int, fractions: list[int], wall: float | None, host: str,
           note: str = "") -> str:
    """The results file: the matrix per fraction, the references, and the issue's line last."""
    run_cmd = (f".venv/bin/python trainer/benchmarks/attacks.py --seeds {' '.join(map(str, seeds))} --rounds {rounds} "
               f"--fractions {' '.join(map(str, fractions))} --jobs 2")
    lines = [
        "# Byzantine trainers against the aggregation rules",
        "",
        f"Runs made by `{run_cmd}` (resumable: each run is cached in `results/attacks_runs.json` as it "
        "ends; `--report` rewrites this file from the cache).",
        "",
        f"M = {WORKERS} trainers, `demo` preset in {FRAGMENTS} fragments, H = {H}, batch {BATCH}, outer Nesterov "
        f"0.7 / 0.9, {rounds} rounds, seeds {seeds}; f of 8 Byzantine (the last indices), every fragment of every "
        "round forged. Cell: mean held-out loss of the last 3 rounds / the same run with the f Byzantine trainers "
        "absent, mean ± sd over seeds; ✗ above 1.05. `halt (rN)`: the rule could not aggregate round N "
        "(Krum needs 2f + 3 inputs). `…`: not run yet. Screen: L2 norm <= 10 x the round's median; scoring: "
        "loss improvement on 64 windows of the trainer's own shard > 0; credit: the credit checks of issue #26 "
        "(`tenzro_trainer.credit`: near-copy of another payload, the last aggregate or its own earlier ones, "
        "norm outlier at 3 x the median, the contribution test on batches drawn with the round's reveal, credit by "
        "a moving average of passes, clipping to the median norm, the audit by exact replay: one trainer a round "
        "drawn, every credited trainer in round 1) instead of score > 0. The issue #26 cells count forged "
        "payloads: an attacker's own untouched update of all H steps (stale's and lazy_late's round 1) is work "
        "done, and is left out of both sides of the share (recorded from stop 49 on).",
        "",
        f"Default of a new spec (`tenzro_trainer.config.ROBUST_DEFAULTS` with the syncer's credit gate): "
        f"**{DEFAULT.name}**; before issue #26: {SCORING_ONLY.name}.",
        "",
        "Attacks (`tenzro_trainer.attacks`): sign_flip (own update negated), scale100, gaussian10 (noise at 10x "
        "the honest RMS), alie (Baruch et al. 2019, z_max), ipm0.1 / ipm100 (Xie et al. 2020), nan, stale (its "
        "first round's update replayed), free_rider (the last public aggregate, no training); issue #26's: "
        "free_rider_x2, free_rider_noise (plus noise at half its RMS), free_rider_signed (+ or - by its probe), "
        "lazy (2 of H steps, x H/2), lazy_late (honest in round 1, lazy after), minmax / minsum (Shejwalkar & "
        "Houmansadr 2021, Alg. 1, std perturbation, also tuned to pass its probe), score_aware (own update "
        "minus the honest mean, as far as its probe allows), boost_collude (one shared payload: the honest mean "
        "boosted as far as every colluder's probe and the screen allow), boost_own (own update x 8, no view of "
        "others). A probe is the attacker's own score on the public batch of its shard (the syncer's score "
        "exactly under scoring alone).",
    ]
    for byz in fractions:
        lines += ["", f"## Issue #26: every attack at {byz} of {WORKERS}, loss ratio / forged payloads credited", "",
                  "Cell: loss ratio as below (mean ± sd) / share of the attackers' forged payloads credited (mean "
                  f"over seeds; ✗ above {CREDIT_FLOOR:.0%}).", "",
                  "| defence | " + " | ".join(ATTACKS) + " |", "| --- |" + " --- |" * len(ATTACKS)]
        for d in (DEFAULT, SCORING_ONLY):
            row = []
            for a in ATTACKS:
                c, sh = cell(runs, d, byz, a, seeds, rounds), credited_share(runs, d, byz, a, seeds, rounds)
                row.append(_fmt(c) + " / " + ("…" if sh is None else f"{sh:.0%}" + (" ✗" if sh > CREDIT_FLOOR else "")))
            name = f"**{d.name}** (default)" if d == DEFAULT else d.name
            lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines += ["", "Honest trainers' payloads credited in the attackers-absent run (mean over seeds; floor "
              f"{HONEST_FLOOR:.0%}):", ""]
    for d in (DEFAULT, SCORING_ONLY):
        for byz in fractions:
            h = honest_share(runs, d, byz, seeds, rounds)
            lines.append(f"- {d.name}, {WORKERS - byz} trainers: " + ("…" if h is None else f"{h:.1%}"))
    for byz in fractions:
        lines += ["", f"## {byz} of {WORKERS} Byzantine (issue #10's attacks)", "",
                  "| defence | " + " | ".join(OLD_ATTACKS) + " | held |",
                  "| --- |" + " --- |" * (len(OLD_ATTACKS) + 1)]
        for d in DEFENCES:
            cells = [cell(runs, d, byz, a, seeds, rounds) for a in OLD_ATTACKS]
            held = sum(1 for c in cells if c and c.get("held"))
            done = all(c is not None for c in cells)
            name = f"**{d.name}** (default)" if d == DEFAULT else d.name
            lines.append(f"| {name} | " + " | ".join(_fmt(c) for c in cells) +
                         f" | {held} of {len(OLD_ATTACKS)}{'' if done else ' so far'} |")
    lines += ["", "## Reference runs (Byzantine trainers absent): mean last-3 held-out loss", "",
              "| defence | " + " | ".join(f"f = {b}" for b in fractions) + " |", "| --- |" + " --- |" * len(fractions)]
    for d in DEFENCES:
        vals = []
        for byz in fractions:
            rs = [runs.get(run_key(d, byz, "absent", s, rounds)) for s in seeds]
            if any(r is None for r in rs):
                vals.append("…")
            elif any("halted" in r for r in rs):
                vals.append("halt")
            else:
                xs = [r["last3"] for r in rs]
                vals.append(f"{statistics.fmean(xs):.4f} ± {statistics.stdev(xs) if len(xs) > 1 else 0.0:.4f}")
        lines.append(f"| {d.name} | " + " | ".join(vals) + " |")
    lines += ["", "## Forged payloads accepted", "",
              "Share of the attackers' payloads (f x 4 fragments x rounds) that passed the screen and scoring: "
              "the ones the protocol credits as contributions, whatever the rule then makes of them; mean over "
              "seeds. Rows whose runs recorded it.", "",
              "| defence | f | " + " | ".join(OLD_ATTACKS) + " |", "| --- | --- |" + " --- |" * len(OLD_ATTACKS)]
    for d in DEFENCES:
        for byz in fractions:
            sent, shares = byz * FRAGMENTS * rounds, []
            for a in OLD_ATTACKS:
                rs = [runs.get(run_key(d, byz, a, s, rounds)) for s in seeds]
                ok = all(r is not None and "byzantine_accepted" in r for r in rs)
                shares.append(f"{statistics.fmean(r['byzantine_accepted'] for r in rs) / sent:.2f}" if ok else None)
            if any(x is not None for x in shares):
                lines.append(f"| {d.name} | {byz} | " + " | ".join(x or "…" for x in shares) + " |")
    lines += ["", "## Krum where its reference halts: last-3 held-out loss / the Mean + screen reference", "",
              "Krum(f = 2) needs 2f + 3 = 7 inputs, and the reference has 8 - f trainers, so its cells above cannot "
              "be formed; its attacked runs that did not halt are set against the Mean + screen run with the same "
              "trainers absent (same seed) instead.", "",
              "| defence | f | absent | " + " | ".join(OLD_ATTACKS) + " |",
              "| --- | --- |" + " --- |" * (len(OLD_ATTACKS) + 1)]
    mean_ref = Defence("Mean", screen=True)
    for d in DEFENCES:
        if d.rule != "Krum":
            continue
        for byz in fractions:
            cells = [cell(runs, d, byz, a, seeds, rounds, against=mean_ref) for a in ["absent", *OLD_ATTACKS]]
            lines.append(f"| {d.name} | {byz} | " + " | ".join(_fmt(c) for c in cells) + " |")
    keys = {run_key(*p) for p in plan(seeds, rounds, fractions)}
    mine = {k: r for k, r in runs.items() if k in keys}
    envs = ", ".join(f"{n} on {e}" for e, n in sorted(Counter(r.get("env", "?") for r in mine.values()).items()))
    row_envs: dict[str, set] = {}  # "defence at f = b" -> the machines that made its runs
    for k, r in mine.items():
        name, byz = k.split(" | ")[:2]
        row_envs.setdefault(f"{name} at f = {byz.removeprefix('f=')}", set()).add(r.get("env"))
    mixed = [row for row, e in row_envs.items() if len(e) > 1]
    lines += ["", f"Runs in the cache for these rounds: {len(mine)} of {len(plan(seeds, rounds, fractions))} ({envs})"
              + (f"; this invocation's wall time {wall:.0f} s." if wall else "."),
              "Rows made on more than one machine: " + (", ".join(mixed) if mixed else "none") +
              f" (a cell divides runs of one row; {CROSS_MACHINE})", "", f"Machine: {host}"] + \
        (["", note] if note else [])
    held_lines = []  # issue #26's three lines last: credited at 2 and 3 of 8, then held at 3 of 8
    for byz in fractions:
        cells = [cell(runs, DEFAULT, byz, a, seeds, rounds) for a in ATTACKS]
        if all(c is not None for c in cells) and byz != 3:
            held = sum(1 for c in cells if c.get("held"))
            held_lines.append(f"attacks held by the default rule at {byz} of {WORKERS}: {held} of {len(ATTACKS)}")
    for byz in fractions:
        shares = {a: credited_share(runs, DEFAULT, byz, a, seeds, rounds) for a in ATTACKS}
        if all(v is not None for v in shares.values()):
            worst = max(shares, key=shares.get)  # named in the table above
            held_lines.append(f"forged payloads credited under the default, worst attack at {byz} of {WORKERS}: "
                              f"{100 * shares[worst]:.1f} %")
    cells = [cell(runs, DEFAULT, 3, a, seeds, rounds) for a in ATTACKS]
    if 3 in fractions and all(c is not None for c in cells):
        held = sum(1 for c in cells if c.get("held"))
        held_lines.append(f"attacks held by the default rule at 3 of {WORKERS}: {held} of {len(ATTACKS)}")
    return "\n".join(lines + (["", *held_lines] if held_lines else []))


def credited_share(runs: dict, d: Defence, byz: int, attack: str, seeds: list[int], rounds: int) -> float | None:
    """Mean over seeds of the share of the attackers' forged payloads credited: of their f x fragments x
    rounds payloads, those that were not their own untouched H-step update (``byzantine_genuine_*``:
    work done, as ``stale``'s and ``lazy_late``'s round 1; not recorded, so 0, in runs made before
    stop 49); None until every run is there."""
    rs = [runs.get(run_key(d, byz, attack, s, rounds)) for s in seeds]
    if any(r is None or "byzantine_accepted" not in r for r in rs):
        return None
    total = byz * FRAGMENTS * rounds
    return statistics.fmean((r["byzantine_accepted"] - r.get("byzantine_genuine_credited", 0))
                            / (total - r.get("byzantine_genuine_sent", 0)) for r in rs)


def honest_share(runs: dict, d: Defence, byz: int, seeds: list[int], rounds: int) -> float | None:
    """Mean over seeds of the honest payloads credited in the attackers-absent run; None until recorded."""
    rs = [runs.get(run_key(d, byz, "absent", s, rounds)) for s in seeds]
    if any(r is None or not r.get("honest_sent") for r in rs):
        return None
    return statistics.fmean(r["honest_credited"] / r["honest_sent"] for r in rs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--fractions", type=int, nargs="+", default=[2, 3], help="Byzantine trainers of 8")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel (one torch thread each)")
    ap.add_argument("--max-runs", type=int, default=None, help="stop after this many new runs (resume later)")
    ap.add_argument("--report", action="store_true", help="only rewrite the tables from the cache")
    ap.add_argument("--note", default="", help="a paragraph for the report (where and how long the runs took)")
    ap.add_argument("--seed-major", action="store_true", help="run seed by seed (every row's first seed first)")
    ap.add_argument("--defaults-only", action="store_true",
                    help="run only the default's and the scoring-only default's rows (issue #26)")
    ap.add_argument("--default-only", action="store_true", help="run only the default's row")
    ap.add_argument("--attacks", nargs="+", default=None, metavar="ATTACK",
                    help="run only these attacks ('absent': the reference run)")
    ap.add_argument("--redo", action="store_true",
                    help="run the selected runs again even when cached (after a change to the defence)")
    ap.add_argument("--cache", type=Path, default=CACHE, help="the run cache to resume from and extend")
    args = ap.parse_args()
    torch.set_num_threads(1)  # as every run does (`_run`): the machine line below says so
    runs, t0 = _load(args.cache), time.perf_counter()
    todo = [p for p in plan(args.seeds, args.rounds, args.fractions) if (args.redo or run_key(*p) not in runs)
            and (not args.defaults_only or p[0] in (DEFAULT, SCORING_ONLY))
            and (not args.default_only or p[0] == DEFAULT) and (args.attacks is None or p[2] in args.attacks)]
    if args.seed_major:  # every row's first seed before any row's second (a short sweep's best use)
        todo.sort(key=lambda p: args.seeds.index(p[3]))
    if args.max_runs is not None:
        todo = todo[: args.max_runs]
    ran = not args.report and bool(todo)
    if ran:
        print(f"{len(todo)} runs to do, {args.jobs} at a time", flush=True)
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futs = {pool.submit(_run, *p): p for p in todo}
            for fut in as_completed(futs):
                key = run_key(*futs[fut])
                runs[key] = fut.result()
                _save(runs, args.cache)
                r = runs[key]
                print(f"{key}: {r.get('last3', 'halt')} ({r['wall_s']:.0f} s)", flush=True)
    md = report(runs, args.seeds, args.rounds, args.fractions, time.perf_counter() - t0 if ran else None,
                json.dumps(machine()), args.note)
    write("attacks", md,
          {"seeds": args.seeds, "rounds": args.rounds, "default": DEFAULT.name,
           "cells": {f"{d.name} | f={b} | {a}": cell(runs, d, b, a, args.seeds, args.rounds)
                     for d in DEFENCES for b in args.fractions for a in ATTACKS},
           "credited": {f"{d.name} | f={b} | {a}": credited_share(runs, d, b, a, args.seeds, args.rounds)
                        for d in (DEFAULT, SCORING_ONLY) for b in args.fractions for a in ATTACKS},
           "honest_credited": {f"{d.name} | f={b}": honest_share(runs, d, b, args.seeds, args.rounds)
                               for d in (DEFAULT, SCORING_ONLY) for b in args.fractions}})
    print("\n".join(md.splitlines()[-4:]))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

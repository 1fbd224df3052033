"""The prepared device check (issue #29): everything a lent GPU should prove, in one call of at most
8 minutes, written to ``trainer/benchmarks/results/gpu.md``.

    make gpu-check                 # on a GPU machine: the bundle must be there (below)
    make gpu-check DRY_RUN=1       # on a CPU: every stage planned, imported and run small (CI runs it)
    .venv/bin/python scripts/gpu_check.py bundle   # here, before the device call: the data as Parquet
    python3 scripts/gpu_check.py                   # on the device (its python3 holds PyTorch), the bundle carried

Stages, in order, each in its own process under its own time limit (a hung stage is killed and
reported, the next one runs):

1. ``cuda-tests``: the CUDA bit-identity tests of the canonical aggregation arithmetic and of the
   outer step (``pytest -k cuda`` on tests/trainer/test_canonical.py and test_outer.py); on a GPU a
   skipped test fails the stage.
2. ``throughput``: the bf16 inner loop against fp32 and against a plain PyTorch loop (samples/s,
   peak memory), ``gpu-ref`` preset (trainer/benchmarks/gpu_stages.py).
3. ``torchrun``: one FSDP2 inner round (`tenzro_trainer.sharded_round`) over every GPU present.
4. ``zero-shot``: the ``gpu-ref`` recipe trained for a fixed budget by DiLoCo in the simulator, then
   its zero-shot relative MASE / WQL.

The device has PyTorch but none of the data packages (vega_datasets, pmdarima, sktime, pvlib), so
``bundle`` writes the data the stages read into ``.gpu-bundle/`` (git-ignored; carried to the device,
~8 MB): the built-in collection, the training mixture, the manifests' seasonal periods, the zero-shot
series and their manifest rows.

Exit status: 0 when every stage passed, 1 otherwise (the report says which and why), 2 on bad use.
When ``$OUT`` is set (the device tool's output folder) the report is copied there too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "trainer" / "benchmarks" / "results"
STAGES = ROOT / "trainer" / "benchmarks" / "gpu_stages.py"
BUNDLE = ROOT / ".gpu-bundle"
BUNDLE_FILES = ("collection.parquet", "mixture.parquet", "seasons.json", "zero_shot.parquet", "zero_shot_infos.json")
TOTAL_S = 450  # the whole check: 7.5 of the 8 minutes a device call may take, leaving a rerun in 15
ZERO_SHOT_BUDGET_S = 150


def build_bundle(dest: Path = BUNDLE, dry: bool = False) -> None:
    """Write the stages' data as files a bare PyTorch machine reads (run here, not on the device).
    ``dry``: the built-in collection stands in for the training mixture (no KernelSynth: seconds)."""
    sys.path.insert(0, str(ROOT / "trainer" / "benchmarks"))
    from zero_shot import cached_mixture

    from tenzro_trainer.data import default_collection, seasonality
    from tenzro_trainer.data.heldout import zero_shot_collection
    from tenzro_trainer.data.mixture import MixtureConfig

    dest.mkdir(exist_ok=True)
    collection = default_collection()
    collection.to_parquet(dest / "collection.parquet")
    mixture = collection if dry else cached_mixture(MixtureConfig())
    mixture.to_parquet(dest / "mixture.parquet")
    ids = sorted(set(mixture["unique_id"]) | set(collection["unique_id"]))
    (dest / "seasons.json").write_text(json.dumps(seasonality(ids)) + "\n")  # the manifests' seasonal periods
    df, infos = zero_shot_collection()
    df.to_parquet(dest / "zero_shot.parquet")
    (dest / "zero_shot_infos.json").write_text(json.dumps([asdict(i) for i in infos], indent=1) + "\n")
    size = sum((dest / f).stat().st_size for f in BUNDLE_FILES)
    print(f"bundle: {dest} ({size / 2**20:.1f} MiB)")


NEEDED = ("numpy", "pandas", "pyarrow", "safetensors", "pydantic", "pytest", "torch")


def missing_modules() -> list[str]:
    """Python packages the stages import that this interpreter lacks (a lent machine has PyTorch but
    not pydantic: carry its wheels, see /work/.library/device/README.md)."""
    import importlib.util

    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


def plan(dry: bool, gpus: int, work: Path, bundle: Path, zero_shot_batch: int = 512,
         budget_s: float = ZERO_SHOT_BUDGET_S) -> list[tuple[str, list[str], float]]:
    """The stages: (name, command, time limit in s)."""
    py = sys.executable
    pytest = [py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:ape_test", "-k", "cuda",  # no chain needed
              "tests/trainer/test_canonical.py", "tests/trainer/test_outer.py"]
    stage = [py, str(STAGES)]
    dry_flag = ["--dry"] if dry else []
    nproc = 2 if dry else max(gpus, 1)
    torchrun = [py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                "-m", "tenzro_trainer.sharded_round", "--data", str(bundle / "collection.parquet"),
                "--out", str(work / "torchrun")]
    torchrun += (["--preset", "cpu-test", "--steps", "2", "--batch", "8"] if dry else
                 ["--preset", "gpu-ref", "--device", "cuda", "--dtype", "bf16", "--steps", "20", "--batch", "64"])
    return [
        ("cuda-tests", pytest, 120),
        ("throughput", [*stage, "throughput", "--bundle", str(bundle), "--json", str(work / "throughput.json"),
                        *dry_flag], 120),
        ("torchrun", torchrun, 120),
        ("zero-shot", [*stage, "zero-shot", "--bundle", str(bundle), "--json", str(work / "zero-shot.json"),
                       "--budget-s", str(budget_s), "--batches", str(zero_shot_batch), *dry_flag], budget_s + 150),
    ]


def run_stage(name: str, cmd: list[str], limit: float, env: dict) -> dict:
    """Run one stage in its own process group; kill the group at ``limit`` s. Never raises."""
    print(f"== {name}: {' '.join(cmd)} (limit {limit:.0f} s)", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    except OSError as exc:
        return {"name": name, "ok": False, "why": f"could not start: {exc}", "seconds": 0.0, "tail": ""}
    try:
        out, _ = proc.communicate(timeout=limit)
        why = None if proc.returncode == 0 else f"exit status {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        why = f"killed after its {limit:.0f} s limit"
    tail = "\n".join(out.strip().splitlines()[-15:])
    print(tail, flush=True)
    return {"name": name, "ok": why is None, "why": why, "seconds": round(time.perf_counter() - t0, 1), "tail": tail}


def check_cuda_tests(result: dict, dry: bool) -> None:
    """On a GPU every selected test must pass (a skip means CUDA was not used); dry: they are collected."""
    m = re.search(r"(\d+) passed", result["tail"])
    s = re.search(r"(\d+) skipped", result["tail"])
    result["passed"], result["skipped"] = int(m.group(1)) if m else 0, int(s.group(1)) if s else 0
    if result["ok"] and not dry and (result["skipped"] or not result["passed"]):
        result["ok"], result["why"] = False, f"{result['skipped']} CUDA test(s) skipped, {result['passed']} passed"
    if dry and result["passed"] + result["skipped"] == 0:
        result["ok"], result["why"] = False, "no CUDA test collected"


def gib(b) -> str:
    return "n/a" if b is None else f"{b / 2**30:.2f} GiB"


def report(results: list[dict], figures: dict, device: str, dry: bool, wall_s: float, budget_s: float) -> str:
    """gpu.md: the device, the commands, the figures, what failed."""
    lines = [f"# GPU check ({'dry run on the CPU' if dry else device})", "",
             f"`make gpu-check{' DRY_RUN=1' if dry else ''}` (scripts/gpu_check.py), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"Python {platform.python_version()}, torch {figures.get('torch', '?')}; whole check {wall_s:.0f} s.", "",
             "| stage | result | seconds | command |", "| --- | --- | --- | --- |"]
    def shown(arg: str) -> str:  # the interpreter by name, paths in the checkout relative to it
        return Path(arg).name if arg == sys.executable else arg.removeprefix(str(ROOT) + os.sep)

    for r in results:
        lines.append(f"| {r['name']} | {'passed' if r['ok'] else 'FAILED: ' + str(r['why'])} | {r['seconds']} | "
                     f"`{' '.join(map(shown, r['cmd']))}` |")
    ct = next((r for r in results if r["name"] == "cuda-tests"), None)
    if ct:
        lines += ["", f"CUDA bit-identity tests: {ct.get('passed', 0)} passed, {ct.get('skipped', 0)} skipped."]
    tp = figures.get("throughput")
    if tp:
        lines += ["", f"## Inner-loop throughput ({tp['device']}, timesfm `{'cpu-test' if dry else 'gpu-ref'}`, "
                  f"{tp['num_params']:,} parameters, median of {tp['rows'][0]['steps']} timed steps after warm-up)", "",
                  "| loop | dtype | batch | samples/s | median step | peak memory |", "| --- | --- | --- | --- | --- | --- |"]
        for row in tp["rows"]:
            lines.append(f"| {row['loop']} | {row['dtype']} | {row['batch']} | {row['samples_per_s']:.0f} | "
                         f"{row['median_step_s'] * 1e3:.1f} ms | {gib(row['peak_memory_bytes'])} |")
        by = {(r["loop"], r["dtype"], r["batch"]): r["samples_per_s"] for r in tp["rows"]}
        for b in sorted({r["batch"] for r in tp["rows"]}):
            if ("InnerTrainer", "bf16", b) in by:
                vs_plain = (f"; vs the plain bf16 loop: {by['InnerTrainer', 'bf16', b] / by['plain PyTorch', 'bf16', b]:.2f}x"
                            if ("plain PyTorch", "bf16", b) in by else "")
                lines += ["", f"batch {b}: bf16 inner loop vs fp32: "
                          f"{by['InnerTrainer', 'bf16', b] / by['InnerTrainer', 'fp32', b]:.2f}x{vs_plain}"]
    trr = figures.get("torchrun")
    if trr:
        lines += ["", f"## torchrun FSDP2 round: {trr['world']} rank(s) on {trr['device']}, `{trr['preset']}` "
                  f"{trr['dtype']}, {trr['steps']} steps, global batch {trr['global_batch']}: "
                  f"{trr['samples_per_s']:.0f} samples/s, peak {gib(trr['peak_memory_bytes'])}, mean loss {trr['mean_loss']:.4f}"]
    zs = figures.get("zero-shot")
    if zs:
        lines += ["", f"## Zero-shot (`{zs['preset']}`, {zs['num_params']:,} parameters, {zs['dtype']}, DiLoCo in the "
                  f"simulator: M={zs['workers']}, H={zs['H']}, batch {zs['batch']}, {zs['rounds']} round(s) fitting a "
                  f"{budget_s:.0f} s budget at {zs['step_s'] * 1e3:.1f} ms a step; trained in {zs['train_s']:.0f} s)", "",
                  f"{zs['series']} series, {zs['windows']} windows (the zero-shot set of trainer/benchmarks/zero_shot.py; "
                  "the widened set of issue #28 does not exist yet). Relative to SeasonalNaive on the same windows, "
                  "geometric mean over series:", "",
                  "| method | relative MASE | relative WQL |", "| --- | --- | --- |",
                  f"| {zs['preset']}, {zs['rounds']} round(s) | {zs['relative']['mase']:.3f} | {zs['relative']['wql']:.3f} |"]
        for name, rel in zs["baselines_relative"].items():
            lines.append(f"| {name} | {rel['mase']:.3f} | {rel['wql']:.3f} |")
    failed = [r for r in results if not r["ok"]]
    lines += ["", "## Could not do" if failed else "Every stage passed."]
    for r in failed:
        lines += ["", f"- **{r['name']}**: {r['why']}", "", "```", r["tail"][-1500:], "```"]
    lines.append("")
    if zs and not dry:
        lines.append(f"zero-shot relative MASE (gpu-ref, batch {zs['batch']}, {zs['rounds']} rounds on one GPU): "
                     f"{zs['relative']['mase']:.3f}")
    lines.append(f"gpu check: {len(results) - len(failed)} of {len(results)} stages passed")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", default="check", choices=["check", "bundle"])
    ap.add_argument("--dry", action="store_true", help="the CPU half of every stage (CI)")
    ap.add_argument("--bundle", type=Path, default=BUNDLE)
    ap.add_argument("--out", type=Path, help="where gpu.md / gpu.json go (default: trainer/benchmarks/results; "
                    "a dry run: a temporary folder unless given)")
    ap.add_argument("--only", nargs="+", help="run only these stages")
    ap.add_argument("--zero-shot-batch", type=int, default=512, help="the gpu-ref recipe's batch per worker (at 64 a 29M model leaves an H100 launch-bound: results/gpu.md)")
    ap.add_argument("--budget-s", type=float, default=ZERO_SHOT_BUDGET_S, help="the zero-shot training budget (s)")
    args = ap.parse_args(argv)
    if args.what == "bundle":
        build_bundle(args.bundle, args.dry)
        return 0
    if args.dry and args.bundle == BUNDLE and not (BUNDLE / BUNDLE_FILES[-1]).exists():
        args.bundle = Path(tempfile.mkdtemp(prefix="gpu-bundle-"))
        build_bundle(args.bundle, dry=True)
    missing = [f for f in BUNDLE_FILES if not (args.bundle / f).exists()]
    if missing:
        print(f"gpu check: {args.bundle} lacks {', '.join(missing)}: run `python scripts/gpu_check.py bundle` "
              "first (here, not on the device)", file=sys.stderr)
        return 2
    lacking = missing_modules()
    if lacking:
        print(f"gpu check: this Python ({sys.executable}) lacks {', '.join(lacking)}: nothing was run",
              file=sys.stderr)
        return 2
    import torch

    gpus = torch.cuda.device_count()
    if not args.dry and gpus == 0:
        print("gpu check: no CUDA device here; `make gpu-check DRY_RUN=1` runs the CPU half", file=sys.stderr)
        return 2
    device = f"{gpus} x {torch.cuda.get_device_name(0)}" if gpus else "cpu"
    out = args.out or (Path(tempfile.mkdtemp(prefix="gpu-check-")) if args.dry else RESULTS)
    work = Path(tempfile.mkdtemp(prefix="gpu-work-"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **({"OMP_NUM_THREADS": "1"} if args.dry else {}),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "trainer"), str(ROOT / "trainer" / "benchmarks"),
                                          os.environ.get("PYTHONPATH", "")])}
    print(f"gpu check on {device}{' (dry)' if args.dry else ''}; stages limited to {TOTAL_S} s in all", flush=True)
    t0 = time.perf_counter()
    results, figures = [], {"torch": torch.__version__}
    for name, cmd, limit in plan(args.dry, gpus, work, args.bundle, args.zero_shot_batch, args.budget_s):
        if args.only and name not in args.only:
            continue
        left = TOTAL_S - (time.perf_counter() - t0)
        if left < 20:
            results.append({"name": name, "cmd": cmd, "ok": False, "why": "no time left", "seconds": 0, "tail": ""})
            continue
        r = run_stage(name, cmd, min(limit, left), env)
        r["cmd"] = cmd
        if name == "cuda-tests":
            check_cuda_tests(r, args.dry)
        src = {"throughput": work / "throughput.json", "torchrun": work / "torchrun" / "result.json",
               "zero-shot": work / "zero-shot.json"}.get(name)
        if r["ok"] and src is not None:
            figures[name] = json.loads(src.read_text())
        results.append(r)
    wall = time.perf_counter() - t0
    md = report(results, figures, device, args.dry, wall, args.budget_s)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.md").write_text(md)
    (out / "gpu.json").write_text(json.dumps({"device": device, "dry": args.dry, "wall_s": wall, "figures": figures,
                                              "stages": results}, indent=1, default=str) + "\n")
    if os.environ.get("OUT") and Path(os.environ["OUT"]).resolve() != out.resolve():
        for f in ("gpu.md", "gpu.json"):
            shutil.copy(out / f, Path(os.environ["OUT"]) / f)
    shutil.rmtree(work, ignore_errors=True)
    print(md)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

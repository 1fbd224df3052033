"""The prepared device check (scripts/gpu_check.py): its dry mode, which CI runs, plans and runs the
CPU half of every stage; a hung stage is killed at its limit and reported, never waited on."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_the_dry_run_passes_every_stage_on_the_cpu(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--dry", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    md = (tmp_path / "gpu.md").read_text()
    assert md.rstrip().endswith("gpu check: 4 of 4 stages passed")
    for heading in ("Inner-loop throughput", "torchrun FSDP2 round: 2 rank(s) on cpu", "Zero-shot"):
        assert heading in md
    assert "CUDA bit-identity tests: 0 passed, 2 skipped." in md  # collected, and skipped without a device


def test_a_hung_stage_is_killed_at_its_limit():
    r = gpu_check.run_stage("hang", [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"],
                            1.0, {})
    assert not r["ok"] and r["why"] == "killed after its 1 s limit"
    assert r["seconds"] < 30 and "started" in r["tail"]


def test_on_a_gpu_a_skipped_cuda_test_fails_the_stage():
    r = {"ok": True, "why": None, "tail": "1 passed, 1 skipped in 2.0s"}
    gpu_check.check_cuda_tests(r, dry=False)
    assert not r["ok"] and "1 CUDA test(s) skipped" in r["why"]


def test_the_plan_uses_every_gpu_and_the_gpu_recipe(tmp_path):
    stages = {name: cmd for name, cmd, _ in gpu_check.plan(False, 4, tmp_path, tmp_path)}
    assert stages.keys() == {"cuda-tests", "throughput", "torchrun", "zero-shot"}
    run = stages["torchrun"]
    assert run[run.index("--nproc-per-node") + 1] == "4"
    assert {"--device", "cuda", "bf16", "gpu-ref"} <= set(run)
    assert "--dry" not in stages["zero-shot"]


def test_without_a_bundle_or_a_gpu_it_says_what_to_do(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--bundle", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "gpu_check.py bundle" in proc.stderr

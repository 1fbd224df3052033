"""What a person sees on an explorer page, read in a real headless Chromium: the helpers that start
tests/browser/watch_run.mjs (npm ``@sparticuz/chromium`` driven by ``playwright-core``, installed by
``make bootstrap``; no download) and collect its JSON lines. Used by the live page test
(tests/replay/test_explorer_browser.py) and the sealed root-flow check (tests/run_view_checks.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stack import REPO

SCRIPT = REPO / "tests" / "browser" / "watch_run.mjs"
BROWSER_PACKAGES = ("@sparticuz/chromium", "playwright-core")


def node() -> str:
    """Node 22 from node_modules (the bootstrap installs it), else the machine's node."""
    local = REPO / "node_modules" / "node" / "bin" / "node"
    found = str(local) if local.exists() else shutil.which("node")
    if not found:
        pytest.fail("no node executable: run `make bootstrap` (it installs Node 22 into node_modules)")
    return found


def node_env() -> dict[str, str]:
    """The environment of the browser script: NODE_PATH adds the checkout's node_modules, where
    `make bootstrap` installs the two browser packages (package.json devDependencies)."""
    env = dict(os.environ)
    paths = [str(REPO / "node_modules"), *filter(None, env.get("NODE_PATH", "").split(os.pathsep))]
    env["NODE_PATH"] = os.pathsep.join(paths)
    missing = [p for p in BROWSER_PACKAGES if not any((Path(d) / p / "package.json").exists() for d in paths)]
    if missing:
        pytest.fail(f"npm packages {', '.join(missing)} are not installed: run `make bootstrap` (npm install)")
    return env


def watch_command(url: str, timeout_s: float) -> list[str]:
    return [node(), str(SCRIPT), "--url", url, "--timeout-s", str(int(timeout_s))]


def read_sealed_page(url: str, timeout_s: float = 120) -> dict:
    """The last snapshot the browser read of a sealed run's page (which carries no refresh tag):
    ``{"status", "round", "rounds": [{round, finalized, seconds, accepted, quorum_met, weights_root}],
    "trainers": [{index, trainer, submitted, accepted, missed, stake, slashed, credits, reward, state}]}``.

    Raises:
        AssertionError: the script failed, or the page never showed a sealed run within ``timeout_s``.
    """
    proc = subprocess.run(watch_command(url, timeout_s), cwd=REPO, env=node_env(), capture_output=True, text=True,
                          timeout=timeout_s + 60)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    assert proc.returncode == 0 and lines and lines[-1].get("done") == "sealed", \
        f"the browser did not show a sealed run at {url} (exit {proc.returncode}): {lines[-2:]} {proc.stderr[-2000:]}"
    return [x for x in lines if "done" not in x][-1]

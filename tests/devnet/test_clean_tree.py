"""A clean clone stays clean after `make demo` (issue #27): every path the devnet, the deploy script
and both demos write by default is one git ignores. The paths are read from the code's own defaults,
so a new default output outside the ignored ones fails here, not in a user's `git status`."""

from __future__ import annotations

import subprocess

import pytest

from tenzro_operator import demo, devnet
from tenzro_operator.demo_adversarial import ADVERSARIAL

REPO = devnet.REPO_ROOT


def _written_by_default() -> dict[str, object]:
    s = demo.DemoSettings()
    return {
        "devnet data dir (anvil state, IPFS repo, pids.json)": devnet.DEFAULT_DATA_DIR / "anvil" / "state.json",
        "demo workdir (.devnet/demo/<task>)": devnet.DEFAULT_DATA_DIR / "demo" / "task" / "trainer-0" / "key.json",
        "deployment record": s.deployments,
        "demo summary": s.out / "summary.json",
        "adversarial demo summary": ADVERSARIAL.out / "summary.json",
        "ape's build artifacts": REPO / ".build" / "__local__.json",
        "ape's data folder": REPO / ".ape" / "packages" / "x",
        "solc": REPO / ".solc" / "solc",
    }


@pytest.mark.parametrize("what", list(_written_by_default()))
def test_what_make_demo_writes_is_ignored_by_git(what):
    path = _written_by_default()[what].relative_to(REPO)
    res = subprocess.run(["git", "check-ignore", "-q", "--no-index", str(path)], cwd=REPO)
    assert res.returncode == 0, f"{what} ({path}) is not git-ignored: a clean clone shows it after `make demo`"

"""A devnet of the tests' own (free ports, temp dir) with the contracts deployed by `ape run deploy`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stack import free_port
from tenzro_operator import devnet

REPO = devnet.REPO_ROOT


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """(DevnetConfig, deployments path): anvil + IPFS node up, contracts deployed by the real script."""
    tmp = tmp_path_factory.mktemp("e2e")
    cfg = devnet.DevnetConfig(data_dir=tmp / "devnet", rpc_port=free_port(), ipfs_port=free_port())
    devnet.up(cfg)
    try:
        out = tmp / "deployments.json"
        env = {**os.environ, "APE_FOUNDRY_HOST": cfg.rpc_url,
               "PATH": f"{REPO / 'node_modules/.bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
        r = subprocess.run([str(Path(sys.executable).parent / "ape"), "run", "deploy", "--network",
                            "ethereum:local:foundry", "--out", str(out)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"ape run deploy failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        yield cfg, out
    finally:
        devnet.down(cfg)

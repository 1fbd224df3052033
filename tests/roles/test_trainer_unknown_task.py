"""A trainer daemon told to join a task id the registry does not have stops at start-up with one
clear line (exit 1), instead of polling silently for ``discover_timeout_s`` (600 s); with
``task_wait_s`` it waits that long for the run to be posted, and no longer."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml

from roles_stack import TRAINERS
from stack import REPO
from tenzro_operator.errors import TenzroError
from tenzro_operator.keys import anvil_account, create_keystore

PASSWORD = "correct horse battery staple"


def test_unknown_task_id_fails_fast_through_the_cli(dev, tmp_path):
    key = tmp_path / "key.json"
    create_keystore(key, PASSWORD, anvil_account(TRAINERS[0]).key, overwrite=True, scrypt_n=2**4)
    cfg = tmp_path / "trainer.yaml"
    cfg.write_text(yaml.safe_dump({"node_rpc": dev.rpc_url, "ipfs_api": dev.ipfs_url, "deployments": str(dev.deployments),
                                   "keystore": str(key), "task_id": "no-such-task", "metrics_port": None,
                                   "data_dir": str(tmp_path / "t")}))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tenzro_operator.cli.trainer", "run", "--config", str(cfg)], cwd=REPO,
                       env=dict(os.environ, TENZRO_KEYSTORE_PASSWORD=PASSWORD), capture_output=True, text=True,
                       timeout=120)
    assert time.monotonic() - t0 < 60
    assert p.returncode == 1, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: trainer: no run with task_id 'no-such-task' (0x"), p.stderr
    assert dev.rpc_url in last and "tenzro train list-runs" in last and "task_wait_s" in last
    assert "Traceback" not in p.stderr


def test_task_wait_s_bounds_the_wait(dev, tmp_path):
    from tenzro_operator.roles.trainer import TrainerDaemon, TrainerDaemonConfig

    cfg = TrainerDaemonConfig(node_rpc=dev.rpc_url, ipfs_api=dev.ipfs_url, deployments=dev.deployments, task_id="0x1234",
                              data_dir=tmp_path / "t", metrics_port=None, poll_interval_s=0.3, task_wait_s=1.0)
    d = TrainerDaemon(cfg, anvil_account(TRAINERS[0]), dev.client(TRAINERS[0]), dev.ipfs())
    t0 = time.monotonic()
    with pytest.raises(TenzroError, match=r"no run with task_id '0x1234' .*0x \+ 64 hex digits"):
        d.find_task()
    assert 1.0 <= time.monotonic() - t0 < 10

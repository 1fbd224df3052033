"""Start-up of the daemons: configs with the daemon-only keys, clear errors (and exit code 1)
when IPFS or the RPC endpoint is down or the keystore does not open, and a clean exit 0 on
SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from roles_stack import SYNCER, TRAINERS, post_small_task
from stack import REPO, free_port
from tenzro_operator.config import load_config
from tenzro_operator.errors import ConfigError, IpfsUnavailable
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account, create_keystore
from tenzro_operator.roles.syncer import SyncerDaemon, SyncerDaemonConfig
from tenzro_operator.roles.trainer import TrainerDaemonConfig, apply_fault

PASSWORD = "correct horse battery staple"


def _keystore(tmp_path: Path, index: int) -> Path:
    path = tmp_path / f"key-{index}.json"
    create_keystore(path, PASSWORD, anvil_account(index).key, overwrite=True, scrypt_n=2**4)
    return path


def _yaml(tmp_path: Path, name: str, **fields) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({k: (str(v) if isinstance(v, Path) else v) for k, v in fields.items()}))
    return p


def _cli(module: str, config: Path, env_extra: dict | None = None, **kw) -> subprocess.Popen:
    env = dict(os.environ)
    env["TENZRO_KEYSTORE_PASSWORD"] = PASSWORD
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", module, "run", "--config", str(config)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_trainer_config_fault_keys(tmp_path):
    p = _yaml(tmp_path, "trainer.yaml", task_id="t", fault={"kind": "nan", "rounds": [1]}, metrics_port=None)
    cfg = load_config(p, TrainerDaemonConfig)
    assert cfg.fault.kind == "nan" and cfg.fault.applies(1, 0) and not cfg.fault.applies(0, 0)
    bad = _yaml(tmp_path, "bad.yaml", fault={"kind": "explode"})
    with pytest.raises(ConfigError, match="fault.kind"):
        load_config(bad, TrainerDaemonConfig)
    s = load_config(_yaml(tmp_path, "syncer.yaml", straggler_wait_s=0.5), SyncerDaemonConfig)
    assert s.straggler_wait_s == 0.5 and s.fetch_retries == 3


def test_apply_fault_tensors():
    import torch

    d = {"w": torch.tensor([1.0, -2.0])}
    assert torch.isnan(apply_fault("nan", d)["w"]).all()
    assert apply_fault("scale100", d)["w"].tolist() == [100.0, -200.0]
    assert apply_fault("sign_flip", d)["w"].tolist() == [-1.0, 2.0]
    assert apply_fault("wrong_hash", d) is d


def test_dead_ipfs_at_startup_is_a_clear_error(dev, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    cfg = SyncerDaemonConfig(node_rpc=dev.rpc_url, ipfs_api=dead, deployments=dev.deployments,
                             data_dir=tmp_path, metrics_port=None)
    d = SyncerDaemon(cfg, anvil_account(SYNCER), dev.client(SYNCER), IpfsClient(dead, retries=2, backoff_s=0.05))
    t0 = time.monotonic()
    with pytest.raises(IpfsUnavailable) as ei:
        d.startup_checks()
    assert time.monotonic() - t0 < 10
    assert dead in str(ei.value) and "IPFS node" in str(ei.value)


def test_startup_logs_its_services_and_an_environment_override(dev, tmp_path, monkeypatch, caplog):
    """An operator sees which chain and IPFS node a daemon uses, and a TENZRO_* variable left in the
    shell that overrides the config file is named, not silently applied."""
    import logging

    path = _yaml(tmp_path, "syncer.yaml", node_rpc=dev.rpc_url, ipfs_api=dev.ipfs_url, deployments=dev.deployments,
                 data_dir=tmp_path, metrics_port=None)
    monkeypatch.setenv("TENZRO_NODE_RPC", "http://127.0.0.1:9")  # a stale export from another devnet
    monkeypatch.setenv("TENZRO_IPFS_API", dev.ipfs_url)  # the same value: nothing to say
    cfg = load_config(path, SyncerDaemonConfig)
    assert cfg.node_rpc == "http://127.0.0.1:9"
    d = SyncerDaemon(cfg, anvil_account(SYNCER), dev.client(SYNCER), IpfsClient(dev.ipfs_url))
    with caplog.at_level(logging.INFO, logger="tenzro"):
        d.startup_checks()
    assert f"chain {dev.rpc_url} (chain id 31337" in caplog.text and f"IPFS node {dev.ipfs_url}" in caplog.text
    assert "TENZRO_NODE_RPC from the environment overrides the config file's node_rpc" in caplog.text
    assert "TENZRO_IPFS_API" not in caplog.text


def test_dead_rpc_and_bad_password_through_the_cli(dev, tmp_path):
    key = _keystore(tmp_path, TRAINERS[0])
    dead = f"http://127.0.0.1:{free_port()}"
    cfg = _yaml(tmp_path, "trainer.yaml", node_rpc=dead, ipfs_api=dev.ipfs_url, deployments=dev.deployments,
                keystore=key, task_id="whatever", metrics_port=None, data_dir=tmp_path / "t")
    p = _cli("tenzro_operator.cli.trainer", cfg)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1
    lines = err.strip().splitlines()
    assert lines[-1].startswith("Error: the JSON-RPC endpoint is not answering at " + dead), err
    assert "gave up after 5 attempt(s)" in lines[-1]
    assert "(eth_chainId: ConnectionRefusedError: Connection refused)" in lines[-1] and len(lines[-1]) < 250, lines[-1]
    assert sum("retry" in ln for ln in lines[:-1]) == 4  # retries with backoff first, then the error
    assert "Traceback" not in err
    p = _cli("tenzro_operator.cli.syncer", cfg, env_extra={"TENZRO_KEYSTORE_PASSWORD": "wrong"})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1 and "wrong password for keystore" in err and "wrong\n" not in err.replace(
        "wrong password", "")
    assert PASSWORD not in err + out


@pytest.mark.slow
def test_trainer_cli_enrolls_then_exits_zero_on_sigterm(dev, tmp_path):
    tid = post_small_task(dev, trainers=3, quorum=2, rounds=1)  # stays Enrolling: nobody else joins
    key = _keystore(tmp_path, TRAINERS[1])
    cfg = _yaml(tmp_path, "trainer.yaml", node_rpc=dev.rpc_url, ipfs_api=dev.ipfs_url, deployments=dev.deployments,
                keystore=key, task_id="0x" + tid.hex(), metrics_port=0, data_dir=tmp_path / "t",
                poll_interval_s=0.3)
    p = _cli("tenzro_operator.cli.trainer", cfg)
    client = dev.client()
    me = anvil_account(TRAINERS[1]).address
    deadline = time.monotonic() + 90
    try:
        while not client.trainer_stats(tid, me).enrolled:
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the trainer did not enroll"
            time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "stop requested" in err
    assert client.trainer_stats(tid, me).did == f"did:tenzro:machine:{me}"


def test_repeated_service_failures_halt_with_a_clear_error(dev, tmp_path):
    """A step that keeps failing because IPFS is down is retried, then the daemon halts on purpose
    with the service named (the client's own retries come first). The outage tolerance is 0 here:
    the default rides out 300 s of outage first (tests/operator/test_daemon_hardening.py)."""
    from tenzro_operator.daemon import DaemonHalted

    dead = f"http://127.0.0.1:{free_port()}"
    cfg = SyncerDaemonConfig(node_rpc=dev.rpc_url, ipfs_api=dead, deployments=dev.deployments, data_dir=tmp_path,
                             metrics_port=None, max_consecutive_failures=3, outage_tolerance_s=0)
    dead_ipfs = IpfsClient(dead, retries=1, backoff_s=0.01)
    d = SyncerDaemon(cfg, anvil_account(SYNCER), dev.client(SYNCER), dead_ipfs)
    cid = "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am"
    assert d.guarded("fetch payload", lambda: dead_ipfs.cat(cid)) is None
    assert d.guarded("fetch payload", lambda: dead_ipfs.cat(cid)) is None
    assert d.backoff_s() == 1.0  # 0.5 s, then doubling
    with pytest.raises(DaemonHalted) as ei:
        d.guarded("fetch payload", lambda: dead_ipfs.cat(cid))
    msg = str(ei.value)
    assert "syncer halted after 3 consecutive failures" in msg and "IpfsUnavailable" in msg and dead in msg
    # a success resets the count
    d.consecutive_failures = 0
    assert d.guarded("ok", lambda: 7) == 7 and d.consecutive_failures == 0

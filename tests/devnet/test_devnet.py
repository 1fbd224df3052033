"""The devnet launcher against the real anvil and IPFS node."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tenzro_operator import devnet
from tenzro_operator.errors import DevnetError

DEV_KEY_0 = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"  # anvil's account 0
BURN = "0x000000000000000000000000000000000000dEaD"


def _balance(url: str, addr: str) -> int:
    return int(devnet.rpc_call(url, "eth_getBalance", [addr, "latest"]), 16)


def test_up_is_idempotent_and_status_reports_both(devnet_cfg):
    first = devnet.up(devnet_cfg)
    second = devnet.up(devnet_cfg)
    assert first["anvil"] == second["anvil"] and first["ipfs"] == second["ipfs"]
    rows = {s.name: s for s in devnet.status(devnet_cfg)}
    assert rows["anvil"].up and rows["anvil"].detail["chain_id"] == devnet.ANVIL_CHAIN_ID
    assert rows["ipfs"].up and rows["ipfs"].detail["version"]
    assert set(devnet.down(devnet_cfg)) == {"anvil", "ipfs"}
    assert not any(s.up for s in devnet.status(devnet_cfg))


def test_status_and_down_without_ports_use_the_recorded_ones(devnet_cfg):
    """A devnet started on other ports (`make devnet-up RPC_PORT=...`): `status` and `down` without
    ports read them from its pids.json rather than calling a live devnet down on the defaults."""
    devnet.up(devnet_cfg)
    cli = [sys.executable, "scripts/devnet.py"]
    where = ["--data-dir", str(devnet_cfg.data_dir)]
    r = subprocess.run([*cli, "status", *where, "--json"], capture_output=True, text=True, cwd=devnet.REPO_ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert devnet_cfg.rpc_url in r.stdout and devnet_cfg.ipfs_url in r.stdout
    # explicit ports still win
    assert devnet.recorded_config(devnet_cfg.data_dir, rpc_port=1234).rpc_port == 1234
    assert devnet.recorded_config(devnet_cfg.data_dir).ipfs_port == devnet_cfg.ipfs_port
    r = subprocess.run([*cli, "down", *where], capture_output=True, text=True, cwd=devnet.REPO_ROOT)
    assert r.returncode == 0 and "stopped ipfs, anvil" in r.stdout, r.stdout + r.stderr
    assert not any(s.up for s in devnet.status(devnet_cfg))
    # nothing recorded: the defaults
    empty = devnet.recorded_config(devnet_cfg.data_dir.parent / "never-started")
    assert (empty.rpc_port, empty.ipfs_port) == (devnet.DEFAULT_RPC_PORT, devnet.DEFAULT_IPFS_PORT)


def test_chain_state_survives_restart(devnet_cfg):
    devnet.up(devnet_cfg)
    url = devnet_cfg.rpc_url
    before = _balance(url, BURN)
    devnet.rpc_call(url, "anvil_setBalance", [BURN, hex(before + 12345)])
    devnet.rpc_call(url, "evm_mine")
    t0 = time.monotonic()
    devnet.down(devnet_cfg)
    state = devnet.anvil_state_path(devnet_cfg)
    # once seen missing under CI load (before `down` saved it through anvil_dumpState): say how long
    # the stop took and what anvil logged
    log = devnet_cfg.data_dir / "logs" / "anvil.log"
    assert state.exists() and state.stat().st_size > 0, (
        f"no state after a {time.monotonic() - t0:.1f} s stop; anvil.log: "
        f"{log.read_text()[-2000:] if log.exists() else 'none'}")
    devnet.up(devnet_cfg)
    assert _balance(url, BURN) == before + 12345


def test_state_saved_through_rpc_survives_a_kill(devnet_cfg):
    """`save_anvil_state` alone (no SIGTERM dump: the chain is killed) keeps a block mined after
    anvil's last periodic dump; a restart loads it."""
    pids = devnet.up(devnet_cfg)
    url = devnet_cfg.rpc_url
    devnet.rpc_call(url, "anvil_setBalance", [BURN, hex(777)])
    devnet.rpc_call(url, "evm_mine")
    block = int(devnet.rpc_call(url, "eth_blockNumber"), 16)
    assert devnet.save_anvil_state(devnet_cfg)
    # written now, not by anvil's 5-s periodic dump: it holds the block just mined
    assert int(json.loads(devnet.anvil_state_path(devnet_cfg).read_text())["block"]["number"], 16) == block
    os.kill(pids["anvil"], signal.SIGKILL)
    devnet.down(devnet_cfg)
    devnet.up(devnet_cfg)
    assert _balance(url, BURN) == 777
    assert int(devnet.rpc_call(url, "eth_blockNumber"), 16) >= block


def test_port_held_by_another_chain_is_refused(devnet_cfg, tmp_path):
    devnet.up(devnet_cfg)
    other = devnet.DevnetConfig(data_dir=tmp_path / "other", rpc_port=devnet_cfg.rpc_port,
                                ipfs_port=devnet_cfg.ipfs_port, chain_id=1)
    with pytest.raises(DevnetError, match="chain id 31337"):
        devnet.up(other)


def test_status_cli_says_down_without_traceback(devnet_cfg):
    r = subprocess.run([sys.executable, "scripts/devnet.py", "status", "--data-dir", str(devnet_cfg.data_dir),
                        "--rpc-port", str(devnet_cfg.rpc_port), "--ipfs-port", str(devnet_cfg.ipfs_port)],
                       capture_output=True, text=True, cwd=devnet.REPO_ROOT)
    assert r.returncode == 1
    assert "down" in r.stdout and "Traceback" not in r.stdout + r.stderr



def test_another_checkouts_devnet_on_the_ports_is_not_ours(devnet_cfg, tmp_path):
    """Same chain id, same contract addresses, but not started from this data dir: `up` refuses it
    (one line naming the port settings) and `status` shows it as not ours, instead of reusing it."""
    devnet.up(devnet_cfg)
    mine = devnet.DevnetConfig(data_dir=tmp_path / "checkout-2", rpc_port=devnet_cfg.rpc_port,
                               ipfs_port=devnet_cfg.ipfs_port)
    with pytest.raises(DevnetError, match="did not start") as ei:
        devnet.up(mine)
    assert "RPC_PORT" in str(ei.value) and devnet_cfg.rpc_url in str(ei.value)
    assert not (mine.data_dir / "pids.json").exists() or "anvil" not in devnet._read_pids(mine)
    rows = {s.name: s for s in devnet.status(mine)}
    assert rows["anvil"].detail["ours"] is False and not rows["anvil"].up
    with pytest.raises(DevnetError, match="did not start"):
        devnet.require_ours(mine)
    # the owner still sees its own devnet as up and ours
    assert devnet.require_ours(devnet_cfg)["genesis_hash"] == devnet.genesis_hash(devnet_cfg.rpc_url)
    assert all(s.up for s in devnet.status(devnet_cfg))

"""Daemon-side hardening of issue 14 on anvil with the real contracts: a run this account staked
in is never given up (M1), the skip list survives restarts and discovery filters runs by sponsor
and reward (H2), state files are named by the full task id and loaded without running code (M7,
Low)."""

from __future__ import annotations

import torch
import pytest

from tenzro_operator.daemon import DaemonHalted, load_state_file
from tenzro_operator.errors import RpcUnavailable, TenzroError, TxFailed
from tenzro_operator.keys import anvil_account
from tenzro_operator.roles.syncer import SyncerDaemon, SyncerDaemonConfig
from tenzro_operator.roles.trainer import TrainerDaemon, TrainerDaemonConfig


def _trainer(stack, ipfs_url, roles, index, data_dir, **cfg):
    from tenzro_operator.ipfs import IpfsClient

    config = TrainerDaemonConfig(node_rpc=stack.rpc_url, ipfs_api=ipfs_url, deployments=stack.deployments,
                                 data_dir=data_dir, metrics_port=None, **cfg)
    return TrainerDaemon(config, anvil_account(index), roles["base"].with_account(anvil_account(index)),
                         IpfsClient(ipfs_url))


def test_m1_a_run_with_this_accounts_stake_is_never_given_up(stack, ipfs_url, roles, running_task, tmp_path):
    _, tid = running_task  # trainers 3 and 4 enrolled, syncer 2 elected, round 0 open
    staked = _trainer(stack, ipfs_url, roles, 3, tmp_path / "t3")
    staked.quarantine(tid, DaemonHalted("trainer halted after 5 consecutive failures"))
    staked.quarantine(tid, TenzroError("the spec could not be fetched"))
    assert tid not in staked.bad_runs
    assert tid in [t for t, _ in staked.live_runs()]  # found again by discovery
    outsider = _trainer(stack, ipfs_url, roles, 5, tmp_path / "t5")
    outsider.quarantine(tid, TxFailed("enrollTrainer tx 0x.. was not mined within 60 s"))  # outcome unknown
    assert tid not in outsider.bad_runs
    outsider.quarantine(tid, TenzroError("the spec could not be fetched"))
    assert tid in outsider.bad_runs
    # the skip list outlives the process: a restarted daemon does not fetch that run's assets again
    again = _trainer(stack, ipfs_url, roles, 5, tmp_path / "t5")
    assert tid in again.bad_runs and tid not in [t for t, _ in again.live_runs()]
    # the service being down is never the run's fault
    with pytest.raises(RpcUnavailable):
        outsider.quarantine(tid, RpcUnavailable("http://127.0.0.1:1", 3))


def test_m1_the_syncer_of_a_run_never_gives_it_up(stack, ipfs_url, roles, running_task, tmp_path):
    from tenzro_operator.ipfs import IpfsClient

    _, tid = running_task
    cfg = SyncerDaemonConfig(node_rpc=stack.rpc_url, ipfs_api=ipfs_url, deployments=stack.deployments,
                             data_dir=tmp_path / "s", metrics_port=None)
    d = SyncerDaemon(cfg, anvil_account(2), roles["syncer"], IpfsClient(ipfs_url))
    d.quarantine(tid, DaemonHalted("syncer halted"))
    assert tid not in d.bad_runs


def test_discovery_filters_by_sponsor_and_reward_pool(stack, ipfs_url, roles, running_task, tmp_path):
    _, tid = running_task
    sponsor = roles["sponsor"].address
    listed = lambda d: [t for t, _ in d.live_runs()]  # noqa: E731
    assert tid in listed(_trainer(stack, ipfs_url, roles, 5, tmp_path / "a", allow_sponsors=[sponsor]))
    other = anvil_account(9).address
    assert tid not in listed(_trainer(stack, ipfs_url, roles, 5, tmp_path / "b", allow_sponsors=[other]))
    pool = roles["base"].get_run(tid).reward_pool
    assert tid in listed(_trainer(stack, ipfs_url, roles, 5, tmp_path / "c", min_reward_pool=f"{pool}atto"))
    assert tid not in listed(_trainer(stack, ipfs_url, roles, 5, tmp_path / "d",
                                      min_reward_pool=f"{pool + 1}atto"))


def test_m7_state_files_are_named_by_the_full_task_id(stack, ipfs_url, roles, tmp_path):
    from tenzro_operator.ipfs import IpfsClient

    cfg = SyncerDaemonConfig(node_rpc=stack.rpc_url, ipfs_api=ipfs_url, deployments=stack.deployments,
                             data_dir=tmp_path, metrics_port=None)
    d = SyncerDaemon(cfg, anvil_account(2), roles["syncer"], IpfsClient(ipfs_url))
    shared = bytes.fromhex("ab" * 8)  # two runs whose ids share the first 16 hex digits
    d.task_id = shared + b"\x01" * 24
    first = d.state_path
    d.task_id = shared + b"\x02" * 24
    assert d.state_path != first and d.task_id.hex() in d.state_path.name


class _Evil:
    def __reduce__(self):
        return (print, ("code ran while loading a state file",))


def test_state_files_load_without_running_code(tmp_path):
    good = tmp_path / "good.pt"
    torch.save({"task": "0x01", "round": 3, "outers": [{"w": torch.ones(2)}]}, good)
    assert load_state_file(good)["round"] == 3
    evil = tmp_path / "evil.pt"
    torch.save({"task": "0x01", "x": _Evil()}, evil)
    with pytest.raises(TenzroError, match="can not be loaded safely"):
        load_state_file(evil)
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    with pytest.raises(TenzroError, match="junk.pt"):
        load_state_file(tmp_path / "junk.pt")


def test_a_daemon_rides_out_an_rpc_outage_then_halts_past_its_tolerance(fresh_stack, ipfs_url, tmp_path, caplog):
    """Issue 11, item 6: the anvil behind a daemon stops for a few seconds and comes back; the
    daemon's steps fail with RpcUnavailable meanwhile, are retried (logged, outage metric set) and
    the daemon carries on: nothing halts. With a tolerance of 0 s the same outage halts it after
    ``max_consecutive_failures`` failed steps."""
    import logging
    import threading
    import time

    from tenzro_operator.chain import ChainClient
    from tenzro_operator.ipfs import IpfsClient
    from tenzro_operator.metrics import TrainerMetrics

    caplog.set_level(logging.WARNING, logger="tenzro.daemon")
    chain = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(3))
    config = TrainerDaemonConfig(node_rpc=fresh_stack.rpc_url, ipfs_api=ipfs_url,
                                 deployments=fresh_stack.deployments, data_dir=tmp_path / "t", metrics_port=None,
                                 outage_tolerance_s=120)
    daemon = TrainerDaemon(config, anvil_account(3), chain, IpfsClient(ipfs_url), metrics=TrainerMetrics())
    heads, outage = [], []

    def step():  # one unit of a daemon's work: read the chain
        heads.append(chain.block_number())
        if len(heads) == 2:  # the node goes away after two good steps, for about 9 s
            fresh_stack.anvil.stop()
            threading.Timer(9.0, fresh_stack.anvil.start).start()
        outage.append(daemon.metrics.service_outage._value.get())
        return "done" if len(heads) >= 4 else "next"

    daemon.step = step
    t0 = time.monotonic()
    daemon.step_until_done("read the chain")  # does not raise: the outage is ridden out
    assert len(heads) == 4 and time.monotonic() - t0 >= 8.5
    assert "rides out" in caplog.text and "answers again" in caplog.text
    assert max(outage) > 0  # the outage metric showed it while the node was down
    assert daemon.metrics.service_outage._value.get() == 0  # back to 0 once it answers

    impatient = TrainerDaemon(config.model_copy(update={"outage_tolerance_s": 0.0}), anvil_account(3), chain,
                              IpfsClient(ipfs_url), metrics=TrainerMetrics())
    fresh_stack.anvil.stop()
    try:
        impatient.step = lambda: chain.block_number()
        with pytest.raises(DaemonHalted, match="RpcUnavailable"):
            impatient.step_until_done("read the chain")
    finally:
        fresh_stack.anvil.start()


def test_an_outage_outside_a_guarded_step_is_ridden_out_by_serving_the_run_again(fresh_stack, ipfs_url, tmp_path):
    """The RPC endpoint stops answering while a daemon reads the run outside a guarded step (the
    client's own retries exhausted): the daemon does not exit; it forgets the run's in-memory state
    and serves it again once the node is back, as a restarted process would. Past
    ``outage_tolerance_s`` the error reaches the caller."""
    import threading

    from tenzro_operator.chain import ChainClient
    from tenzro_operator.ipfs import IpfsClient

    chain = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(3), retries=2, backoff_s=0.1)
    config = TrainerDaemonConfig(node_rpc=fresh_stack.rpc_url, ipfs_api=ipfs_url,
                                 deployments=fresh_stack.deployments, data_dir=tmp_path / "t", metrics_port=None,
                                 outage_tolerance_s=60)
    daemon = TrainerDaemon(config, anvil_account(3), chain, IpfsClient(ipfs_url))
    served, resets = [], []

    def serve(task_id):  # what a role's serve does first: read the chain
        served.append(task_id)
        if len(served) == 1:  # the node goes away for about 4 s just before the first read
            fresh_stack.anvil.stop()
            threading.Timer(4.0, fresh_stack.anvil.start).start()
        return chain.block_number() >= 0

    daemon.serve = serve
    daemon.reset_run = lambda: resets.append(True)
    assert daemon.serve_riding_outages(b"\x01" * 32) is True
    assert len(served) >= 2 and len(resets) == len(served) - 1  # served again after each failed try

    impatient = TrainerDaemon(config.model_copy(update={"outage_tolerance_s": 0.0}), anvil_account(3), chain,
                              IpfsClient(ipfs_url))
    impatient.serve = lambda task_id: chain.block_number()
    fresh_stack.anvil.stop()
    try:
        with pytest.raises(RpcUnavailable):
            impatient.serve_riding_outages(b"\x01" * 32)
    finally:
        fresh_stack.anvil.start()

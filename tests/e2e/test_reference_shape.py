"""The main job at the Phase-1 reference shape (M = 8, K = 6, F = 12) on the devnet.

anvil funds only its first ten accounts; the demo needs 11 (deployer, sponsor, syncer, 8
trainers), so this also checks that the accounts beyond them get ETH for gas. 2 rounds at
H = 8 keep it to a few minutes on two CPU cores (a 60 s grace window: a 30 s commit phase, time for
eight trainers' inner steps on two cores).
"""

import pytest

from tenzro_operator import devnet
from tenzro_operator.chain import ChainClient, RunStatus
from tenzro_operator.demo import DemoSettings, run_demo
from tenzro_operator.keys import anvil_account

pytestmark = pytest.mark.slow


def test_reference_shape_seals_and_balances(deployed, tmp_path):
    cfg, deployments = deployed
    s = DemoSettings(rpc=cfg.rpc_url, ipfs=cfg.ipfs_url, deployments=deployments, workdir=tmp_path / "work",
                     out=tmp_path / "out", trainers=8, quorum=6, fragments=12, rounds=2, inner_steps=8,
                     batch_size=16, grace_window_ms=60_000, timeout_s=900)
    summary = run_demo(s)
    chain = ChainClient(cfg.rpc_url, deployments)
    task_id = bytes.fromhex(summary["task_id"][2:])
    run = chain.get_run(task_id)
    assert run.status == RunStatus.SEALED and run.current_round == 2
    assert len(chain.trainers_of(task_id)) == 8
    # anvil's account 10 (trainer-7) started with no ETH and paid its own gas
    assert devnet.eth_balance(cfg.rpc_url, anvil_account(10).address) > 0
    commits = chain.get_logs(summary["posted_block"], chain.block_number(), ["RoundCommitted"], task_id=task_id)
    assert sorted(e["args"]["round"] for e in commits) == [0, 1]
    for e in commits:  # every fragment of every round has its quorum K = 6 of accepted submissions
        bitmaps = [int(b) for b in e["args"]["acceptedBitmaps"]]
        assert all(sum(b >> f & 1 for b in bitmaps) >= 6 for f in range(12)), bitmaps
    acct = summary["accounting"]
    assert acct["conserved"] is True and acct["in"] == acct["out"]
    assert summary["receipt"]["verifier_ok"] and summary["receipt"]["replay_ok"]

"""``make demo-adversarial`` (`tenzro_operator.demo_adversarial`) at test scale on a devnet of its
own: separate processes for syncer A (a false invalid report, then one wrong weight), stand-in
syncer B, four honest trainers, a copycat, a sign flipper, a trainer that withholds its forced
payloads, a trainer looping availability challenges on its own submissions and a watcher with a
key. Every cheat
is caught, the run seals, honest parties lose nothing and tokens balance; checked against the
chain as well as the demo's own summary. Each cheat alone: test_demo_adversarial_each.py (a file
of its own, so that the test workers share the two halves)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tenzro_operator.chain import ChainClient
from tenzro_operator.demo_adversarial import ADVERSARIAL, run_adversarial

pytestmark = pytest.mark.slow


def test_every_cheat_is_caught_and_the_run_seals(deployed, tmp_path):
    cfg, deployments = deployed
    s = replace(ADVERSARIAL, rpc=cfg.rpc_url, ipfs=cfg.ipfs_url, deployments=deployments, workdir=tmp_path / "work",
                out=tmp_path / "out", rounds=2, fragments=2, inner_steps=8)
    summary = run_adversarial(s)
    assert summary["caught"] == {"false invalid report": True, "wrong aggregate": True, "copycat": True,
                                 "sign flip": True, "withheld forced payload": True, "availability loop": True}
    assert summary["tokens_in"] == summary["tokens_out"] and summary["honest_whole"] and summary["receipt_ok"]
    chain = ChainClient(cfg.rpc_url, deployments)
    tid = bytes.fromhex(summary["task_id"][2:])
    proofs = chain.get_logs(chain.deployment.deploy_block, chain.block_number(), ["RoundProvenWrong"], task_id=tid)
    assert [int(p["args"]["round"]) for p in proofs] == [1]
    parties = {p["party"]: p for p in summary["parties"]}
    assert int(parties["syncer-a"]["slashed"]) == int(parties["syncer-a"]["stake_in"])
    assert int(parties["watcher"]["bounty"]) == int(parties["syncer-a"]["slashed"]) // 10
    for i in range(4):
        assert int(parties[f"trainer-{i}"]["slashed"]) == 0 and int(parties[f"trainer-{i}"]["reward"]) > 0
    assert [int(parties[f"trainer-{i}"]["reward"]) for i in (4, 5, 6)] == [0, 0, 0]
    assert int(parties["trainer-6"]["slashed"]) > 0 and int(parties["syncer-b"]["slashed"]) == 0
    assert (tmp_path / "out" / "summary.json").exists()

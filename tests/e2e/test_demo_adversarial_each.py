"""``make demo-adversarial`` (`tenzro_operator.demo_adversarial`), each cheat alone
(``cheats=[cheat]``) on a devnet of its own, at the smallest scale that still exercises it: the
cheater's loss and the honest parties' balances read from the chain's events. All cheats together:
test_demo_adversarial.py."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from tenzro_operator.chain import ChainClient
from tenzro_operator.demo_adversarial import ADVERSARIAL, CHEATS, run_adversarial
from tenzro_operator.root_flow import committed_rounds, cumulative_credits

pytestmark = pytest.mark.slow

# rounds each cheat needs: the wrong aggregate is committed in round 1, the rest cheat in round 0.
# Measured on 2 CPU cores shared with a benchmark: false invalid report 87 s, wrong aggregate 129 s,
# copycat 105 s, sign flip 90 s (all cheats together, rounds=3: 223 s)
ROUNDS = {"false invalid report": 1, "wrong aggregate": 2, "copycat": 1, "sign flip": 1}


@pytest.mark.parametrize("cheat", CHEATS)
def test_one_cheat_alone_costs_the_cheater_and_leaves_the_honest_whole(deployed, tmp_path, cheat):
    cfg, deployments = deployed
    s = replace(ADVERSARIAL, rpc=cfg.rpc_url, ipfs=cfg.ipfs_url, deployments=deployments, workdir=tmp_path / "work",
                out=tmp_path / "out", rounds=ROUNDS[cheat], fragments=2, inner_steps=8)
    t0 = time.monotonic()
    summary = run_adversarial(s, cheats=[cheat])
    print(f"\n{cheat}: {time.monotonic() - t0:.0f} s")
    assert summary["caught"] == {cheat: True}
    assert summary["tokens_in"] == summary["tokens_out"] and summary["honest_whole"] and summary["receipt_ok"]

    chain = ChainClient(cfg.rpc_url, deployments)
    tid = bytes.fromhex(summary["task_id"][2:])
    deploy_block = chain.deployment.deploy_block
    ev = lambda name: chain.get_logs(deploy_block, chain.block_number(), [name], task_id=tid)  # noqa: E731
    parties = {p["party"]: p for p in summary["parties"]}
    address = lambda party: parties[party]["address"].lower()  # noqa: E731
    run = chain.get_run(tid)
    trainers = [t.lower() for t in chain.trainers_of(tid)]
    assert len(trainers) == 4 + (cheat in ("copycat", "sign flip"))
    claims = {e["args"]["trainer"].lower(): int(e["args"]["reward"]) for e in ev("RewardClaimed")}
    refunds = {e["args"]["account"].lower(): int(e["args"]["stakeRefund"]) for e in ev("PayoutCredited")}
    # the honest trainers: stake back whole and a reward
    honest = [address(f"trainer-{i}") for i in range(4)]
    assert all(parties[f"trainer-{i}"]["kind"] == "honest" for i in range(4))
    assert [refunds.get(t) for t in honest] == [s.stake] * 4
    assert all(claims.get(t, 0) > 0 for t in honest), claims
    # the sponsor: the pool less the syncers' fees is claimable; what the claims leave (under one
    # atto-unit a claim, rounding down) is the sponsor's dust
    (sealed,) = ev("RootRunSealed")
    claimable = int(sealed["args"]["claimable"])
    assert claimable + run.syncer_fees_accrued == s.reward_pool
    dust = claimable - sum(claims.values())
    assert 0 <= dust < len(claims) and run.reward_pool_left == dust == int(parties["sponsor"]["reward"])
    # no trainer is slashed by any cheat; only the wrong aggregate is proven against a syncer
    assert not ev("TrainerSlashed") and not ev("InvalidProven")
    assert sum(refunds.get(t, 0) for t in trainers) == s.stake * len(trainers)
    proofs = ev("RoundProvenWrong")
    if cheat == "wrong aggregate":
        (p,) = proofs
        bond = int(parties["syncer-a"]["stake_in"])
        assert (int(p["args"]["round"]), int(p["args"]["kind"]), int(p["args"]["fragment"])) == (1, 1, 0)
        assert p["args"]["syncer"].lower() == address("syncer-a") and p["args"]["prover"].lower() == address("watcher")
        assert int(p["args"]["slashed"]) == bond == int(parties["syncer-a"]["slashed"])
        assert int(p["args"]["bounty"]) == bond // 10 == int(parties["watcher"]["bounty"])
        assert int(parties["syncer-b"]["slashed"]) == 0 and int(parties["syncer-b"]["reward"]) > 0
    else:
        assert proofs == [] and int(parties["syncer-a"]["slashed"]) == 0 and "syncer-b" not in parties
    if cheat in ("copycat", "sign flip"):
        (cheater,) = [t for t in trainers if t not in honest]
        assert parties["trainer-4"]["kind"] == cheat and address("trainer-4") == cheater
        credits = cumulative_credits(committed_rounds(chain, tid, deploy_block, run.max_rounds),
                                     run.fragment_sizes, len(trainers))
        assert credits[trainers.index(cheater)] == 0 and cheater not in claims and refunds[cheater] == s.stake

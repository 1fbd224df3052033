"""``make demo-adversarial`` (`tenzro_operator.demo_adversarial`), each syncer cheat alone and the
four trainer cheats without a lying syncer (``cheats=[...]``), on a devnet of their own at the
smallest scale that still exercises them: the cheaters' loss and the honest parties' balances read
from the chain's events. All cheats together: test_demo_adversarial.py."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from tenzro_operator.chain import ChainClient, SlashReason
from tenzro_operator.demo_adversarial import ADVERSARIAL, TRAINER_FAULTS, run_adversarial
from tenzro_operator.root_flow import committed_rounds, cumulative_credits

pytestmark = pytest.mark.slow

# the wrong aggregate is committed in round 1, the other cheats cheat in round 0. The trainer
# cheats share a run: each is caught by the syncer's own checks of its payloads (no watcher, no
# proof), and a run each cost 90-140 s on the CI machine.
GROUPS = [("false invalid report",), ("wrong aggregate",),
          ("copycat", "sign flip", "withheld forced payload", "availability loop")]


@pytest.mark.parametrize("cheats", GROUPS, ids=[" + ".join(g) for g in GROUPS])
def test_each_cheat_costs_its_cheater_and_leaves_the_honest_whole(deployed, tmp_path, cheats):
    cfg, deployments = deployed
    s = replace(ADVERSARIAL, rpc=cfg.rpc_url, ipfs=cfg.ipfs_url, deployments=deployments, workdir=tmp_path / "work",
                out=tmp_path / "out", rounds=2 if "wrong aggregate" in cheats else 1, fragments=2, inner_steps=8)
    t0 = time.monotonic()
    summary = run_adversarial(s, cheats=cheats)
    print(f"\n{' + '.join(cheats)}: {time.monotonic() - t0:.0f} s")
    assert summary["caught"] == {cheat: True for cheat in cheats}
    assert summary["tokens_in"] == summary["tokens_out"] and summary["honest_whole"] and summary["receipt_ok"]

    chain = ChainClient(cfg.rpc_url, deployments)
    tid = bytes.fromhex(summary["task_id"][2:])
    deploy_block = chain.deployment.deploy_block
    ev = lambda name: chain.get_logs(deploy_block, chain.block_number(), [name], task_id=tid)  # noqa: E731
    parties = {p["party"]: p for p in summary["parties"]}
    address = lambda party: parties[party]["address"].lower()  # noqa: E731
    run = chain.get_run(tid)
    trainers = [t.lower() for t in chain.trainers_of(tid)]
    cheaters = [c for c in TRAINER_FAULTS if c in cheats]
    assert len(trainers) == 4 + len(cheaters)
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
    # the withholder alone is slashed: each of its payloads, demanded whole, lapsed (reason
    # Unavailable); no other cheat slashes a trainer; only the wrong aggregate is proven against a syncer
    withholder = address(f"trainer-{4 + cheaters.index('withheld forced payload')}") \
        if "withheld forced payload" in cheats else None
    slashes = ev("TrainerSlashed")
    lost = {t: sum(int(e["args"]["amount"]) for e in slashes if e["args"]["trainer"].lower() == t) for t in trainers}
    assert {e["args"]["trainer"].lower() for e in slashes} == ({withholder} if withholder else set())
    assert all(int(e["args"]["reason"]) == SlashReason.UNAVAILABLE for e in slashes)
    assert [(e["args"]["trainer"].lower(), e["args"]["prover"].lower()) for e in ev("InvalidProven")] == [
        (withholder, address("syncer-a"))] * len(slashes)  # expired: the challenger (the syncer) gets the bounty
    if withholder:
        assert sorted((int(e["args"]["round"]), int(e["args"]["fragment"])) for e in slashes) == [
            (r, f) for r in range(run.max_rounds) for f in range(s.fragments)]
    assert all(refunds.get(t, 0) == s.stake - lost[t] for t in trainers)
    proofs = ev("RoundProvenWrong")
    if "wrong aggregate" in cheats:
        (p,) = proofs
        bond = int(parties["syncer-a"]["stake_in"])
        assert (int(p["args"]["round"]), int(p["args"]["kind"]), int(p["args"]["fragment"])) == (1, 1, 0)
        assert p["args"]["syncer"].lower() == address("syncer-a") and p["args"]["prover"].lower() == address("watcher")
        assert int(p["args"]["slashed"]) == bond == int(parties["syncer-a"]["slashed"])
        assert int(p["args"]["bounty"]) == bond // 10 == int(parties["watcher"]["bounty"])
        assert int(parties["syncer-b"]["slashed"]) == 0 and int(parties["syncer-b"]["reward"]) > 0
    else:
        assert proofs == [] and int(parties["syncer-a"]["slashed"]) == 0 and "syncer-b" not in parties
    credits = cumulative_credits(committed_rounds(chain, tid, deploy_block, run.max_rounds),
                                 run.fragment_sizes, len(trainers))
    for i, kind in enumerate(cheaters, start=4):
        cheater = address(f"trainer-{i}")
        assert parties[f"trainer-{i}"]["kind"] == kind and cheater in trainers
        assert (lost[cheater] > 0) == (kind == "withheld forced payload")
        if kind == "availability loop":  # it trains honestly: credited and paid; its loop earned it nothing
            loops = [e for e in ev("AvailabilityChallenged") if e["args"]["trainer"].lower() == cheater]
            assert loops and all(e["args"]["challenger"].lower() == cheater for e in loops)
            assert len({(int(e["args"]["round"]), int(e["args"]["fragment"])) for e in loops}) == s.fragments
            assert len(loops) <= 3 * s.fragments  # the registry's bound of count (and of time)
            assert credits[trainers.index(cheater)] > 0 and claims[cheater] > 0
        else:
            assert credits[trainers.index(cheater)] == 0 and cheater not in claims

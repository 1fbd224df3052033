"""``make demo-adversarial`` (`tenzro_operator.demo_adversarial`) at test scale on a devnet of its
own, every cheat in one run: separate processes for syncer A (a false invalid report, then one wrong
weight), stand-in syncer B, four honest trainers, a copycat, a sign flipper, a trainer that withholds
its forced payloads, a trainer looping availability challenges on its own submissions and a watcher
with a key. Every cheat is caught, the run seals, honest parties lose nothing and tokens balance;
checked against the chain's events as well as the demo's own summary: each cheater's loss, each
honest party's balance, the proof against syncer A and the bounds of the loop."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from tenzro_operator.chain import ChainClient, SlashReason
from tenzro_operator.demo_adversarial import ADVERSARIAL, CHEATS, TRAINER_FAULTS, run_adversarial
from tenzro_operator.root_flow import committed_rounds, cumulative_credits

pytestmark = pytest.mark.slow


def test_every_cheat_is_caught_and_the_run_seals(deployed, tmp_path):
    cfg, deployments = deployed
    s = replace(ADVERSARIAL, rpc=cfg.rpc_url, ipfs=cfg.ipfs_url, deployments=deployments, workdir=tmp_path / "work",
                out=tmp_path / "out", rounds=2, fragments=2, inner_steps=8)
    t0 = time.monotonic()
    summary = run_adversarial(s)
    print(f"\nevery cheat: {time.monotonic() - t0:.0f} s")
    cheats = list(CHEATS)
    assert summary["caught"] == {cheat: True for cheat in cheats}
    assert summary["tokens_in"] == summary["tokens_out"] and summary["honest_whole"] and summary["receipt_ok"]
    assert (tmp_path / "out" / "summary.json").exists()

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
    withholder = address(f"trainer-{4 + cheaters.index('withheld forced payload')}")
    slashes = ev("TrainerSlashed")
    lost = {t: sum(int(e["args"]["amount"]) for e in slashes if e["args"]["trainer"].lower() == t) for t in trainers}
    assert {e["args"]["trainer"].lower() for e in slashes} == {withholder}
    assert all(int(e["args"]["reason"]) == SlashReason.UNAVAILABLE for e in slashes)
    proven = [(e["args"]["trainer"].lower(), e["args"]["prover"].lower()) for e in ev("InvalidProven")]
    assert len(proven) == len(slashes)  # expired: the challenger (a syncer) gets the bounty
    assert all(t == withholder and p in (address("syncer-a"), address("syncer-b")) for t, p in proven), proven
    # each forced payload it withheld is slashed once per opening of its round: round 1 opens again
    # after the proof rewinds it, and the withholder forces (and withholds) again there
    slashed = [(int(e["args"]["round"]), int(e["args"]["fragment"])) for e in slashes]
    assert set(slashed) == {(r, f) for r in range(run.max_rounds) for f in range(s.fragments)}
    assert all(slashed.count((0, f)) == 1 and slashed.count((1, f)) <= 2 for f in range(s.fragments)), slashed
    assert all(refunds.get(t, 0) == s.stake - lost[t] for t in trainers)
    (p,) = ev("RoundProvenWrong")
    bond = int(parties["syncer-a"]["stake_in"])
    assert (int(p["args"]["round"]), int(p["args"]["kind"]), int(p["args"]["fragment"])) == (1, 1, 0)
    assert p["args"]["syncer"].lower() == address("syncer-a") and p["args"]["prover"].lower() == address("watcher")
    assert int(p["args"]["slashed"]) == bond == int(parties["syncer-a"]["slashed"])
    assert int(p["args"]["bounty"]) == bond // 10 == int(parties["watcher"]["bounty"])
    assert int(parties["syncer-b"]["slashed"]) == 0 and int(parties["syncer-b"]["reward"]) > 0
    credits = cumulative_credits(committed_rounds(chain, tid, deploy_block, run.max_rounds),
                                 run.fragment_sizes, len(trainers))
    for i, kind in enumerate(cheaters, start=4):
        cheater = address(f"trainer-{i}")
        assert parties[f"trainer-{i}"]["kind"] == kind and cheater in trainers
        assert (lost[cheater] > 0) == (kind == "withheld forced payload")
        if kind == "availability loop":  # it trains honestly: credited and paid; its loop earned it nothing
            loops = [e for e in ev("AvailabilityChallenged") if e["args"]["trainer"].lower() == cheater]
            assert loops and all(e["args"]["challenger"].lower() == cheater for e in loops)
            looped = {(int(e["args"]["round"]), int(e["args"]["fragment"])) for e in loops}
            assert looped <= {(r, f) for r in range(run.max_rounds) for f in range(s.fragments)}
            assert len(loops) <= 3 * len(looped)  # the registry's bound of count (and of time)
            assert credits[trainers.index(cheater)] > 0 and claims[cheater] > 0
        else:
            assert credits[trainers.index(cheater)] == 0 and cheater not in claims

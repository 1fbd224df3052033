"""ape tests of the syncer fee (TrainingRegistry, protocol v2) and of token conservation.

Each commitRound moves rewardPool * syncerFeeBps / 10000 / maxRounds from the run's pool to
the syncer that committed it (syncerFeeOf); after the seal, claimSyncerFee moves a syncer's
fees of that run to its withdrawable balance. A replaced syncer keeps the fees of the rounds
it committed. Conservation, checked after every transaction of a whole run with an invalid
report, a replacement, the seal and the claims:

    token.balanceOf(registry) == sum over runs (rewardPoolLeft + stakeHeld)
                                 + unclaimed syncer fees + syncer stakes + withdrawable + burned
"""

from __future__ import annotations

import ape
import pytest
from registry_helpers import (
    nan_payload,
    GRACE_S,
    MIN_STAKE,
    MIN_SYNCER_STAKE,
    POOL,
    SYNCER_BOND,
    SYNCER_FEE_BPS,
    SYNCER_TIMEOUT,
    claim_all,
    commit_round,
    force,
    seal_run,
    fee_per_round,
    ledger,
    prove_committed,
    task_id,
)


def events(tx, name):
    return [log for log in tx.events if log.event_name == name]


@pytest.fixture(scope="module")
def everyone(roles):
    return [roles.owner, roles.sponsor, roles.syncer, roles.other_syncer, roles.relayer, roles.stranger,
            *roles.trainers]


@pytest.fixture(scope="module")
def conserved(registry, token, everyone):
    """conserved() -> the ledger terms, after asserting that they add up to the balance."""

    def _check():
        terms = ledger(registry, token, everyone)
        balance = terms.pop("balance")
        assert balance == sum(terms.values()), terms
        return terms

    return _check


def test_fee_accrues_per_round_and_is_claimed_after_seal(registry, token, start_run, full_round, state, roles,
                                                          conserved):
    rounds = 3
    task = start_run("fee-run", m=2, maxRounds=rounds)
    fee = fee_per_round(POOL, SYNCER_FEE_BPS, rounds)
    assert fee > 0 and rounds * fee <= POOL * SYNCER_FEE_BPS // 10_000
    for r in range(rounds):
        full_round(task, r, 2, 2)
        run = registry.getRun(task)
        assert registry.syncerFeeOf(task, roles.syncer) == (r + 1) * fee
        assert run.syncerFeesAccrued == (r + 1) * fee
        assert run.rewardPoolLeft == POOL - (r + 1) * fee
        conserved()
        if r < rounds - 1:
            # not claimable while the run is Training
            before = state(task)
            with ape.reverts(registry.Registry__WrongStatus, taskId=task, have=2):
                registry.claimSyncerFee(task, sender=roles.syncer)
            assert state(task) == before
    before = state(task)
    with ape.reverts(registry.Registry__WrongStatus, taskId=task, have=3):  # Completed, not Sealed
        registry.claimSyncerFee(task, sender=roles.syncer)
    assert state(task) == before

    tx = seal_run(registry, task, roles.stranger)
    # trainers share what the fees left of the pool; the fee is not paid out by the seal
    assert events(tx, "RootRunSealed")[0].claimable == POOL - rounds * fee
    assert registry.syncerFeeOf(task, roles.syncer) == rounds * fee
    conserved()

    w0 = registry.withdrawable(roles.syncer)
    tx = registry.claimSyncerFee(task, sender=roles.syncer)
    (ev,) = events(tx, "SyncerFeeClaimed")
    assert (ev.taskId, ev.syncer, ev.amount) == (task, roles.syncer.address, rounds * fee)
    assert registry.withdrawable(roles.syncer) == w0 + rounds * fee
    assert registry.syncerFeeOf(task, roles.syncer) == 0
    assert registry.getRun(task).syncerFeesAccrued == rounds * fee  # the record of what was earned stays
    conserved()

    # claimed once: a second claim, and a claim by anyone else, find nothing
    for who in (roles.syncer, roles.stranger):
        before = state(task)
        with ape.reverts(registry.Registry__NoSyncerFee, taskId=task, syncer=who.address):
            registry.claimSyncerFee(task, sender=who)
        assert state(task) == before

    bal = token.balanceOf(roles.syncer)
    registry.withdraw(sender=roles.syncer)
    assert token.balanceOf(roles.syncer) - bal == w0 + rounds * fee
    conserved()


def test_claim_for_unknown_task(registry, roles, state):
    t = task_id("no-such-run")
    before = state()
    with ape.reverts(registry.Registry__UnknownTask, taskId=t):
        registry.claimSyncerFee(t, sender=roles.syncer)
    assert state() == before


def test_cancelled_run_pays_no_fee(registry, full_registry, post_task, enroll, roles, state):
    task = post_task("fee-cancel")
    enroll(task, roles.trainers[0])
    full_registry.cancelTask(task, sender=roles.sponsor)
    assert registry.withdrawable(roles.sponsor) == POOL  # no round, no fee: the pool goes back whole
    before = state(task)
    # a Cancelled run's fees are claimable (cancelStalledRun keeps committed rounds' fees): none here
    with ape.reverts(registry.Registry__NoSyncerFee, taskId=task, syncer=roles.syncer):
        registry.claimSyncerFee(task, sender=roles.syncer)
    assert state(task) == before


def test_whole_run_with_replacement_conserves_tokens(registry, full_registry, token, post_task, enroll, elect, sign,
                                                     fund, roles, chain, conserved, everyone):
    """Three rounds, M = 3, K = 1. Round 0: syncer A commits after its deadline with trainer 0
    alone accepted, after proving trainer 1's forced fragment 1 non-finite (slash burned but for
    A's 10 % bounty). Round 1: A goes silent and is replaced by B (A's bond burned). B commits
    rounds 1 and 2. After the seal trainer 0 claims the pool, A claims one round's fee, B two;
    everyone withdraws. The ledger balances
    after every transaction, and at the end the registry holds exactly the syncers' stakes and
    the burned tokens."""
    a, b = roles.syncer, roles.other_syncer
    t0, t1, t2 = roles.trainers[:3]
    rounds = 3
    fee = fee_per_round(POOL, SYNCER_FEE_BPS, rounds)
    conserved()
    task = post_task("conserve", trainerCount=3, quorum=1, maxRounds=rounds)
    conserved()
    for t in (t0, t1, t2):
        enroll(task, t)
        conserved()
    elect(task)  # A is the only candidate
    assert registry.getRun(task).syncer == a.address
    conserved()
    fund(b, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=b)
    conserved()

    # round 0 (A): t1 forces fragment 1 (a NaN, proven invalid by A); t0 delivers off-chain
    nan_signed, opening = nan_payload(sign, t1, task, 0, 1, 2000)
    force(registry, task, t1, 1, nan_signed)
    conserved()
    burned0 = registry.burned()
    prove_committed(full_registry, "proveInvalid", task, 0, 1, t1, 3, nan_signed, opening, sender=a)  # NonFinite
    invalid_slash = MIN_STAKE * 500 // 10_000
    assert registry.burned() - burned0 == invalid_slash - invalid_slash // 10  # A's bounty is 10 %
    conserved()
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0b11, 0, 0], a)  # nobody evicted or slashed for what it did not deliver
    assert registry.syncerFeeOf(task, a) == fee
    conserved()

    # round 1: A is silent; after deadline + timeout anyone replaces it with B
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 1)
    tx = elect(task)
    assert events(tx, "SyncerElected")[0].syncer == b.address
    assert events(tx, "StakeBurned")[0].amount == SYNCER_BOND
    conserved()
    commit_round(registry, task, 1, [0b01, 0, 0], b)
    conserved()
    commit_round(registry, task, 2, [0b11, 0, 0], b)  # quorum met before the deadline
    conserved()
    assert registry.getRun(task).status == 3

    seal_run(registry, task, roles.stranger)
    conserved()
    # t0 earned every credit: the pool minus the three fees (one earner, no dust)
    assert claim_all(registry, task, roles.stranger) == [POOL - rounds * fee, 0, 0]
    conserved()
    # the replaced syncer is paid for the round it committed, the new one for its two
    assert registry.syncerFeeOf(task, a) == fee and registry.syncerFeeOf(task, b) == 2 * fee
    registry.claimSyncerFee(task, sender=a)
    conserved()
    registry.claimSyncerFee(task, sender=b)
    conserved()
    bounty = invalid_slash // 10  # A proved trainer 1's NaN
    assert registry.withdrawable(a) == fee + bounty and registry.withdrawable(b) == 2 * fee

    # every bond is unlocked, A lost exactly its bond
    assert tuple(registry.syncerInfo(a)) == (MIN_SYNCER_STAKE - SYNCER_BOND, 0, True, 0)
    assert tuple(registry.syncerInfo(b)) == (MIN_SYNCER_STAKE, 0, True, 0)
    burned = invalid_slash - bounty + SYNCER_BOND
    assert registry.burned() == burned

    for acct in everyone:
        if registry.withdrawable(acct) > 0:
            registry.withdraw(sender=acct)
            conserved()
    terms = conserved()
    assert terms["runs"] == terms["fees"] == terms["withdrawable"] == 0
    assert token.balanceOf(registry) == (MIN_SYNCER_STAKE - SYNCER_BOND) + MIN_SYNCER_STAKE + burned

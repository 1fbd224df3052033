"""ape tests of the elected syncer's bond and replacement clock (TrainingRegistry, protocol v2).

- The elected syncer locks the run's syncerBond out of its stake until the seal; a candidate
  is drawn only if stake >= minSyncerStake and stake - locked >= bond.
- A syncer is replaceable at max(roundDeadline, syncerElectedAt) + syncerTimeout: one
  elected late (after the round deadline) gets the whole timeout.
- Replacing it burns its bond for that run (stake and lock both drop by the bond, burned()
  grows by it, the token balance of the registry does not move); the rest of its stake stays
  its own.
- Only stake placed before the request's block counts: a candidate that joins or tops up at
  or after it is left out of that draw (nobody stakes after seeing the seed).
- A run whose silent syncer nobody can replace is cancelled by anyone (cancelStalledRun): the
  bond is burned, the trainers' part of the pool for the committed rounds is claimed against the
  last credits root, the rest goes back to the sponsor.

Draws are made deterministic by controlling who is eligible (a single candidate, or the
replaced syncer excluded), never by reading the seed.
"""

from __future__ import annotations

import ape
import pytest
from registry_helpers import E18, POOL, SYNCER_BOND, SYNCER_FEE_BPS, ELECTION_WINDOW_BLOCKS as ELECTION_WINDOW, GRACE_S, MIN_STAKE, MIN_SYNCER_STAKE, SYNCER_TIMEOUT, claim_all, commit_round, fee_per_round, leave_pool, ledger, seal_run

BIG_BOND = 60 * E18  # more than half of MIN_SYNCER_STAKE: one candidate can hold one such run


def events(tx, name):
    return [log for log in tx.events if log.event_name == name]


@pytest.fixture(scope="module")
def one_syncer(registry, fund, roles):
    """`syncer` is the only candidate, with MIN_SYNCER_STAKE."""
    fund(roles.syncer, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.syncer)


@pytest.fixture(scope="module")
def open_run(post_task, enroll, roles):
    """open_run(name, m=2, **over) -> taskId of a posted run whose m = M trainers enrolled
    (round 0 open), no syncer yet."""

    def _open(name: str, m: int = 2, **over) -> bytes:
        over.setdefault("trainerCount", m)
        over.setdefault("quorum", 1)
        task = post_task(name, **over)
        for t in roles.trainers[:m]:
            enroll(task, t)
        return task

    return _open


@pytest.fixture(scope="module")
def accounts_seen(roles):
    return [roles.sponsor, roles.syncer, roles.other_syncer, roles.stranger, roles.relayer, *roles.trainers]


def _balanced(registry, token, accounts):
    terms = ledger(registry, token, accounts)
    return terms.pop("balance") == sum(terms.values())


# ---------------------------------------------------------------- replacement clock


def test_syncer_elected_late_gets_the_whole_timeout(registry, one_syncer, open_run, elect, fund, roles, chain):
    """Elected after round deadline + timeout: not replaceable at once, only after
    electedAt + syncerTimeout."""
    task = open_run("late")
    deadline = registry.getRun(task).roundDeadline
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 100)
    elect(task)
    run = registry.getRun(task)
    elected_at = run.syncerElectedAt
    assert elected_at > deadline + SYNCER_TIMEOUT  # the round's own clock ran out long ago
    assert run.syncerReplaceableAt == elected_at + SYNCER_TIMEOUT

    before = (tuple(registry.getRun(task)), tuple(registry.syncerInfo(roles.syncer)), registry.burned())
    with ape.reverts(registry.Registry__SyncerStillActive, taskId=task, syncer=roles.syncer.address,
                     replaceableAt=elected_at + SYNCER_TIMEOUT):
        registry.requestSyncerElection(task, sender=roles.stranger)
    fund(roles.other_syncer, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.other_syncer)
    chain.mine(deltatime=SYNCER_TIMEOUT - 15)  # still inside the syncer's own timeout
    with ape.reverts(registry.Registry__SyncerStillActive, replaceableAt=elected_at + SYNCER_TIMEOUT):
        registry.requestSyncerElection(task, sender=roles.stranger)
    assert (tuple(registry.getRun(task)), tuple(registry.syncerInfo(roles.syncer)), registry.burned()) == before

    chain.mine(deltatime=16)
    assert chain.blocks.head.timestamp > elected_at + SYNCER_TIMEOUT
    tx = elect(task)
    ev = events(tx, "SyncerElected")[0]
    assert (ev.previous, ev.syncer) == (roles.syncer.address, roles.other_syncer.address)


def test_clock_restarts_with_each_round(registry, one_syncer, open_run, elect, roles, chain):
    """Committing a round opens the next: replaceable at the new deadline + timeout."""
    task = open_run("rounds", maxRounds=3)
    elect(task)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0, 0], roles.syncer)
    run = registry.getRun(task)
    assert run.syncerElectedAt < run.roundDeadline
    assert run.syncerReplaceableAt == run.roundDeadline + SYNCER_TIMEOUT
    assert run.roundDeadline == run.roundOpenedAt + GRACE_S == chain.blocks.head.timestamp + GRACE_S


# ---------------------------------------------------------------- bond


def test_bond_locks_stake_until_the_seal(registry, token, one_syncer, open_run, elect, roles, chain, accounts_seen):
    """A candidate whose unlocked stake is below a run's bond is not drawn; the seal unlocks it."""
    a = open_run("bond-a", m=1, maxRounds=1, syncerBond=BIG_BOND)
    b = open_run("bond-b", m=1, syncerBond=BIG_BOND)
    elect(a)
    assert tuple(registry.syncerInfo(roles.syncer)) == (MIN_SYNCER_STAKE, 1, True, BIG_BOND)
    assert registry.getRun(a).syncerBond == BIG_BOND

    # run b: the only candidate has 40 TNZO unlocked < 60 TNZO bond
    registry.requestSyncerElection(b, sender=roles.stranger)
    before = (tuple(registry.getRun(b)), tuple(registry.syncerInfo(roles.syncer)), token.balanceOf(registry))
    with ape.reverts(registry.Registry__NoSyncerCandidates):
        registry.electSyncer(b, sender=roles.stranger)
    assert (tuple(registry.getRun(b)), tuple(registry.syncerInfo(roles.syncer)), token.balanceOf(registry)) == before
    with ape.reverts(registry.Registry__SyncerBusy, syncer=roles.syncer.address, activeTasks=1):
        registry.unregisterSyncer(sender=roles.syncer)

    # run a ends: the seal unlocks the bond, whole
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, a, 0, [0], roles.syncer)
    seal_run(registry, a, roles.stranger)
    assert tuple(registry.syncerInfo(roles.syncer)) == (MIN_SYNCER_STAKE, 0, True, 0)

    # the pending request of run b (still within 256 blocks) now resolves to the syncer
    tx = registry.electSyncer(b, sender=roles.stranger)
    assert events(tx, "SyncerElected")[0].syncer == roles.syncer.address
    assert tuple(registry.syncerInfo(roles.syncer)) == (MIN_SYNCER_STAKE, 1, True, BIG_BOND)
    assert _balanced(registry, token, accounts_seen)


def test_replacement_burns_the_bond_once(registry, token, one_syncer, open_run, elect, fund, roles, chain,
                                         accounts_seen):
    """The replaced syncer loses exactly its bond for that run (burned, nobody is paid); the
    rest of its stake is its own; below minSyncerStake it is not drawn until it tops up."""
    a = open_run("burn-a", syncerBond=BIG_BOND)
    elect(a)  # the only candidate: syncer
    fund(roles.other_syncer, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.other_syncer)
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 1)
    balance, burned = token.balanceOf(registry), registry.burned()
    tx = elect(a)
    (ev,) = events(tx, "SyncerElected")
    assert (ev.syncer, ev.previous, ev.previousSlashed) == (roles.other_syncer.address, roles.syncer.address, BIG_BOND)
    assert ev.syncerStake == MIN_SYNCER_STAKE
    (burn,) = events(tx, "StakeBurned")
    assert (burn.taskId, burn["from"], burn.amount) == (a, roles.syncer.address, BIG_BOND)
    assert registry.burned() == burned + BIG_BOND
    assert token.balanceOf(registry) == balance
    left = MIN_SYNCER_STAKE - BIG_BOND
    assert tuple(registry.syncerInfo(roles.syncer)) == (left, 0, True, 0)
    assert tuple(registry.syncerInfo(roles.other_syncer)) == (MIN_SYNCER_STAKE, 1, True, BIG_BOND)
    run = registry.getRun(a)
    assert run.syncer == roles.other_syncer.address and run.syncerElectedAt == chain.blocks.head.timestamp
    assert _balanced(registry, token, accounts_seen)

    # run b: syncer is below minSyncerStake (40 < 100), other_syncer has 40 unlocked < 60: nobody
    b = open_run("burn-b", syncerBond=BIG_BOND, maxRounds=1)
    n = registry.requestSyncerElection(b, sender=roles.stranger).block_number
    with ape.reverts(registry.Registry__NoSyncerCandidates):
        registry.electSyncer(b, sender=roles.stranger)
    fund(roles.syncer, BIG_BOND)
    registry.registerSyncer(BIG_BOND, sender=roles.syncer)  # back to 100: eligible in later draws
    # the request of block n expires; a new one counts the top-up
    chain.mine(n + ELECTION_WINDOW - chain.blocks.head.number)
    registry.requestSyncerElection(b, sender=roles.stranger)
    tx = registry.electSyncer(b, sender=roles.stranger)
    assert events(tx, "SyncerElected")[0].syncer == roles.syncer.address
    assert events(tx, "StakeBurned") == []  # run b had no syncer to punish
    assert registry.burned() == burned + BIG_BOND  # burned once, for run a only

    # what is left of a replaced syncer's stake is withdrawable once it is idle
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, b, 0, [0, 0], roles.syncer)
    seal_run(registry, b, roles.stranger)
    leave_pool(registry, chain, roles.syncer)
    assert registry.withdrawable(roles.syncer) == MIN_SYNCER_STAKE  # 40 left + 60 topped up
    assert _balanced(registry, token, accounts_seen)


def test_stake_placed_after_the_request_is_not_drawn(registry, token, one_syncer, open_run, elect, fund, roles,
                                                     chain):
    """Request at block n; the only candidate tops up its unlocked stake to cover the bond at
    n+1 and a newcomer joins at n+2: neither takes part in the draw of block n's request. A
    request made after their stakes counts them."""
    a = open_run("seed-a", m=1, syncerBond=BIG_BOND)
    elect(a)  # syncer: 100 staked, 60 locked, 40 unlocked < 60
    b = open_run("seed-b", m=1, syncerBond=BIG_BOND)
    n = registry.requestSyncerElection(b, sender=roles.stranger).block_number
    fund(roles.syncer, 20 * E18)
    top_up = registry.registerSyncer(20 * E18, sender=roles.syncer)  # 60 unlocked now
    fund(roles.other_syncer, MIN_SYNCER_STAKE)
    joined = registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.other_syncer)
    assert n < top_up.block_number < joined.block_number
    before = (tuple(registry.getRun(b)), [tuple(registry.syncerInfo(x)) for x in (roles.syncer, roles.other_syncer)],
              token.balanceOf(registry), registry.burned())
    with ape.reverts(registry.Registry__NoSyncerCandidates):
        registry.electSyncer(b, sender=roles.stranger)
    assert (tuple(registry.getRun(b)), [tuple(registry.syncerInfo(x)) for x in (roles.syncer, roles.other_syncer)],
            token.balanceOf(registry), registry.burned()) == before
    chain.mine(n + ELECTION_WINDOW - chain.blocks.head.number)  # the request of block n expires
    tx = elect(b)
    assert events(tx, "SyncerElected")[0].syncer in (roles.syncer.address, roles.other_syncer.address)


def test_replaced_syncer_can_no_longer_act(registry, one_syncer, open_run, elect, fund, roles, chain):
    a = open_run("gone", syncerBond=BIG_BOND)
    elect(a)
    fund(roles.other_syncer, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.other_syncer)
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 1)
    elect(a)
    with ape.reverts(registry.Registry__NotSyncer, taskId=a, caller=roles.syncer.address):
        commit_round(registry, a, 0, [0, 0], roles.syncer)
    commit_round(registry, a, 0, [0, 0], roles.other_syncer)
    assert registry.getRun(a).currentRound == 1
    assert registry.trainerMetrics(a, roles.trainers[0]).stake == MIN_STAKE


# ---------------------------------------------------------------- a stalled run


def test_a_stalled_run_is_cancelled_and_claimed_against_the_last_credits_root(registry, token, one_syncer, open_run,
                                                                              elect, roles, chain, accounts_seen):
    """Round 0 is committed (credits 3000 and 1000), then the only candidate goes silent: nobody
    can replace it, so once it is replaceable (and round 0's challenge window is over) anyone
    cancels the run. The syncer's bond is burned (it keeps round 0's fee), the stakes go back
    whole, the trainers' rate for 1 of 2 rounds, floor((pool - 2 fees) / 2), is claimed against
    round 0's credits root, the rest of the pool goes back to the sponsor; tokens are conserved."""
    task = open_run("stalled", maxRounds=2)
    elect(task)
    commit_round(registry, task, 0, [0b11, 0b01], roles.syncer)
    with ape.reverts(registry.Registry__SyncerStillActive):
        registry.cancelStalledRun(task, sender=roles.stranger)
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 1)
    fee = fee_per_round(POOL, SYNCER_FEE_BPS, 2)
    pot = (POOL - 2 * fee) // 2
    burned = registry.burned()
    tx = registry.cancelStalledRun(task, sender=roles.stranger)
    (ev,) = events(tx, "StalledRunCancelled")
    assert (ev.committedRounds, ev.trainersPot, ev.sponsorRefund, ev.syncerBondBurned) == (
        1, pot, POOL - fee - pot, SYNCER_BOND)
    payouts = {e.account: (e.reward, e.stakeRefund) for e in events(tx, "PayoutCredited")}
    assert payouts == {t.address: (0, MIN_STAKE) for t in roles.trainers[:2]}
    assert registry.withdrawable(roles.sponsor) == POOL - fee - pot
    assert registry.burned() - burned == SYNCER_BOND
    assert tuple(registry.syncerInfo(roles.syncer)) == (MIN_SYNCER_STAKE - SYNCER_BOND, 0, True, 0)
    run = registry.getRun(task)
    assert (run.status, run.syncer, run.rewardPoolLeft, run.stakeHeld) == (5, "0x" + "00" * 20, pot, 0)
    assert _balanced(registry, token, accounts_seen)
    assert claim_all(registry, task, roles.stranger) == [pot * 3000 // 4000, pot * 1000 // 4000]
    assert registry.claimSyncerFee(task, sender=roles.syncer).decode_logs(registry.SyncerFeeClaimed)[0].amount == fee
    assert _balanced(registry, token, accounts_seen)

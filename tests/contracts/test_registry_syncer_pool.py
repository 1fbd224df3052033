"""ape tests of TrainingRegistry's syncer candidate pool when it is full (64 candidates).

A newcomer makes the idle candidate with the smallest stake leave if it stakes more than that
candidate; otherwise registerSyncer reverts Registry__SyncerPoolFull. A candidate that is the
syncer of an unsealed run is never displaced. A displaced candidate weighs 0 in elections
requested from then on (SyncerLeaving) and its whole stake becomes withdrawable once the draws
requested before can no longer be resolved (ELECTION_WINDOW_BLOCKS later).

One module-scoped pool (built once, restored before each test by ape's chain isolation):
`syncer` is the syncer of a one-round run and has the smallest stake (MIN_SYNCER_STAKE);
63 generated candidates stake MIN_SYNCER_STAKE + (i + 1) TNZO, i = 0..62; then the election
window of every registration passes.
"""

from __future__ import annotations

from types import SimpleNamespace

import ape
import pytest
from registry_helpers import E18, ELECTION_WINDOW_BLOCKS, GRACE_S, MAX_SYNCER_CANDIDATES, MIN_SYNCER_STAKE, commit_round, ledger, seal_run


def events(tx, name):
    return [log for log in tx.events if log.event_name == name]


@pytest.fixture(scope="module")
def full_pool(registry, accounts, fund, post_task, enroll, elect, roles, chain):
    """The syncer is elected for a running one-round task while it is the only candidate
    (a deterministic draw), then 63 idle candidates fill the pool."""
    fund(roles.syncer, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.syncer)
    task = post_task("busy-run", trainerCount=1, quorum=1, maxRounds=1)
    enroll(task, roles.trainers[0])
    elect(task)
    assert registry.getRun(task).syncer == roles.syncer.address
    idle = []
    for i in range(MAX_SYNCER_CANDIDATES - 1):
        a = accounts.generate_test_account()
        chain.provider.set_balance(a.address, 10 * E18)
        stake = MIN_SYNCER_STAKE + (i + 1) * E18
        fund(a, stake)
        registry.registerSyncer(stake, sender=a)
        idle.append(a)
    assert len(registry.syncerCandidates()) == 64
    chain.mine(ELECTION_WINDOW_BLOCKS + 1)  # no draw requested before a registration is open any more
    return SimpleNamespace(task=task, idle=idle, smallest_idle=idle[0], smallest_idle_stake=MIN_SYNCER_STAKE + E18)


@pytest.fixture(scope="module")
def unchanged_pool(registry, token, full_pool, roles):
    """unchanged_pool(error, call, **args): reverts with `error`, pool and balances as before."""

    def snap():
        everyone = [roles.syncer, roles.other_syncer, *full_pool.idle]
        return (
            list(registry.syncerCandidates()),
            [tuple(registry.syncerInfo(a)) for a in everyone],
            [registry.withdrawable(a) for a in everyone],
            token.balanceOf(registry),
            token.balanceOf(roles.other_syncer),
        )

    def _check(error, call, **args):
        before = snap()
        with ape.reverts(error, **args):
            call()
        assert snap() == before

    return _check


def test_newcomer_without_more_stake_is_refused(registry, full_pool, fund, roles, unchanged_pool):
    """Equal to the smallest idle stake is not enough (it must be more)."""
    newcomer = roles.other_syncer
    fund(newcomer, full_pool.smallest_idle_stake)
    unchanged_pool(registry.Registry__SyncerPoolFull,
                   lambda: registry.registerSyncer(full_pool.smallest_idle_stake, sender=newcomer), max=64)


def test_busy_candidate_is_never_displaced(registry, full_pool, fund, roles, unchanged_pool):
    """The newcomer out-stakes the busy syncer (smallest stake of all) but not the smallest idle
    candidate: refused, the busy syncer stays."""
    newcomer = roles.other_syncer
    stake = MIN_SYNCER_STAKE + E18 // 2  # > the syncer's stake, < the smallest idle stake
    fund(newcomer, stake)
    unchanged_pool(registry.Registry__SyncerPoolFull, lambda: registry.registerSyncer(stake, sender=newcomer), max=64)
    assert roles.syncer.address in registry.syncerCandidates()


def leave_after_window(registry, chain, candidate):
    """The displaced candidate's second unregisterSyncer, once its exit has taken effect."""
    with ape.reverts(registry.Registry__SyncerChangePending):
        registry.unregisterSyncer(sender=candidate)
    chain.mine(ELECTION_WINDOW_BLOCKS + 1)
    return registry.unregisterSyncer(sender=candidate)


def test_newcomer_with_more_stake_displaces_the_smallest_idle(registry, token, full_pool, fund, roles, chain):
    newcomer, victim = roles.other_syncer, full_pool.smallest_idle
    stake = full_pool.smallest_idle_stake + 1
    fund(newcomer, stake)
    balance = token.balanceOf(registry)
    tx = registry.registerSyncer(stake, sender=newcomer)
    (leaving,) = events(tx, "SyncerLeaving")
    assert (leaving.syncer, leaving.fromBlock) == (victim.address, tx.block_number + ELECTION_WINDOW_BLOCKS + 1)
    (joined,) = events(tx, "SyncerRegistered")
    assert (joined.syncer, joined.stake, joined.totalStake) == (newcomer.address, stake, stake)
    cands = list(registry.syncerCandidates())
    # the victim stays listed, weighing only in draws requested before its exit, until the window passes
    assert len(cands) == 65 and newcomer.address in cands and victim.address in cands
    assert roles.syncer.address in cands  # the busy one (smaller stake) stayed
    assert registry.withdrawable(victim) == 0
    (gone,) = events(leave_after_window(registry, chain, victim), "SyncerUnregistered")
    assert (gone.syncer, gone.stakeReleased) == (victim.address, full_pool.smallest_idle_stake)
    assert len(registry.syncerCandidates()) == 64 and victim.address not in registry.syncerCandidates()
    assert tuple(registry.syncerInfo(victim)) == (0, 0, False, 0)
    assert registry.withdrawable(victim) == full_pool.smallest_idle_stake
    assert token.balanceOf(registry) == balance + stake
    # the displaced candidate takes its stake home
    before = token.balanceOf(victim)
    registry.withdraw(sender=victim)
    assert token.balanceOf(victim) - before == full_pool.smallest_idle_stake
    # every token is still accounted for
    terms = ledger(registry, token, [roles.sponsor, roles.syncer, newcomer, victim, roles.trainers[0]])
    assert terms.pop("balance") == sum(terms.values())


def test_idle_again_after_the_seal_then_displaceable(registry, full_pool, fund, roles, chain):
    """Once its run is sealed the syncer is idle and, with the smallest stake, the next to go."""
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, full_pool.task, 0, [0], roles.syncer)
    seal_run(registry, full_pool.task, roles.stranger)
    assert tuple(registry.syncerInfo(roles.syncer)) == (MIN_SYNCER_STAKE, 0, True, 0)
    newcomer = roles.other_syncer
    fund(newcomer, MIN_SYNCER_STAKE + 1)
    tx = registry.registerSyncer(MIN_SYNCER_STAKE + 1, sender=newcomer)
    assert events(tx, "SyncerLeaving")[0].syncer == roles.syncer.address
    leave_after_window(registry, chain, roles.syncer)
    assert registry.withdrawable(roles.syncer) == MIN_SYNCER_STAKE


def test_a_top_up_never_needs_room(registry, full_pool, fund):
    """A registered candidate adds stake to a full pool without displacing anyone."""
    a = full_pool.idle[5]
    before = registry.syncerInfo(a)[0]
    fund(a, 1)
    tx = registry.registerSyncer(1, sender=a)
    assert events(tx, "SyncerUnregistered") == [] and events(tx, "SyncerLeaving") == []
    assert registry.syncerInfo(a)[0] == before + 1 and len(registry.syncerCandidates()) == 64


def test_election_gas_with_a_full_pool(registry, full_pool, post_task, enroll, roles):
    """electSyncer's draw walks the whole pool twice: its cost at the pool's cap (64) bounds the
    cost of every election. Printed for the gas report (run with -s)."""
    task = post_task("draw-64", trainerCount=1, quorum=1)
    enroll(task, roles.trainers[1])
    request = registry.requestSyncerElection(task, sender=roles.stranger)
    tx = registry.electSyncer(task, sender=roles.stranger)
    assert events(tx, "SyncerElected")[0].syncer in registry.syncerCandidates()
    print(f"gas requestSyncerElection: {request.gas_used:,}; electSyncer with 64 candidates: {tx.gas_used:,}")
    assert tx.gas_used < 1_000_000  # well inside a block, whoever is in the pool

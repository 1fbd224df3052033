"""ape tests of TrainingRegistry: every named revert, each checked to leave token balances,
withdrawable balances, the syncer pool (stakes, locked bonds), the burned total, the run
view, every trainer's metrics, the open round's submission bitmaps and the syncers' accrued
fees unchanged (``unchanged`` below).

The reverts of a full syncer pool are in test_registry_syncers.py, those of syncer fees in
test_registry_fees.py (both need a registry of their own).
"""

from __future__ import annotations

import ape
import pytest
from registry_helpers import (
    ELECTION_WINDOW_BLOCKS as ELECTION_WINDOW,
    ENROLL_S,
    GRACE_S,
    MIN_STAKE,
    MIN_SYNCER_FEE_PER_ROUND,
    MIN_SYNCER_STAKE,
    POOL,
    SYNCER_TIMEOUT,
    INITIAL_FRAGMENTS_ROOT,
    OUTER,
    as_tuple,
    commit_round,
    force,
    root_commit,
    seal_run,
    to_reveal_phase,
    deploy_registry,
    inline_contract_type,
    params,
    sha,
    task_id,
)

MAX_ENROLL_S = 30 * 86_400


@pytest.fixture(scope="module")
def unchanged(state):
    """unchanged(tasks, error, call, **error_args): `call()` reverts with `error` (and its
    arguments) and every observable piece of state is as before."""

    def _check(tasks, error, call, **error_args):
        before = state(*tasks)
        with ape.reverts(error, **error_args):
            call()
        assert state(*tasks) == before

    return _check


# ---------------------------------------------------------------- constructor, syncer pool


def test_constructor_zero_token(project, roles):
    with ape.reverts(project.TrainingRegistry.Registry__ZeroAddress):
        roles.owner.deploy(project.TrainingRegistry, "0x" + "00" * 20, MIN_SYNCER_STAKE, SYNCER_TIMEOUT,
                           MIN_SYNCER_FEE_PER_ROUND, roles.owner.deploy(project.RegistryRounds, roles.owner, 0))


def test_constructor_evidence_module_without_code(project, roles, token):
    with ape.reverts(project.TrainingRegistry.Registry__ZeroAddress):
        roles.owner.deploy(project.TrainingRegistry, token, MIN_SYNCER_STAKE, SYNCER_TIMEOUT,
                           MIN_SYNCER_FEE_PER_ROUND, roles.sponsor)


def test_constructor_rounds_module_without_code(project, roles, token):
    with ape.reverts(project.RegistryEvidence.Registry__ZeroAddress):
        roles.owner.deploy(project.RegistryEvidence, token, MIN_SYNCER_FEE_PER_ROUND, roles.sponsor,
                           MIN_SYNCER_STAKE, SYNCER_TIMEOUT)


def test_constructor_modules_of_other_parameters(project, roles, token):
    """A module deployed with other parameters than the contract it is passed to is refused by name
    (its code would run on the registry's storage with its own token, fee, stake or timeout)."""
    rounds = roles.owner.deploy(project.RegistryRounds, token, MIN_SYNCER_FEE_PER_ROUND)
    other_fee = roles.owner.deploy(project.RegistryRounds, token, MIN_SYNCER_FEE_PER_ROUND + 1)
    with ape.reverts(project.RegistryEvidence.Registry__ModuleMismatch, module=other_fee.address):
        roles.owner.deploy(project.RegistryEvidence, token, MIN_SYNCER_FEE_PER_ROUND, other_fee,
                           MIN_SYNCER_STAKE, SYNCER_TIMEOUT)
    lax = roles.owner.deploy(project.RegistryEvidence, token, MIN_SYNCER_FEE_PER_ROUND, rounds,
                             MIN_SYNCER_STAKE - 1, SYNCER_TIMEOUT)
    with ape.reverts(project.TrainingRegistry.Registry__ModuleMismatch, module=lax.address):
        roles.owner.deploy(project.TrainingRegistry, token, MIN_SYNCER_STAKE, SYNCER_TIMEOUT,
                           MIN_SYNCER_FEE_PER_ROUND, lax)
    with ape.reverts(project.TrainingRegistry.Registry__ModuleMismatch, module=rounds.address):
        roles.owner.deploy(project.TrainingRegistry, token, MIN_SYNCER_STAKE, SYNCER_TIMEOUT,
                           MIN_SYNCER_FEE_PER_ROUND, rounds)  # not an evidence module


def test_register_zero_amount(registry, roles, unchanged):
    unchanged([], registry.Registry__ZeroAmount, lambda: registry.registerSyncer(0, sender=roles.other_syncer))


def test_first_registration_below_min_syncer_stake(registry, fund, roles, unchanged):
    """A first registration needs minSyncerStake; a candidate may then top up by any amount."""
    s = roles.other_syncer
    fund(s, MIN_SYNCER_STAKE)
    unchanged([], registry.Registry__SyncerStakeTooLow,
              lambda: registry.registerSyncer(MIN_SYNCER_STAKE - 1, sender=s),
              stake=MIN_SYNCER_STAKE - 1, minStake=MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=s)
    fund(s, 1)
    registry.registerSyncer(1, sender=s)  # a top-up below the minimum is fine
    assert tuple(registry.syncerInfo(s)) == (MIN_SYNCER_STAKE + 1, 0, True, 0)


def test_unregister_not_candidate(registry, roles, unchanged):
    unchanged([], registry.Registry__NotSyncerCandidate,
              lambda: registry.unregisterSyncer(sender=roles.stranger), account=roles.stranger.address)


def test_unregister_busy(registry, start_run, roles, unchanged):
    task = start_run("busy")
    unchanged([task], registry.Registry__SyncerBusy,
              lambda: registry.unregisterSyncer(sender=roles.syncer), syncer=roles.syncer.address, activeTasks=1)


# ---------------------------------------------------------------- postTask


BAD_PARAMS = [
    ("Registry__ZeroTaskId", dict(taskId=b"\x00" * 32), {}),
    ("Registry__ZeroTrainers", dict(trainerCount=0, quorum=0), {}),
    ("Registry__TooManyTrainers", dict(trainerCount=257, quorum=1), dict(m=257, max=256)),
    ("Registry__ZeroQuorum", dict(quorum=0), {}),
    ("Registry__QuorumExceedsTrainers", dict(trainerCount=3, quorum=4), dict(k=4, m=3)),
    ("Registry__ZeroFragments", dict(fragmentCount=0, fragmentSizes=[]), {}),
    ("Registry__TooManyFragments", dict(fragmentCount=129, fragmentSizes=[1] * 129), dict(f=129, max=128)),
    ("Registry__FragmentSizesLength", dict(fragmentCount=2, fragmentSizes=[1]), dict(given=1, f=2)),
    ("Registry__ZeroFragmentSize", dict(fragmentSizes=[5, 0]), dict(fragment=1)),
    ("Registry__ZeroMaxRounds", dict(maxRounds=0), {}),
    ("Registry__TooManyRounds", dict(maxRounds=1025), dict(maxRounds=1025, max=1024)),
    ("Registry__ZeroInnerSteps", dict(innerSteps=0), {}),
    ("Registry__ZeroGraceWindow", dict(graceWindowMs=0), {}),
    ("Registry__GraceWindowTooLong", dict(graceWindowMs=30 * 86_400_000 + 1),
     dict(graceWindowMs=30 * 86_400_000 + 1, maxMs=30 * 86_400_000)),
    ("Registry__UnsupportedTier", dict(tier=2), dict(tier=2)),  # 0 Open, 1 Allowlist
    ("Registry__UnknownAggregation", dict(aggregation=4), dict(rule=4)),
    ("Registry__ZeroMinStake", dict(minStake=0), {}),
    # v2: Krum cannot be refereed coordinate by coordinate, so no Open-tier task may use it
    ("Registry__RuleNotProvable", dict(aggregation=3), dict(rule=3, tier=0)),
    # v2: M * F bounded by MAX_SUBMISSION_SLOTS = 2048 (256 x 8 fits, 256 x 9 does not)
    ("Registry__ShapeTooLarge", dict(trainerCount=256, quorum=1, fragmentCount=9, fragmentSizes=[1] * 9),
     dict(m=256, f=9, maxSlots=2048)),
    ("Registry__BadEnrollmentWindow", dict(enrollmentSeconds=0), dict(seconds_=0, max=MAX_ENROLL_S)),
    ("Registry__BadEnrollmentWindow", dict(enrollmentSeconds=MAX_ENROLL_S + 1),
     dict(seconds_=MAX_ENROLL_S + 1, max=MAX_ENROLL_S)),
    ("Registry__SyncerFeeTooHigh", dict(syncerFeeBps=2001), dict(bps=2001, max=2000)),
    ("Registry__ZeroSyncerBond", dict(syncerBond=0), {}),
    # fee per round = pool * bps / 10000 / rounds must reach minSyncerFeePerRound (1e15 here)
    ("Registry__SyncerFeeTooLow", dict(rewardPool=0), dict(perRound=0, minPerRound=MIN_SYNCER_FEE_PER_ROUND)),
    ("Registry__SyncerFeeTooLow", dict(syncerFeeBps=0), dict(perRound=0, minPerRound=MIN_SYNCER_FEE_PER_ROUND)),
    # 100 bps, 2 rounds: floor(pool / 200) = 1e15 - 1, one atto-unit short
    ("Registry__SyncerFeeTooLow", dict(rewardPool=200 * (MIN_SYNCER_FEE_PER_ROUND - 1) + 199),
     dict(perRound=MIN_SYNCER_FEE_PER_ROUND - 1, minPerRound=MIN_SYNCER_FEE_PER_ROUND)),
]


@pytest.mark.parametrize("error,over,args", BAD_PARAMS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD_PARAMS)])
def test_post_task_inconsistent_spec(registry, fund, roles, unchanged, error, over, args):
    p = params("bad", **over)
    fund(roles.sponsor, POOL)
    unchanged([], getattr(registry, error), lambda: registry.postTask(as_tuple(p), sender=roles.sponsor), **args)
    assert registry.listRuns(0, 10)[1] == 0


def test_post_task_shape_and_fee_limits_are_inclusive(registry, fund, roles):
    """The accepted edges of the v2 limits: M * F = 2048, a 30-day enrollment window, a 20 %
    fee, and a pool whose fee per round is exactly minSyncerFeePerRound."""
    fund(roles.sponsor, 4 * POOL)
    edges = [
        ("edge-shape", dict(trainerCount=256, quorum=1, fragmentCount=8, fragmentSizes=[1] * 8)),
        ("edge-window", dict(enrollmentSeconds=MAX_ENROLL_S)),
        ("edge-fee", dict(syncerFeeBps=2000)),
        ("edge-pool", dict(rewardPool=200 * MIN_SYNCER_FEE_PER_ROUND)),
    ]
    for name, over in edges:
        registry.postTask(as_tuple(params(name, **over)), sender=roles.sponsor)
        assert registry.getRun(task_id(name)).status == 1, name


def test_min_fee_zero_admits_a_task_without_pool(project, token, roles):
    """With minSyncerFeePerRound = 0 (a registry choice), a task may offer no pool and no fee."""
    reg = deploy_registry(project, roles.owner, token, min_syncer_fee_per_round=0)
    reg.postTask(as_tuple(params("free", rewardPool=0, syncerFeeBps=0)), sender=roles.sponsor)
    assert reg.getRun(task_id("free")).rewardPool == 0


def test_post_task_id_reused(registry, post_task, fund, roles, unchanged):
    task = post_task("dup")
    p = params("dup")
    fund(roles.stranger, POOL)
    unchanged([task], registry.Registry__TaskExists,
              lambda: registry.postTask(as_tuple(p), sender=roles.stranger), taskId=task)


def test_post_task_without_allowance(registry, roles, unchanged, token):
    p = params("noallow")
    token.mint(roles.stranger, POOL, sender=roles.owner)
    token.approve(registry, 0, sender=roles.stranger)
    unchanged([], None, lambda: registry.postTask(as_tuple(p), sender=roles.stranger))


def test_post_task_fee_on_transfer_shortfall(mocks, roles, chain):
    """A fee-on-transfer token delivers less than the pool: the post reverts, nothing kept."""
    tok = roles.owner.deploy(mocks("FeeOnTransferToken"), 100)  # 1 % fee
    reg = deploy_registry(ape.project, roles.owner, tok)
    tok.mint(roles.sponsor, POOL, sender=roles.owner)
    tok.approve(reg, POOL, sender=roles.sponsor)
    with ape.reverts(reg.Registry__TransferShortfall, expected=POOL, received=POOL - POOL // 100):
        reg.postTask(as_tuple(params("fee")), sender=roles.sponsor)
    assert tok.balanceOf(roles.sponsor) == POOL and tok.balanceOf(reg) == 0
    assert reg.listRuns(0, 10)[1] == 0


def test_post_task_false_returning_token(mocks, roles):
    """A token that returns false instead of reverting: SafeERC20 turns it into a revert."""
    tok = roles.owner.deploy(mocks("FalseReturnToken"))
    reg = deploy_registry(ape.project, roles.owner, tok)
    tok.mint(roles.sponsor, POOL, sender=roles.owner)
    tok.approve(reg, POOL, sender=roles.sponsor)
    tok.setRefuseAll(True, sender=roles.owner)
    with ape.reverts():
        reg.postTask(as_tuple(params("false")), sender=roles.sponsor)
    assert tok.balanceOf(roles.sponsor) == POOL and reg.listRuns(0, 10)[1] == 0


# ---------------------------------------------------------------- election


def test_unknown_task(registry, roles, unchanged):
    t = task_id("nope")
    unchanged([], registry.Registry__UnknownTask,
              lambda: registry.requestSyncerElection(t, sender=roles.stranger), taskId=t)
    unchanged([], registry.Registry__UnknownTask, lambda: registry.electSyncer(t, sender=roles.stranger), taskId=t)
    with ape.reverts(registry.Registry__UnknownTask):
        registry.getRun(t)


@pytest.fixture
def training(registry, post_task, enroll, syncer_pool, roles):
    """A Training run (M = 3 enrolled: round 0 open) without a syncer yet."""
    task = post_task("training", trainerCount=3, quorum=2)
    for t in roles.trainers[:3]:
        enroll(task, t)
    return task


def test_no_election_while_enrolling(registry, post_task, enroll, syncer_pool, roles, unchanged):
    """v2: a syncer is elected only for a Training run (round 0 open)."""
    task = post_task("enrolling-elect", trainerCount=3, quorum=2)
    enroll(task, roles.trainers[0])
    enroll(task, roles.trainers[1])
    unchanged([task], registry.Registry__WrongStatus,
              lambda: registry.requestSyncerElection(task, sender=roles.stranger), taskId=task, have=1)
    unchanged([task], registry.Registry__WrongStatus,
              lambda: registry.electSyncer(task, sender=roles.stranger), taskId=task, have=1)


def test_elect_without_request(registry, training, roles, unchanged):
    unchanged([training], registry.Registry__NoElectionRequested,
              lambda: registry.electSyncer(training, sender=roles.stranger), taskId=training)


def test_request_while_a_request_is_pending(registry, training, roles, unchanged, chain):
    """A second request is refused while the first can still be resolved (256 blocks); one
    block later it is allowed again and replaces the stale one."""
    n = registry.requestSyncerElection(training, sender=roles.stranger).block_number
    unchanged([training], registry.Registry__ElectionPending,
              lambda: registry.requestSyncerElection(training, sender=roles.relayer), taskId=training, requestBlock=n)
    chain.mine(n + ELECTION_WINDOW - 1 - chain.blocks.head.number)  # the next transaction lands in n + 256
    unchanged([training], registry.Registry__ElectionPending,
              lambda: registry.requestSyncerElection(training, sender=roles.relayer), taskId=training, requestBlock=n)
    # (a reverted transaction is mined too: count from the head)
    chain.mine(n + ELECTION_WINDOW - chain.blocks.head.number)  # the next lands in n + 257: expired
    tx = registry.requestSyncerElection(training, sender=roles.relayer)
    assert tx.block_number == n + ELECTION_WINDOW + 1
    assert registry.getRun(training).electionBlock == tx.block_number


SAME_BLOCK_ELECTOR = """// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;
interface IRegistry {
    function requestSyncerElection(bytes32 taskId) external;
    function electSyncer(bytes32 taskId) external returns (address);
}
/// Requests and elects in one transaction, i.e. in the block of the request.
contract SameBlockElector {
    function requestAndElect(IRegistry registry, bytes32 taskId) external {
        registry.requestSyncerElection(taskId);
        registry.electSyncer(taskId); // its revert data bubbles up unchanged
    }
}
"""


def test_elect_in_the_block_of_the_request(registry, training, roles, unchanged, chain):
    """blockhash(n) is unknown inside block n: an election in the request's block is refused,
    and the request made in the same transaction is undone with it."""
    elector = roles.owner.deploy(ape.contracts.ContractContainer(inline_contract_type(SAME_BLOCK_ELECTOR,
                                                                                      "SameBlockElector")))
    unchanged([training], registry.Registry__ElectionNotReady,
              lambda: elector.requestAndElect(registry, training, sender=roles.stranger),
              taskId=training, requestBlock=chain.blocks.head.number + 1)
    assert registry.getRun(training).electionBlock == 0


def test_elect_after_the_election_window(registry, training, roles, unchanged, chain):
    """electSyncer works up to 256 blocks after the request (blockhash is still known), not after."""
    n = registry.requestSyncerElection(training, sender=roles.stranger).block_number
    chain.mine(n + ELECTION_WINDOW - chain.blocks.head.number)  # the next transaction lands in n + 257
    unchanged([training], registry.Registry__ElectionExpired,
              lambda: registry.electSyncer(training, sender=roles.stranger), taskId=training, requestBlock=n)
    # a fresh request is allowed (the old one can no longer be resolved) and resolves a block later
    registry.requestSyncerElection(training, sender=roles.stranger)
    assert registry.electSyncer(training, sender=roles.stranger).events[-1].syncer == roles.syncer.address


def test_elect_at_the_last_block_of_the_window(registry, training, roles, chain):
    n = registry.requestSyncerElection(training, sender=roles.stranger).block_number
    chain.mine(n + ELECTION_WINDOW - 1 - chain.blocks.head.number)  # the next transaction lands in n + 256
    tx = registry.electSyncer(training, sender=roles.stranger)
    assert tx.block_number == n + ELECTION_WINDOW
    assert registry.getRun(training).syncer == roles.syncer.address


def test_elect_without_candidates(project, token, roles):
    """A registry without syncer candidates (and minSyncerFeePerRound = 0: this test is about
    the draw, not the fee) refuses the election; the run keeps no syncer."""
    reg = deploy_registry(project, roles.owner, token, min_syncer_fee_per_round=0)
    p = params("nocand", rewardPool=0, syncerFeeBps=0, trainerCount=1, quorum=1)
    reg.postTask(as_tuple(p), sender=roles.sponsor)
    reg.useRootFlow(p["taskId"], INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.sponsor)
    t = roles.trainers[0]
    token.mint(t, MIN_STAKE, sender=roles.owner)
    token.approve(reg, MIN_STAKE, sender=t)
    reg.enrollTrainer(p["taskId"], MIN_STAKE, "did:x", sender=t)
    reg.requestSyncerElection(p["taskId"], sender=roles.stranger)
    with ape.reverts(reg.Registry__NoSyncerCandidates):
        reg.electSyncer(p["taskId"], sender=roles.stranger)
    assert int(reg.getRun(p["taskId"]).syncer, 16) == 0


def test_elect_while_syncer_active(registry, start_run, roles, unchanged, chain):
    task = start_run("active")
    run = registry.getRun(task)
    # elected right after round 0 opened: the clock runs from the round deadline
    assert run.syncerElectedAt < run.roundDeadline
    replaceable_at = run.roundDeadline + SYNCER_TIMEOUT
    assert run.syncerReplaceableAt == replaceable_at
    unchanged([task], registry.Registry__SyncerStillActive,
              lambda: registry.requestSyncerElection(task, sender=roles.stranger),
              taskId=task, syncer=roles.syncer.address, replaceableAt=replaceable_at)
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT - 40)  # not yet past the timeout
    unchanged([task], registry.Registry__SyncerStillActive,
              lambda: registry.requestSyncerElection(task, sender=roles.stranger))


def test_elect_rechecks_replaceability(registry, start_run, roles, unchanged, chain):
    """The syncer commits between the request and the election: it is active again (a new
    round, a new deadline), so electSyncer refuses to replace it."""
    task = start_run("comeback", m=2, quorum=1)
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 1)
    registry.requestSyncerElection(task, sender=roles.stranger)
    commit_round(registry, task, 0, [0, 0], roles.syncer)
    run = registry.getRun(task)
    assert run.currentRound == 1
    unchanged([task], registry.Registry__SyncerStillActive,
              lambda: registry.electSyncer(task, sender=roles.stranger),
              taskId=task, syncer=roles.syncer.address, replaceableAt=run.roundDeadline + SYNCER_TIMEOUT)


def test_replacement_needs_another_candidate(registry, start_run, roles, unchanged, chain):
    task = start_run("alone")
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 1)
    registry.requestSyncerElection(task, sender=roles.stranger)
    unchanged([task], registry.Registry__NoSyncerCandidates, lambda: registry.electSyncer(task, sender=roles.stranger))


def test_elect_after_completion(registry, start_run, roles, unchanged, chain):
    task = start_run("done", m=1, quorum=1, maxRounds=1)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0], roles.syncer)
    unchanged([task], registry.Registry__WrongStatus,
              lambda: registry.requestSyncerElection(task, sender=roles.stranger), taskId=task, have=3)
    unchanged([task], registry.Registry__WrongStatus, lambda: registry.electSyncer(task, sender=roles.stranger),
              taskId=task, have=3)


# ---------------------------------------------------------------- enrollment


@pytest.fixture
def enrolling(registry, post_task, syncer_pool, roles):
    return post_task("enr", trainerCount=3, quorum=2)


def test_enroll_stake_too_low(registry, enrolling, fund, roles, unchanged):
    t = roles.trainers[0]
    fund(t, MIN_STAKE)
    unchanged([enrolling], registry.Registry__StakeTooLow,
              lambda: registry.enrollTrainer(enrolling, MIN_STAKE - 1, "did:x", sender=t),
              stake=MIN_STAKE - 1, minStake=MIN_STAKE)


def test_enroll_empty_did(registry, enrolling, fund, roles, unchanged):
    t = roles.trainers[0]
    fund(t, MIN_STAKE)
    unchanged([enrolling], registry.Registry__EmptyDid, lambda: registry.enrollTrainer(enrolling, MIN_STAKE, "", sender=t))


def test_enroll_twice(registry, enrolling, enroll, fund, roles, unchanged):
    t = roles.trainers[0]
    enroll(enrolling, t)
    fund(t, MIN_STAKE)
    unchanged([enrolling], registry.Registry__AlreadyEnrolled,
              lambda: registry.enrollTrainer(enrolling, MIN_STAKE, "did:x", sender=t), taskId=enrolling, trainer=t.address)


def test_enroll_full(registry, enrolling, enroll, fund, roles, unchanged):
    for t in roles.trainers[:3]:
        enroll(enrolling, t)
    t = roles.trainers[3]
    fund(t, MIN_STAKE)
    unchanged([enrolling], registry.Registry__EnrollmentFull,
              lambda: registry.enrollTrainer(enrolling, MIN_STAKE, "did:x", sender=t), taskId=enrolling, m=3)


def test_enroll_after_enrollment_closed(registry, enrolling, enroll, fund, roles, unchanged, chain):
    enroll(enrolling, roles.trainers[0])
    enroll(enrolling, roles.trainers[1])
    chain.mine(deltatime=ENROLL_S + 1)
    registry.closeEnrollment(enrolling, sender=roles.stranger)
    t = roles.trainers[2]
    fund(t, MIN_STAKE)
    unchanged([enrolling], registry.Registry__WrongStatus,
              lambda: registry.enrollTrainer(enrolling, MIN_STAKE, "did:x", sender=t), taskId=enrolling, have=2)


def test_enroll_after_the_enrollment_deadline(registry, enrolling, enroll, fund, roles, unchanged, chain):
    """Still Enrolling (nobody closed it), but the window is over: no more trainers."""
    enroll(enrolling, roles.trainers[0])
    deadline = registry.getRun(enrolling).enrollmentDeadline
    chain.mine(deltatime=ENROLL_S + 1)
    t = roles.trainers[1]
    fund(t, MIN_STAKE)
    unchanged([enrolling], registry.Registry__EnrollmentClosed,
              lambda: registry.enrollTrainer(enrolling, MIN_STAKE, "did:x", sender=t),
              taskId=enrolling, deadline=deadline)


def test_enroll_without_tokens(registry, enrolling, fund, roles, unchanged, token):
    t = roles.trainers[5]
    fund(t, 0)
    bal = token.balanceOf(t)
    unchanged([enrolling], None, lambda: registry.enrollTrainer(enrolling, bal + MIN_STAKE, "did:x", sender=t))


def test_enroll_before_the_root_flow(registry, post_task, fund, roles, unchanged):
    """Nobody stakes on a run whose sponsor has not committed its initial fragments root and outer
    rule (useRootFlow): every run that trains commits its rounds by root."""
    task = post_task("noroot", root=False)
    t = roles.trainers[0]
    fund(t, MIN_STAKE)
    unchanged([task], registry.Registry__NotRootFlow,
              lambda: registry.enrollTrainer(task, MIN_STAKE, "did:x", sender=t), taskId=task)
    registry.useRootFlow(task, INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.sponsor)
    registry.enrollTrainer(task, MIN_STAKE, "did:x", sender=t)
    assert registry.getRun(task).enrolledCount == 1


def test_use_root_flow_reverts(registry, post_task, start_run, roles, unchanged):
    """useRootFlow: the sponsor's only, an outer rule the proofs can referee, once, while Enrolling."""
    task = post_task("root-rules", root=False)
    unchanged([task], registry.Registry__NotSponsor,
              lambda: registry.useRootFlow(task, INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.stranger),
              taskId=task, caller=roles.stranger.address)
    half = (*OUTER[:3], 5_000)  # a trim of half the submissions leaves nothing to average
    unchanged([task], registry.Registry__OuterRuleNotProvable,
              lambda: registry.useRootFlow(task, INITIAL_FRAGMENTS_ROOT, half, sender=roles.sponsor),
              rule=1, alphaBps=5_000)
    registry.useRootFlow(task, INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.sponsor)
    unchanged([task], registry.Registry__RootFlowLocked,
              lambda: registry.useRootFlow(task, sha("another root"), OUTER, sender=roles.sponsor), taskId=task)
    training = start_run("root-late", m=1, quorum=1)
    unchanged([training], registry.Registry__WrongStatus,
              lambda: registry.useRootFlow(training, INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.sponsor),
              taskId=training, have=2)


def test_close_enrollment_before_the_deadline(registry, enrolling, enroll, roles, unchanged):
    """v2: nobody, not even the sponsor, shortens the enrollment window (K are enrolled)."""
    enroll(enrolling, roles.trainers[0])
    enroll(enrolling, roles.trainers[1])
    deadline = registry.getRun(enrolling).enrollmentDeadline
    for who in (roles.stranger, roles.sponsor):
        unchanged([enrolling], registry.Registry__EnrollmentStillOpen,
                  lambda: registry.closeEnrollment(enrolling, sender=who), taskId=enrolling, deadline=deadline)


def test_close_enrollment_below_quorum(registry, enrolling, enroll, roles, unchanged, chain):
    enroll(enrolling, roles.trainers[0])
    chain.mine(deltatime=ENROLL_S + 1)
    unchanged([enrolling], registry.Registry__NotEnoughEnrolled,
              lambda: registry.closeEnrollment(enrolling, sender=roles.stranger), enrolled=1, quorum=2)


def test_cancel_not_sponsor(registry, full_registry, enrolling, roles, unchanged):
    unchanged([enrolling], registry.Registry__NotSponsor,
              lambda: full_registry.cancelTask(enrolling, sender=roles.stranger), taskId=enrolling,
              caller=roles.stranger.address)


def test_cancel_by_anyone_when_the_run_can_train(registry, full_registry, enrolling, enroll, roles, unchanged, chain):
    """After the deadline with >= K enrolled the run can start (closeEnrollment): a stranger
    may not cancel it; the sponsor still may while it is Enrolling."""
    enroll(enrolling, roles.trainers[0])
    enroll(enrolling, roles.trainers[1])
    chain.mine(deltatime=ENROLL_S + 1)
    unchanged([enrolling], registry.Registry__RunCanTrain,
              lambda: full_registry.cancelTask(enrolling, sender=roles.stranger), taskId=enrolling, enrolled=2, quorum=2)
    full_registry.cancelTask(enrolling, sender=roles.sponsor)
    assert registry.getRun(enrolling).status == 5


def test_cancel_after_start(registry, full_registry, start_run, roles, unchanged):
    task = start_run("nocancel")
    unchanged([task], registry.Registry__WrongStatus, lambda: full_registry.cancelTask(task, sender=roles.sponsor),
              taskId=task, have=2)


# ---------------------------------------------------------------- submissions


@pytest.fixture
def running(start_run):
    return start_run("run", m=3, quorum=2, maxRounds=3)


def _payload(rnd, frag, cid="bafkreic", ph=None) -> tuple:
    return (sha(f"root:{rnd}:{frag}:{cid}"), 0x3F800000, cid, ph or sha(f"p:{rnd}:{frag}"))


def _sub(registry, sign, roles, task, trainer, rnd, frag, cid="bafkreic", ph=None, sig=None, sender=None):
    payload = _payload(rnd, frag, cid, ph)
    signed = payload + (sig,) if sig is not None else sign(trainer, task, rnd, frag, payload)
    return lambda: registry.submitOuterGradient(task, rnd, frag, signed, sender=sender or roles.relayer)


def test_submit_while_enrolling(registry, enrolling, sign, roles, unchanged):
    unchanged([enrolling], registry.Registry__WrongStatus,
              _sub(registry, sign, roles, enrolling, roles.trainers[0], 0, 0), taskId=enrolling, have=1)


def test_submit_wrong_round(registry, running, sign, roles, unchanged):
    unchanged([running], registry.Registry__WrongRound, _sub(registry, sign, roles, running, roles.trainers[0], 1, 0),
              taskId=running, given=1, open=0)


def test_submit_after_deadline(registry, running, sign, roles, unchanged, chain):
    deadline = registry.getRun(running).roundDeadline
    chain.mine(deltatime=GRACE_S + 1)
    unchanged([running], registry.Registry__DeadlinePassed,
              _sub(registry, sign, roles, running, roles.trainers[0], 0, 0), taskId=running, round=0, deadline=deadline)


def test_submit_bad_fragment(registry, running, sign, roles, unchanged):
    unchanged([running], registry.Registry__BadFragment, _sub(registry, sign, roles, running, roles.trainers[0], 0, 2),
              fragment=2, fragmentCount=2)


def test_submit_malformed_signature(registry, running, sign, roles, unchanged):
    to_reveal_phase(registry, running)
    unchanged([running], registry.Registry__InvalidSignature,
              _sub(registry, sign, roles, running, roles.trainers[0], 0, 0, sig=b"\x01" * 64))


def test_submit_signed_by_stranger(registry, running, sign, roles, unchanged):
    to_reveal_phase(registry, running)
    unchanged([running], registry.Registry__NotEnrolled, _sub(registry, sign, roles, running, roles.stranger, 0, 0),
              taskId=running, trainer=roles.stranger.address)


def test_submit_signature_over_other_fields(registry, running, sign, roles, unchanged):
    """A valid signature over another payload hash recovers another address: not enrolled."""
    t = roles.trainers[0]
    sig = sign(t, running, 0, 0, _payload(0, 0, ph=sha("other")))[4]
    to_reveal_phase(registry, running)
    unchanged([running], registry.Registry__NotEnrolled,
              _sub(registry, sign, roles, running, t, 0, 0, sig=sig))


def test_submit_uncommitted(registry, running, sign, roles, unchanged):
    """A reveal needs the commit phase to be over and the trainer's commitment of this opening."""
    t = roles.trainers[0]
    unchanged([running], registry.Registry__CommitPhaseOpen, _sub(registry, sign, roles, running, t, 0, 0))
    to_reveal_phase(registry, running)
    unchanged([running], registry.Registry__NotCommitted, _sub(registry, sign, roles, running, t, 0, 0),
              taskId=running, round=0, fragment=0, trainer=t.address)


def test_submit_duplicate(registry, running, sign, roles, unchanged):
    t = roles.trainers[0]
    force(registry, running, t, 0, sign(t, running, 0, 0, _payload(0, 0)))
    unchanged([running], registry.Registry__DuplicateSubmission,
              _sub(registry, sign, roles, running, t, 0, 0, cid="bafkreiother"),
              taskId=running, round=0, fragment=0, trainer=t.address)


# ---------------------------------------------------------------- proveInvalid (PROTOCOL.md §4)


def _no_opening():
    return (0, b"\x00" * 64, [], [])


def _prove(evidence, sign, roles, task, trainer, rnd, frag, reason, payload=None, signed=None, opening=None,
           sender=None):
    signed = signed or sign(trainer, task, rnd, frag, payload or _payload(rnd, frag))
    return lambda: evidence.proveInvalid(task, rnd, frag, trainer, reason, signed, opening or _no_opening(),
                                         sender=sender or roles.stranger)


@pytest.mark.parametrize("reason", [0, 1, 4, 5, 6])
def test_prove_unknown_reason(registry, evidence, running, sign, roles, unchanged, reason):
    """Only NonFinite (3) and Malformed (2) are proven here: a norm outlier (4) against the
    previous round's accepted sums (proveNormOutlier), unavailability by its challenge; missed
    rounds are not slashed, and HashMismatch is not provable on-chain."""
    t = roles.trainers[0]
    signed = sign(t, running, 0, 0, _payload(0, 0))
    force(registry, running, t, 0, signed)
    unchanged([running], registry.Registry__UnknownReason,
              _prove(evidence, sign, roles, running, t, 0, 0, reason, signed=signed), reason=reason)


def test_prove_no_submission(registry, evidence, running, sign, roles, unchanged):
    t = roles.trainers[0]
    unchanged([running], registry.Registry__NoSuchSubmission, _prove(evidence, sign, roles, running, t, 0, 1, 3),
              taskId=running, round=0, fragment=1, trainer=t.address)


def test_prove_not_enrolled(registry, evidence, running, sign, roles, unchanged):
    unchanged([running], registry.Registry__NotEnrolled,
              _prove(evidence, sign, roles, running, roles.stranger, 0, 0, 3),
              taskId=running, trainer=roles.stranger.address)


def test_prove_wrong_round_and_fragment(registry, evidence, running, sign, roles, unchanged):
    t = roles.trainers[0]
    unchanged([running], registry.Registry__WrongRound, _prove(evidence, sign, roles, running, t, 1, 0, 3))
    unchanged([running], registry.Registry__BadFragment, _prove(evidence, sign, roles, running, t, 0, 9, 3))


def test_prove_needs_the_trainers_signature_and_a_real_opening(registry, evidence, running, sign, roles, unchanged):
    t, other = roles.trainers[:2]
    signed = sign(t, running, 0, 0, _payload(0, 0))
    force(registry, running, t, 0, signed)
    # the same payload signed by someone else is not the trainer's
    forged = sign(other, running, 0, 0, _payload(0, 0))
    unchanged([running], registry.Registry__NotSignedBy,
              _prove(evidence, sign, roles, running, t, 0, 0, 3, signed=forged), trainer=t.address)
    # a chunk that does not open the signed root proves nothing
    unchanged([running], registry.Registry__BadOpening,
              _prove(evidence, sign, roles, running, t, 0, 0, 3, signed=signed))


# ---------------------------------------------------------------- commitRound, seal, claim, sweep
# (the proofs against a committed round: test_root_flow_proofs.py, test_root_flow_v3.py)


def test_commit_round_checks(registry, start_run, roles, unchanged):
    """commitRound's own checks, each by name with everything unchanged: the syncer's only, the
    open round only, after the commit phase, one bitmap and one previous credit per enrolled
    trainer and F fragment hashes, no bit at or beyond F, previous credits that are the committed
    ones (all zero before round 0), K accepted per fragment before the deadline. A 10-minute
    window (a 2-minute reveal phase) keeps every check before the deadline on a slow host."""
    task = start_run("commit-checks", m=3, quorum=2, graceWindowMs=600_000, challengeSeconds=120)
    t = roles.trainers[:3]
    full = [0b11] * 3

    def call(rnd=0, bitmaps=full, previous=(0, 0, 0), f=2, sender=roles.syncer):
        return lambda: registry.commitRound(root_commit(task, rnd, f, list(bitmaps), list(previous)), sender=sender)

    for who in (roles.stranger, roles.sponsor, t[0]):
        unchanged([task], registry.Registry__NotSyncer, call(sender=who), taskId=task, caller=who.address)
    unchanged([task], registry.Registry__WrongRound, call(rnd=1), taskId=task, given=1, open=0)
    closes = registry.commitPhase(task)[0]
    unchanged([task], registry.Registry__CommitPhaseOpen, call(), taskId=task, round=0, closes=closes)
    to_reveal_phase(registry, task)
    unchanged([task], registry.Registry__CommitLength, call(bitmaps=full[:2]),
              bitmaps=2, credits=3, hashes=2, enrolled=3, f=2)
    unchanged([task], registry.Registry__CommitLength, call(previous=(0, 0)),
              bitmaps=3, credits=2, hashes=2, enrolled=3, f=2)
    unchanged([task], registry.Registry__CommitLength, call(f=1), bitmaps=3, credits=3, hashes=1, enrolled=3, f=2)
    unchanged([task], registry.Registry__BadBitmap, call(bitmaps=(0b11, 0b101, 0b11)), index=1, bitmap=0b101)
    unchanged([task], registry.Registry__WrongPreviousCredits, call(previous=(0, 7, 0)),
              given=(7).to_bytes(32, "big"), committed=bytes(32))
    unchanged([task], registry.Registry__QuorumNotMet, call(bitmaps=(0b11, 0b01, 0b01)),
              fragment=1, accepted=1, quorum=2)
    assert registry.getRun(task).roundDeadline >= ape.chain.pending_timestamp  # all before the deadline
    commit_round(registry, task, 0, full, roles.syncer)
    # round 1 with previous credits other than round 0's (3000 each)
    from tenzro_trainer.round_commitment import credits_tree

    to_reveal_phase(registry, task)
    unchanged([task], registry.Registry__WrongPreviousCredits, call(rnd=1, previous=(3000, 3000, 2000)),
              given=credits_tree([3000, 3000, 2000]).root, committed=credits_tree([3000] * 3).root)


def test_commit_after_completion(registry, start_run, roles, unchanged, chain):
    task = start_run("fin-done", m=1, quorum=1, maxRounds=1)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0], roles.syncer)
    unchanged([task], registry.Registry__WrongStatus,
              lambda: registry.commitRound(root_commit(task, 1, 2, [0], [0]), sender=roles.syncer), taskId=task,
              have=3)


def test_seal_before_completion(registry, running, roles, unchanged):
    unchanged([running], registry.Registry__WrongStatus, lambda: registry.sealRootRun(running, sender=roles.stranger),
              taskId=running, have=2)


def test_seal_twice(registry, start_run, roles, unchanged, chain):
    task = start_run("twice", m=1, quorum=1, maxRounds=1)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0], roles.syncer)
    seal_run(registry, task, roles.stranger)
    unchanged([task], registry.Registry__WrongStatus, lambda: registry.sealRootRun(task, sender=roles.stranger),
              taskId=task, have=4)


def test_seal_inside_the_challenge_window(registry, start_run, roles, unchanged, chain):
    """The last round stays challengeable for challengeSeconds after its commit: no seal before."""
    task = start_run("early-seal", m=1, quorum=1, maxRounds=1)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0b11], roles.syncer)
    until = registry.getRound(task, 0).finalizedAt + registry.getRun(task).challengeSeconds
    unchanged([task], registry.Registry__ChallengeWindowOpen,
              lambda: registry.sealRootRun(task, sender=roles.stranger), taskId=task, until=until)


def test_claim_and_sweep_reverts(registry, start_run, roles, unchanged, chain):
    """Claims: only once the run ended, only with credits that open the credits root, once per
    trainer; the sweep only after the claim deadline."""
    from tenzro_trainer.round_commitment import credits_tree

    task = start_run("claims", m=2, quorum=1, maxRounds=1)
    tree = credits_tree([3000, 1000])
    unchanged([task], registry.Registry__WrongStatus,
              lambda: registry.claim(task, 0, 3000, tree.path(0), sender=roles.stranger), taskId=task, have=2)
    unchanged([task], registry.Registry__WrongStatus, lambda: registry.sweep(task, sender=roles.stranger),
              taskId=task, have=2)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0b11, 0b01], roles.syncer)
    deadline = seal_run(registry, task, roles.stranger).decode_logs(registry.RootRunSealed)[0].claimDeadline
    for index, credits, proof in ((0, 3001, tree.path(0)), (1, 1000, tree.path(0)), (0, 3000, tree.path(1))):
        unchanged([task], registry.Registry__BadCreditProof,
                  lambda: registry.claim(task, index, credits, proof, sender=roles.stranger), index=index)
    registry.claim(task, 0, 3000, tree.path(0), sender=roles.stranger)
    unchanged([task], registry.Registry__AlreadyClaimed,
              lambda: registry.claim(task, 0, 3000, tree.path(0), sender=roles.stranger), taskId=task, index=0)
    unchanged([task], registry.Registry__ClaimPeriodOpen, lambda: registry.sweep(task, sender=roles.stranger),
              taskId=task, deadline=deadline)


def test_receipt_before_seal(registry, running):
    with ape.reverts(registry.Registry__WrongStatus, taskId=running, have=2):
        registry.getReceipt(running)
    # sealedRunRoot never reverts: zero for a run not sealed and for an unknown task
    assert registry.sealedRunRoot(running) == b"\x00" * 32
    assert registry.sealedRunRoot(b"\x11" * 32) == b"\x00" * 32


def test_withdraw_nothing(registry, roles, unchanged):
    unchanged([], registry.Registry__NothingToWithdraw, lambda: registry.withdraw(sender=roles.stranger),
              account=roles.stranger.address)


def test_withdraw_twice(registry, full_registry, enrolling, enroll, roles, unchanged):
    enroll(enrolling, roles.trainers[0])
    full_registry.cancelTask(enrolling, sender=roles.sponsor)
    registry.withdraw(sender=roles.trainers[0])
    unchanged([enrolling], registry.Registry__NothingToWithdraw, lambda: registry.withdraw(sender=roles.trainers[0]))


def test_withdraw_blocked_token_blocks_only_that_call(mocks, roles, chain):
    """A token that refuses transfers makes withdraw revert for its caller; the balance stays
    credited and withdrawable once the token works again (pull payments)."""
    tok = roles.owner.deploy(mocks("FalseReturnToken"))
    reg = deploy_registry(ape.project, roles.owner, tok)
    tok.mint(roles.sponsor, POOL, sender=roles.owner)
    tok.approve(reg, POOL, sender=roles.sponsor)
    p = params("blocked")
    reg.postTask(as_tuple(p), sender=roles.sponsor)
    ape.project.ITrainingRegistryFull.at(reg.address).cancelTask(p["taskId"], sender=roles.sponsor)
    tok.setRefuseAll(True, sender=roles.owner)
    with ape.reverts():
        reg.withdraw(sender=roles.sponsor)
    assert reg.withdrawable(roles.sponsor) == POOL and tok.balanceOf(reg) == POOL
    tok.setRefuseAll(False, sender=roles.owner)
    reg.withdraw(sender=roles.sponsor)
    assert tok.balanceOf(roles.sponsor) == POOL

"""ape tests of TrainingRegistry: the happy path of every function and view.

A run is driven as the operator drives it: the sponsor posts and commits the run's initial
fragments root and outer rule (useRootFlow), trainers enroll (the M-th opens round 0), anyone
requests a syncer election and anyone resolves it a block later, a trainer may force an
EIP-712-signed outer gradient (commitSubmission, then anyone reveals it), the syncer commits each
round by root (commitRound, earning its fee per round), anyone seals after the last round's
challenge window (sealRootRun), anyone claims each trainer's reward against the credits root,
the sponsor gets the unclaimed rest by the sweep, everyone withdraws. The sealed receipt is
checked against the Python encoder (tenzro_operator.receipt), an implementation written
independently of the Solidity one.
"""

from __future__ import annotations

import ape
from eth_account.messages import encode_typed_data
from eth_utils import keccak

from tenzro_operator import receipt as rc

from registry_helpers import (
    E18,
    ELECTION_WINDOW_BLOCKS,
    ENROLL_S,
    GRACE_S,
    MIN_STAKE,
    MIN_SYNCER_FEE_PER_ROUND,
    MIN_SYNCER_STAKE,
    POOL,
    SYNCER_BOND,
    SYNCER_FEE_BPS,
    SYNCER_TIMEOUT,
    INITIAL_FRAGMENTS_ROOT,
    OUTER,
    force,
    to_reveal_phase,
    as_tuple,
    claim_all,
    commit_forced,
    commit_round,
    deploy_registry,
    fee_per_round,
    nan_payload,
    params,
    prove_committed,
    root_commit,
    seal_run,
    sha,
    task_id,
)


RECEIPT_FIELDS = ("taskId", "specHash", "finalModelHash", "runRoot", "transcriptRoot", "rounds",
                  "trainerCount", "chainId", "registry", "sealedAt")


def as_receipt(value):
    """TrainingReceipt as a namespace (ape may hand a nested struct back as a plain tuple)."""
    from types import SimpleNamespace

    if hasattr(value, "runRoot"):
        return value
    return SimpleNamespace(**dict(zip(RECEIPT_FIELDS, value)))


def events(tx, name):
    return [log for log in tx.events if log.event_name == name]


# ---------------------------------------------------------------- syncer pool


def test_register_and_unregister_syncer(registry, token, fund, roles, chain):
    s = roles.other_syncer
    fund(s, 150 * E18)
    tx = registry.registerSyncer(100 * E18, sender=s)
    (ev,) = events(tx, "SyncerRegistered")
    assert (ev.syncer, ev.stake, ev.totalStake) == (s.address, 100 * E18, 100 * E18)
    tx = registry.registerSyncer(50 * E18, sender=s)  # top up
    assert events(tx, "SyncerRegistered")[0].totalStake == 150 * E18
    assert tuple(registry.syncerInfo(s)) == (150 * E18, 0, True, 0)
    assert s.address in registry.syncerCandidates()
    assert token.balanceOf(registry) == 150 * E18

    # the top-up changed its weight: the exit waits until no draw requested before it is open
    with ape.reverts(registry.Registry__SyncerChangePending, account=s.address, fromBlock=tx.block_number + ELECTION_WINDOW_BLOCKS + 1):
        registry.unregisterSyncer(sender=s)
    chain.mine(ELECTION_WINDOW_BLOCKS + 1)
    # leaving: out of draws requested from now on, the stake held while earlier draws may pick it
    tx = registry.unregisterSyncer(sender=s)
    (leaving,) = events(tx, "SyncerLeaving")
    assert leaving.fromBlock == tx.block_number + ELECTION_WINDOW_BLOCKS + 1
    with ape.reverts(registry.Registry__SyncerChangePending, account=s.address, fromBlock=leaving.fromBlock):
        registry.unregisterSyncer(sender=s)
    assert registry.withdrawable(s) == 0 and s.address in registry.syncerCandidates()
    chain.mine(ELECTION_WINDOW_BLOCKS + 1)
    tx = registry.unregisterSyncer(sender=s)
    assert events(tx, "SyncerUnregistered")[0].stakeReleased == 150 * E18
    assert tuple(registry.syncerInfo(s)) == (0, 0, False, 0)
    assert s.address not in registry.syncerCandidates()
    assert registry.withdrawable(s) == 150 * E18


def test_constructor_views(registry, token):
    assert registry.token() == token.address
    assert registry.minSyncerStake() == MIN_SYNCER_STAKE
    assert registry.syncerTimeout() == SYNCER_TIMEOUT
    assert registry.minSyncerFeePerRound() == MIN_SYNCER_FEE_PER_ROUND
    assert registry.burned() == 0


# ---------------------------------------------------------------- posting


def test_post_task_escrows_and_records_everything(registry, token, post_task, roles, chain):
    before = token.balanceOf(registry)
    tx_task = post_task("task-post", root=False, graceWindowMs=1_500)  # postTask only: its block is the head
    assert token.balanceOf(registry) - before == POOL
    run = registry.getRun(tx_task)
    p = params("task-post", graceWindowMs=1_500)
    assert run.status == 1  # Enrolling
    assert run.sponsor == roles.sponsor.address
    assert run.syncer == "0x" + "00" * 20 or int(run.syncer, 16) == 0
    assert run.specHash == p["specHash"] and run.specCid == p["specCid"]
    assert run.initialWeightsRoot == p["initialWeightsRoot"] == run.weightsRoot
    assert (run.trainerCount, run.quorum, run.fragmentCount) == (3, 2, 2)
    assert (run.innerSteps, run.maxRounds) == (24, 2)
    assert run.graceWindowSeconds == 2  # 1.5 s rounded up
    assert (run.minStake, run.rewardPool, run.rewardPoolLeft) == (MIN_STAKE, POOL, POOL)
    assert list(run.fragmentSizes) == [1000, 2000]
    assert run.postedAt == chain.blocks.head.timestamp
    assert run.enrollmentDeadline == run.postedAt + ENROLL_S
    assert (run.syncerFeeBps, run.syncerBond, run.syncerFeesAccrued) == (SYNCER_FEE_BPS, SYNCER_BOND, 0)
    # no syncer, no pending election, not Training: no replacement clock
    assert (run.syncerElectedAt, run.electionBlock, run.syncerReplaceableAt) == (0, 0, 0)
    assert run.currentRound == 0 and run.roundDeadline == 0


def test_task_posted_event_carries_params(registry, fund, roles):
    p = params("task-ev")
    fund(roles.sponsor, p["rewardPool"])
    tx = registry.postTask(as_tuple(p), sender=roles.sponsor)
    (ev,) = events(tx, "TaskPosted")
    assert ev.taskId == p["taskId"] and ev.sponsor == roles.sponsor.address
    assert ev.graceWindowSeconds == 30
    got = ev.params
    got = got if isinstance(got, (tuple, list)) else tuple(got.values())
    assert tuple(got)[0] == p["taskId"] and tuple(got)[2] == p["specCid"]
    # the v2 fields close the struct
    assert tuple(got)[-5:] == (p["enrollmentSeconds"], p["syncerFeeBps"], p["syncerBond"], p["normScreenSq"],
                               p["challengeSeconds"])


def test_list_runs_pages(registry, post_task):
    ids = [post_task(f"page-{i}", rewardPool=E18) for i in range(5)]
    page, total = registry.listRuns(0, 100)
    assert total == 5 and list(page) == ids
    assert list(registry.listRuns(1, 2)[0]) == ids[1:3]
    assert list(registry.listRuns(4, 10)[0]) == ids[4:]
    assert list(registry.listRuns(9, 10)[0]) == []


# ---------------------------------------------------------------- election, enrollment


def test_elect_syncer_by_anyone_in_two_steps(registry, post_task, enroll, syncer_pool, roles, chain):
    """Request (one stranger) at block n, elect (another) at block n+1: the run's syncer locks
    the run's bond; its replacement clock starts at the later of round deadline and election."""
    task = post_task("task-elect")
    for t in roles.trainers[:3]:
        enroll(task, t)
    tx = registry.requestSyncerElection(task, sender=roles.stranger)
    (req,) = events(tx, "SyncerElectionRequested")
    assert (req.taskId, req.round, req.requestBlock) == (task, 0, tx.block_number)
    assert registry.getRun(task).electionBlock == tx.block_number
    assert int(registry.getRun(task).syncer, 16) == 0  # nothing elected by the request

    tx = registry.electSyncer(task, sender=roles.relayer)
    assert tx.block_number == req.requestBlock + 1
    (ev,) = events(tx, "SyncerElected")
    assert ev.syncer == roles.syncer.address and int(ev.previous, 16) == 0
    assert ev.syncerStake == MIN_SYNCER_STAKE and ev.previousSlashed == 0 and ev.round == 0
    assert events(tx, "StakeBurned") == []  # a first election burns nothing
    run = registry.getRun(task)
    assert run.syncer == roles.syncer.address
    assert run.syncerElectedAt == chain.blocks.head.timestamp and run.electionBlock == 0
    assert run.syncerReplaceableAt == max(run.roundDeadline, run.syncerElectedAt) + SYNCER_TIMEOUT
    # one active task, its bond locked out of the stake (the stake itself is untouched)
    assert tuple(registry.syncerInfo(roles.syncer)) == (MIN_SYNCER_STAKE, 1, True, SYNCER_BOND)


def test_election_is_stake_weighted(registry, fund, syncer_pool, roles):
    """The heavy candidate (9x the stake) wins most of 40 draws (binomial, p = 0.9)."""
    heavy = roles.other_syncer
    fund(heavy, 900 * E18)
    registry.registerSyncer(900 * E18, sender=heavy)
    trainer = roles.trainers[0]
    fund(roles.sponsor, 40 * E18)
    fund(trainer, 40 * MIN_STAKE)
    wins = 0
    for i in range(40):
        p = params(f"draw-{i}", trainerCount=1, quorum=1, maxRounds=1, rewardPool=E18)
        registry.postTask(as_tuple(p), sender=roles.sponsor)
        registry.useRootFlow(p["taskId"], INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.sponsor)
        registry.enrollTrainer(p["taskId"], MIN_STAKE, "did:x", sender=trainer)  # M = 1: Training
        registry.requestSyncerElection(p["taskId"], sender=roles.stranger)
        wins += registry.electSyncer(p["taskId"], sender=roles.stranger).events[0].syncer == heavy.address
    assert 28 <= wins <= 40  # P(wins < 28) < 1e-3 for p = 0.9
    # every elected syncer locked one bond per run it holds
    for s in (heavy, roles.syncer):
        stake, active, _, locked = registry.syncerInfo(s)
        assert locked == active * SYNCER_BOND
    assert registry.syncerInfo(heavy)[1] == wins


def test_enroll_assigns_balanced_shards_and_opens_round_0(registry, post_task, enroll, roles, chain):
    task = post_task("task-enroll", trainerCount=3)
    for i, t in enumerate(roles.trainers[:3]):
        tx = enroll(task, t, MIN_STAKE + i, did=f"did:tenzro:{i}")
        (ev,) = events(tx, "TrainerEnrolled")
        assert (ev.trainer, ev.index, ev.shard, ev.shardCount) == (t.address, i, i, 3)
        assert (ev.stake, ev.did) == (MIN_STAKE + i, f"did:tenzro:{i}")
    opened = events(tx, "RoundOpened")[0]
    assert opened.round == 0 and opened.deadline == opened.openedAt + GRACE_S
    assert opened.weightsRoot == params("task-enroll")["initialWeightsRoot"]
    run = registry.getRun(task)
    assert run.status == 2 and run.enrolledCount == 3
    assert run.roundDeadline == chain.blocks.head.timestamp + GRACE_S
    assert run.stakeHeld == 3 * MIN_STAKE + 3
    assert list(registry.trainersOf(task)) == [t.address for t in roles.trainers[:3]]
    m = registry.trainerMetrics(task, roles.trainers[1])
    assert (m.index, m.enrolled, m.stake, m.did) == (1, True, MIN_STAKE + 1, "did:tenzro:1")


def test_close_enrollment_by_anyone_after_the_deadline(registry, post_task, enroll, elect, syncer_pool, roles,
                                                       chain):
    """With K <= enrolled < M, anyone opens round 0 once the enrollment deadline has passed;
    only then can a syncer be elected."""
    task = post_task("task-close", trainerCount=4, quorum=2)
    enroll(task, roles.trainers[0])
    enroll(task, roles.trainers[1])
    chain.mine(deltatime=ENROLL_S + 1)
    assert chain.blocks.head.timestamp > registry.getRun(task).enrollmentDeadline
    tx = registry.closeEnrollment(task, sender=roles.stranger)
    (opened,) = events(tx, "RoundOpened")
    assert opened.round == 0 and opened.openedAt == chain.blocks.head.timestamp
    run = registry.getRun(task)
    assert run.status == 2 and run.enrolledCount == 2 and run.trainerCount == 4
    assert run.roundDeadline == opened.openedAt + GRACE_S
    assert events(elect(task), "SyncerElected")[0].syncer == roles.syncer.address


def test_cancel_task_refunds_pool_and_stakes(registry, full_registry, post_task, enroll, roles):
    task = post_task("task-cancel")
    enroll(task, roles.trainers[0], 12 * E18)
    tx = full_registry.cancelTask(task, sender=roles.sponsor)
    assert events(tx, "TaskCancelled")[0].poolRefunded == POOL
    payouts = {e.account: (e.reward, e.stakeRefund) for e in events(tx, "PayoutCredited")}
    assert payouts == {roles.sponsor.address: (POOL, 0), roles.trainers[0].address: (0, 12 * E18)}
    assert registry.getRun(task).status == 5
    assert registry.withdrawable(roles.sponsor) == POOL
    assert registry.withdrawable(roles.trainers[0]) == 12 * E18


def test_cancel_by_anyone_after_the_deadline_short_of_quorum(registry, full_registry, token, post_task, enroll, roles, chain):
    """A run that missed its enrollment deadline with fewer than K trainers can be ended by
    anyone: the pool goes back to the sponsor, every stake to its trainer."""
    task = post_task("task-stale", trainerCount=3, quorum=2)
    enroll(task, roles.trainers[0], 11 * E18)
    chain.mine(deltatime=ENROLL_S + 1)
    balance = token.balanceOf(registry)
    tx = full_registry.cancelTask(task, sender=roles.stranger)
    ev = events(tx, "TaskCancelled")[0]
    assert (ev.poolRefunded, ev.trainersRefunded) == (POOL, 1)
    assert registry.getRun(task).status == 5
    assert registry.withdrawable(roles.sponsor) == POOL
    assert registry.withdrawable(roles.trainers[0]) == 11 * E18
    run = registry.getRun(task)
    assert (run.rewardPoolLeft, run.stakeHeld) == (0, 0)  # all of it now withdrawable
    assert token.balanceOf(registry) == balance  # nothing paid out before withdraw


# ---------------------------------------------------------------- rounds


def test_outer_gradient_digest_matches_eth_account(registry, chain):
    task = task_id("digest")
    typed = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"},
            ],
            "OuterGradient": [
                {"name": "taskId", "type": "bytes32"}, {"name": "round", "type": "uint32"},
                {"name": "fragment", "type": "uint16"}, {"name": "baseRoot", "type": "bytes32"},
                {"name": "payloadRoot", "type": "bytes32"}, {"name": "payloadSumsq", "type": "uint32"},
                {"name": "cid", "type": "string"}, {"name": "payloadHash", "type": "bytes32"},
            ],
        },
        "primaryType": "OuterGradient",
        "domain": {"name": "TenzroTrainingRegistry", "version": "2", "chainId": chain.chain_id,
                   "verifyingContract": registry.address},
        "message": {"taskId": task, "round": 7, "fragment": 3, "baseRoot": sha("w"), "payloadRoot": sha("r"),
                    "payloadSumsq": 0x3F800000, "cid": "bafk", "payloadHash": sha("p")},
    }
    msg = encode_typed_data(full_message=typed)
    expected = keccak(b"\x19\x01" + msg.header + msg.body)
    payload = (sha("r"), 0x3F800000, "bafk", sha("p"), b"")
    assert registry.outerGradientDigest(task, 7, 3, sha("w"), payload) == expected


def test_a_forced_submission_is_committed_then_revealed_by_anyone(registry, start_run, sign, roles):
    """The forced path: the trainer commits in the commit phase, anyone (here the syncer) reveals
    after it; the event carries the signature (norm proofs read the signed sums)."""
    task = start_run("task-submit")
    t = roles.trainers[0]
    fields = (sha("root"), 0x3F800000, "bafkreicid", sha("payload"))
    commit_forced(registry, task, t, 1, fields)
    signed = sign(t, task, 0, 1, fields)
    with ape.reverts(registry.Registry__CommitPhaseOpen):
        registry.submitOuterGradient(task, 0, 1, signed, sender=roles.syncer)
    to_reveal_phase(registry, task)
    tx = registry.submitOuterGradient(task, 0, 1, signed, sender=roles.syncer)
    (ev,) = events(tx, "GradientSubmitted")
    assert (ev.taskId, ev.round, ev.fragment, ev.trainer) == (task, 0, 1, t.address)
    assert (ev.cid, ev.payloadHash, ev.payloadRoot, ev.payloadSumsq) == ("bafkreicid", sha("payload"), sha("root"),
                                                                          0x3F800000)
    assert bytes(ev.signature) == signed[4]  # kept for norm proofs
    assert tuple(registry.submissionsOf(task, 0, t)) == (0b10, 0)
    assert registry.trainerMetrics(task, t).submitted == 1


def test_commit_round_records_credits_and_opens_next(registry, start_run, roles, chain):
    """commitRound before the deadline (K = 2 on each fragment): its event (roots, bitmaps,
    transcript), the credits root of the cumulative credits (trainer i gains the size of each
    fragment of its bitmap: 1000 and 2000), the round's commitment word, its record and digest, the
    next round opened over the new weights, the round's syncer fee moved from the pool to the
    syncer. (A trainer's credits live only in the credits root now: no per-trainer counters.)"""
    from tenzro_trainer.round_commitment import credits_tree

    fee = fee_per_round(POOL, SYNCER_FEE_BPS, 2)
    task = start_run("task-commit", m=3)
    bitmaps = [0b11, 0b11, 0b01]
    c = root_commit(task, 0, 2, bitmaps, [0, 0, 0])
    tx = commit_round(registry, task, 0, bitmaps, roles.syncer)
    wroot = rc.weights_root(c[5])
    tree = credits_tree([3000, 3000, 1000])
    (ev,) = events(tx, "RoundCommitted")
    assert (ev.round, ev.fragmentsRoot, ev.weightsRoot, ev.creditsRoot, ev.totalCredits) == (
        0, c[2], wroot, tree.root, 7000)
    assert list(ev.acceptedBitmaps) == bitmaps and (ev.transcriptHash, ev.transcriptCid) == (c[6], c[7])
    assert bytes(registry.rootState(task)[2]) == tree.root
    word = keccak(c[2] + tree.root + (7000).to_bytes(32, "big") + keccak(b"".join(b.to_bytes(32, "big") for b in bitmaps)))
    assert bytes(registry.roundCommitment(task, 0)) == word
    rec = registry.getRound(task, 0)
    assert rec.transcriptHash == c[6] and rec.acceptedCount == 5
    assert rec.roundDigest == rc.round_digest(0, wroot, c[6], 5)
    assert rec.finalizedAt == chain.blocks.head.timestamp
    nxt = events(tx, "RoundOpened")[0]
    assert nxt.round == 1 and nxt.weightsRoot == wroot
    run = registry.getRun(task)
    assert run.currentRound == 1 and run.weightsRoot == wroot and run.totalCredits == 7000
    # the round's syncer fee left the pool for the committing syncer
    assert run.rewardPoolLeft == POOL - fee and run.syncerFeesAccrued == fee
    assert registry.syncerFeeOf(task, roles.syncer) == fee


def test_after_the_deadline_any_accepted_set_commits(registry, start_run, roles, chain):
    """Before the deadline a round commits only with K accepted per fragment; after it, with any
    accepted set, also with none."""
    task = start_run("task-late", m=3)
    with ape.reverts(registry.Registry__QuorumNotMet):
        commit_round(registry, task, 0, [0b01, 0, 0], roles.syncer)
    chain.mine(deltatime=GRACE_S + 1)
    tx = commit_round(registry, task, 0, [0b01, 0, 0], roles.syncer)
    (ev,) = events(tx, "RoundCommitted")
    assert ev.totalCredits == 1000 and list(ev.acceptedBitmaps) == [0b01, 0, 0]
    chain.mine(deltatime=GRACE_S + 1)
    tx = commit_round(registry, task, 1, [0, 0, 0], roles.syncer)
    assert events(tx, "RoundCommitted")[0].totalCredits == 1000  # nothing added


def test_prove_invalid_slashes_pays_bounty_and_burns(registry, full_registry, start_run, sign, roles):
    """A NaN is proven by opening its committed chunk; 5 % slashed, 10 % of it to the prover,
    which committed to its proof's calldata a block before (`commitProof`)."""
    task = start_run("task-invalid", m=2, quorum=1)
    t = roles.trainers[1]
    signed, opening = nan_payload(sign, t, task, 0, 1, 2000)
    force(registry, task, t, 1, signed)
    burned0 = registry.burned()
    tx = prove_committed(full_registry, "proveInvalid", task, 0, 1, t, 3, signed, opening,  # NonFinite
                         sender=roles.stranger)
    (ev,) = events(tx, "TrainerSlashed")
    assert (ev.trainer, ev.reason, ev.round, ev.fragment) == (t.address, 3, 0, 1)
    assert ev.amount == MIN_STAKE * 500 // 10_000
    (proof,) = events(tx, "InvalidProven")
    assert (proof.prover, proof.slashed, proof.bounty) == (roles.stranger.address, ev.amount, ev.amount // 10)
    assert tuple(registry.submissionsOf(task, 0, t)) == (0b10, 0b10)
    (burn,) = events(tx, "StakeBurned")
    assert (burn.taskId, burn["from"], burn.amount) == (task, t.address, ev.amount - proof.bounty)
    run = registry.getRun(task)
    assert run.rewardPoolLeft == POOL  # the pool never grows: nobody gains by a slash
    assert run.stakeHeld == 2 * MIN_STAKE - ev.amount
    assert registry.burned() - burned0 == ev.amount - proof.bounty
    assert registry.withdrawable(roles.stranger) >= proof.bounty


def test_replace_silent_syncer_burns_its_bond(registry, token, start_run, elect, fund, roles, chain):
    fund(roles.other_syncer, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.other_syncer)
    task = start_run("task-replace", m=2)
    first = registry.getRun(task).syncer
    burned0, balance0 = registry.burned(), token.balanceOf(registry)
    chain.mine(deltatime=GRACE_S + SYNCER_TIMEOUT + 1)
    tx = elect(task)
    (ev,) = events(tx, "SyncerElected")
    assert ev.previous == first and ev.syncer != first
    assert ev.previousSlashed == SYNCER_BOND
    (burn,) = events(tx, "StakeBurned")
    assert (burn.taskId, burn["from"], burn.amount) == (task, first, SYNCER_BOND)
    # the replaced syncer lost exactly its bond for this run, and is no longer busy
    assert tuple(registry.syncerInfo(first)) == (MIN_SYNCER_STAKE - SYNCER_BOND, 0, True, 0)
    assert tuple(registry.syncerInfo(ev.syncer)) == (MIN_SYNCER_STAKE, 1, True, SYNCER_BOND)
    assert registry.getRun(task).rewardPoolLeft == POOL  # burned, not paid into the pool
    assert registry.burned() - burned0 == SYNCER_BOND
    assert token.balanceOf(registry) == balance0


# ---------------------------------------------------------------- seal and withdraw


def test_full_run_seal_receipt_claims_and_withdraw(registry, token, start_run, full_round, roles, chain):
    task = start_run("task-seal", m=3, maxRounds=2)
    fee = fee_per_round(POOL, SYNCER_FEE_BPS, 2)
    pool = POOL - 2 * fee  # what the trainers share after the two rounds' syncer fees
    tr = roles.trainers
    full_round(task, 0, 3, 2)
    commit_round(registry, task, 1, [0b11, 0b11, 0b01], roles.syncer)  # round 1: trainer 2 on fragment 0 only
    assert registry.getRun(task).status == 3  # Completed
    assert registry.sealedRunRoot(task) == b"\x00" * 32  # not sealed yet: zero, no revert

    tx = seal_run(registry, task, roles.stranger)
    (ev,) = events(tx, "RootRunSealed")
    assert ev.claimable == pool
    receipt, serialized = registry.getReceipt(task)
    receipt = as_receipt(receipt)
    serialized = bytes(serialized)
    # independent check: the Python encoder's run root of the stored bytes
    assert rc.run_root(serialized) == receipt.runRoot == registry.sealedRunRoot(task)
    assert rc.verify(serialized, receipt.runRoot)
    dec = rc.decode_receipt(serialized)
    assert dec.task_id == task and dec.rounds == 2 and dec.trainer_count == 3
    assert dec.chain_id == chain.chain_id
    assert receipt.finalModelHash == rc.weights_root(root_commit(task, 1, 2, [], [])[5])
    assert receipt.transcriptRoot == rc.transcript_root([root_commit(task, r, 2, [], [])[6] for r in range(2)])
    assert (receipt.rounds, receipt.trainerCount, receipt.registry) == (2, 3, registry.address)
    # the seal refunds the stakes; rewards are claimed against the credits root
    payouts = {e.account: (e.reward, e.stakeRefund) for e in events(tx, "PayoutCredited")}
    for t in tr[:3]:
        assert payouts[t.address] == (0, MIN_STAKE)

    # credits: t0 = t1 = 2 * 3000, t2 = 3000 + 1000 -> total 16000
    credits = [6000, 6000, 4000]
    rewards = [pool * c // 16000 for c in credits]
    assert claim_all(registry, task, roles.stranger) == rewards
    dust = pool - sum(rewards)
    run = registry.getRun(task)
    assert run.status == 4 and run.rewardPoolLeft == dust and run.stakeHeld == 0

    before = token.balanceOf(tr[0])
    tx = registry.withdraw(sender=tr[0])
    assert events(tx, "Withdrawn")[0].amount == rewards[0] + MIN_STAKE
    assert token.balanceOf(tr[0]) - before == rewards[0] + MIN_STAKE
    assert registry.withdrawable(tr[0]) == 0
    assert run.syncerFeesAccrued == 2 * fee
    # the seal unlocks the syncer's bond; its fees wait for claimSyncerFee
    assert tuple(registry.syncerInfo(roles.syncer)) == (MIN_SYNCER_STAKE, 0, True, 0)
    assert registry.syncerFeeOf(task, roles.syncer) == 2 * fee
    assert registry.runBinding(task) == (receipt.runRoot, roles.sponsor.address, dec.spec_hash, 16000)


def test_seal_without_credits_returns_pool_to_sponsor(registry, start_run, roles, chain):
    """Nobody earned credit: the pool minus the syncer's fee goes back to the sponsor at the seal."""
    task = start_run("task-nocredit", m=2, maxRounds=1)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(registry, task, 0, [0, 0], roles.syncer)
    seal_run(registry, task, roles.stranger)
    fee = fee_per_round(POOL, SYNCER_FEE_BPS, 1)
    assert registry.withdrawable(roles.sponsor) == POOL - fee
    assert registry.withdrawable(roles.trainers[0]) == MIN_STAKE
    assert registry.claimSyncerFee(task, sender=roles.syncer).return_value in (fee, None)
    assert registry.withdrawable(roles.syncer) == fee


def test_unclaimed_rewards_are_swept_to_the_sponsor_after_the_claim_deadline(registry, start_run, full_round, roles,
                                                                               chain):
    """The seal opens claims for 90 days; a trainer that never claims leaves its reward in the run,
    and after the deadline anyone sweeps it (and the rounding dust) to the sponsor: a later claim
    finds nothing left."""
    from tenzro_trainer.round_commitment import credits_tree

    task = start_run("task-sweep", m=2, quorum=2, maxRounds=1)
    pool = POOL - fee_per_round(POOL, SYNCER_FEE_BPS, 1)
    full_round(task, 0, 2, 2)
    ev = events(seal_run(registry, task, roles.stranger), "RootRunSealed")[0]
    assert ev.claimable == pool and ev.claimDeadline == chain.blocks.head.timestamp + 90 * 86_400
    tree = credits_tree([3000, 3000])
    reward = registry.claim(task, 0, 3000, tree.path(0), sender=roles.stranger).decode_logs(registry.RewardClaimed)[0].reward
    assert reward == pool * 3000 // 6000
    chain.mine(deltatime=90 * 86_400 + 1)
    before = registry.withdrawable(roles.sponsor)
    (swept,) = events(registry.sweep(task, sender=roles.stranger), "PoolSwept")
    assert (swept.sponsor, swept.amount) == (roles.sponsor.address, pool - reward)
    assert registry.withdrawable(roles.sponsor) - before == pool - reward
    assert registry.getRun(task).rewardPoolLeft == 0
    with ape.reverts(registry.Registry__ClaimExceedsPool):
        registry.claim(task, 1, 3000, tree.path(1), sender=roles.stranger)


def test_works_with_a_token_without_return_values(project, mocks, roles, chain):
    """USDT-style token (no bool returned): SafeERC20 copes, a whole run pays out."""
    tok = roles.owner.deploy(mocks("NoReturnToken"))
    reg = deploy_registry(project, roles.owner, tok)
    for a, amt in [(roles.sponsor, POOL), (roles.syncer, MIN_SYNCER_STAKE), (roles.trainers[0], MIN_STAKE)]:
        tok.mint(a, amt, sender=roles.owner)
        tok.approve(reg, amt, sender=a)
    reg.registerSyncer(MIN_SYNCER_STAKE, sender=roles.syncer)
    p = params("nr", trainerCount=1, quorum=1, maxRounds=1)
    reg.postTask(as_tuple(p), sender=roles.sponsor)
    reg.useRootFlow(p["taskId"], INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.sponsor)
    reg.enrollTrainer(p["taskId"], MIN_STAKE, "did:x", sender=roles.trainers[0])
    reg.requestSyncerElection(p["taskId"], sender=roles.stranger)
    reg.electSyncer(p["taskId"], sender=roles.stranger)
    chain.mine(deltatime=GRACE_S + 1)
    commit_round(reg, p["taskId"], 0, [0], roles.syncer)
    seal_run(reg, p["taskId"], roles.stranger)
    reg.claimSyncerFee(p["taskId"], sender=roles.syncer)
    for a in (roles.sponsor, roles.trainers[0], roles.syncer):
        reg.withdraw(sender=a)
    fee = fee_per_round(POOL, SYNCER_FEE_BPS, 1)
    assert tok.balanceOf(roles.sponsor) == POOL - fee and tok.balanceOf(roles.trainers[0]) == MIN_STAKE
    assert tok.balanceOf(roles.syncer) == fee
    assert tok.balanceOf(reg) == MIN_SYNCER_STAKE

"""Chain client against the real contracts on a real anvil: start-up checks, the run lifecycle,
EIP-712, reverts decoded by name, nonces with several transactions in flight, RPC outages."""

from __future__ import annotations

import hashlib
import json
import threading
import time

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from op_stack import ensure_syncer_stake, force_commit, make_spec, past_commit_phase, post_root_run
from stack import MIN_SYNCER_STAKE, TOKEN, free_port
import torch

from tenzro_operator.chain import (
    ChainClient,
    ChunkOpening,
    RunStatus,
    SignedPayload,
    SlashReason,
    outer_gradient_typed_data,
)
from tenzro_trainer.commitment import ChunkTree
from tenzro_operator.errors import ChainRevert, DeploymentError, RpcUnavailable
from tenzro_operator.keys import anvil_account
from tenzro_operator.spec import spec_hash


def sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def payload(cid: str, h: bytes, values: torch.Tensor | None = None) -> SignedPayload:
    """An unsigned submission of ``values`` (default 600 ones) under its real chunk commitment."""
    root, sumsq = ChunkTree(torch.ones(600) if values is None else values).root
    return SignedPayload(root, sumsq, cid, h)


# -- start-up checks ------------------------------------------------------------------------


def test_startup_checks_fail_fast(stack, tmp_path):
    rec = json.loads(stack.deployments.read_text())
    wrong_chain = dict(rec, chain_id=1)
    p = tmp_path / "wrong-chain.json"
    p.write_text(json.dumps(wrong_chain))
    with pytest.raises(DeploymentError, match="is chain 31337 but .* deployed on chain 1"):
        ChainClient(stack.rpc_url, p)
    no_code = json.loads(json.dumps(rec))
    no_code["contracts"]["TrainingRegistry"]["address"] = "0x000000000000000000000000000000000000dEaD"
    p2 = tmp_path / "no-code.json"
    p2.write_text(json.dumps(no_code))
    with pytest.raises(DeploymentError, match="no contract code at 0x000000000000000000000000000000000000dEaD"):
        ChainClient(stack.rpc_url, p2)
    with pytest.raises(DeploymentError, match="not found; deploy first"):
        ChainClient(stack.rpc_url, tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"chain_id": 31337}))
    with pytest.raises(DeploymentError, match="lacks field 'contracts'"):
        ChainClient(stack.rpc_url, bad)


def test_rpc_down_gives_rpc_unavailable_quickly(stack):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(RpcUnavailable) as ei:
        ChainClient(url, stack.deployments, retries=3, backoff_s=0.05)
    assert time.monotonic() - t0 < 5
    msg = str(ei.value)
    assert url in msg and "3 attempt" in msg and "make devnet-up" in msg
    assert "\n" not in msg


# -- the lifecycle ----------------------------------------------------------------------------


def test_full_lifecycle_and_conservation(roles, running_task):
    spec, tid = running_task
    base, sponsor, syncer = roles["base"], roles["sponsor"], roles["syncer"]
    t1, t2 = roles["trainers"][:2]
    run = base.get_run(tid)
    assert run.status == RunStatus.TRAINING and run.current_round == 0
    assert run.spec_hash == spec_hash(spec) and run.spec_cid == "bafyspec"
    assert (run.trainer_count, run.quorum, run.fragment_count, run.max_rounds) == (2, 1, 2, 2)
    assert run.fragment_sizes == (600, 400) and run.grace_window_seconds == 30
    assert run.reward_pool == spec.reward_pool_atto and run.aggregation_name == "TrimmedMean"
    assert base.trainers_of(tid) == [t1.address, t2.address]
    assert tid in base.all_runs()
    assert (run.syncer_fee_bps, run.syncer_bond) == (100, 10 * TOKEN)  # the spec's defaults
    assert run.enrollment_deadline == run.posted_at + 3600 and run.syncer_elected_at >= run.round_opened_at
    assert run.election_block == 0  # resolved
    bonded = syncer.syncer_info()
    assert bonded.locked >= run.syncer_bond and bonded.active_tasks >= 1
    escrowed = spec.reward_pool_atto + 2 * 100 * TOKEN
    fee_per_round = 1000 * TOKEN * 100 // 10_000 // 2  # pool 1000 TNZO, 1 %, over 2 rounds: 5 TNZO

    from tenzro_operator import receipt as R
    from tenzro_operator.root_flow import credits_proof
    from tenzro_trainer.round_commitment import credits_tree

    credits = [0, 0]
    for rnd in range(2):
        # the forced path: t1 commits to both fragments, t2 to fragment 0, in the commit phase ...
        m1 = [force_commit(t1, tid, rnd, f, payload(f"bafk-{rnd}-{f}", sha(b"%d%d" % (rnd, f)))) for f in range(2)]
        m2 = force_commit(t2, tid, rnd, 0, payload("bafk-t2", sha(b"t2")))
        with pytest.raises(ChainRevert) as ei:  # nothing is revealed while the phase is open
            t2.submit_outer_gradient(tid, rnd, 0, m2.signed_payload())
        assert ei.value.error_name == "Registry__CommitPhaseOpen"
        past_commit_phase(base, tid)
        # ... and reveals after it, t1's two transactions in flight at once
        res = [t1.wait(p) for p in [t1.submit_outer_gradient(tid, rnd, f, m.signed_payload(), wait=False)
                                    for f, m in enumerate(m1)]]
        ev = res[1].event("GradientSubmitted")
        assert (ev["round"], ev["fragment"], ev["trainer"], ev["cid"]) == (rnd, 1, t1.address, f"bafk-{rnd}-1")
        assert ev["payloadHash"] == sha(b"%d1" % rnd)
        t2.submit_outer_gradient(tid, rnd, 0, m2.signed_payload())
        assert base.submissions_of(tid, rnd, t1.address) == (0b11, 0)
        hashes = [sha(b"w%d0" % rnd), sha(b"w%d1" % rnd)]
        com = syncer.commit_round(tid, rnd, sha(b"fragments%d" % rnd), [0b11, 0b01], credits, hashes,
                                  sha(b"transcript%d" % rnd), "tcid").event("RoundCommitted")
        credits = [credits[0] + 600 + 400, credits[1] + 600]
        assert list(com["acceptedBitmaps"]) == [0b11, 0b01] and com["totalCredits"] == sum(credits)
        assert com["weightsRoot"] == R.weights_root(hashes)
        assert com["creditsRoot"] == credits_tree(credits).root

    done = base.get_run(tid)
    assert done.status == RunStatus.COMPLETED
    # each committed round moved one fee from the pool to the committing syncer
    assert done.syncer_fees_accrued == 2 * fee_per_round == base.syncer_fee_of(tid, syncer.address)
    assert done.reward_pool_left == spec.reward_pool_atto - 2 * fee_per_round
    with pytest.raises(ChainRevert, match="Registry__WrongStatus"):
        syncer.claim_syncer_fee(tid)  # only after the seal
    with pytest.raises(ChainRevert, match="Registry__ChallengeWindowOpen"):
        sponsor.seal_root_run(tid)  # the last round can be proven wrong until its window closes
    base.mine(seconds=done.challenge_seconds + 1)
    sealed = sponsor.seal_root_run(tid)
    claimable = sealed.event("RootRunSealed")["claimable"]
    assert claimable == spec.reward_pool_atto - 2 * fee_per_round
    receipt = base.get_receipt(tid)
    assert R.run_root(receipt.serialized) == receipt.run_root
    assert receipt.task_id == tid and receipt.spec_hash == spec_hash(spec) and receipt.chain_id == 31337
    assert receipt.final_model_hash == com["weightsRoot"]
    assert base.verify_receipt(receipt.serialized, receipt.run_root) is True
    assert base.verify_receipt(receipt.serialized, b"\x00" * 32) is False

    # Payouts: stakes back at the seal; t1 claims for credits 2*(600+400), t2 for 2*600 of what the
    # syncer fees left in the pool; rewards + refunds + fees + the floor dust == escrowed.
    refunds = {ev["account"]: ev["stakeRefund"] for ev in sealed.events_named("PayoutCredited")}
    assert refunds == {t1.address: 100 * TOKEN, t2.address: 100 * TOKEN}
    root = base.root_state(tid)[2]
    with pytest.raises(ChainRevert, match="Registry__BadCreditProof"):  # credits it did not earn
        t2.claim_reward(tid, 1, credits[1] + 1, credits_proof(credits, 1, root))
    rewards = {}
    for i, t in enumerate((t1, t2)):
        rewards[t.address] = t.claim_reward(tid, i, credits[i], credits_proof(credits, i, root)).event(
            "RewardClaimed")["reward"]
        assert rewards[t.address] == claimable * credits[i] // sum(credits)
    with pytest.raises(ChainRevert, match="Registry__AlreadyClaimed"):
        t1.claim_reward(tid, 0, credits[0], credits_proof(credits, 0, root))
    dust = claimable - sum(rewards.values())
    assert 0 <= dust < 2 and sum(rewards.values()) + dust + sum(refunds.values()) + 2 * fee_per_round == escrowed
    # the seal unlocked the syncer's bond; the fee is claimed once, to the withdrawable balance
    assert syncer.syncer_info().locked == bonded.locked - run.syncer_bond
    owed = syncer.withdrawable()
    assert syncer.claim_syncer_fee(tid) == 2 * fee_per_round
    assert syncer.withdrawable() == owed + 2 * fee_per_round and syncer.syncer_fee_of(tid) == 0
    with pytest.raises(ChainRevert, match="Registry__NoSyncerFee"):
        syncer.claim_syncer_fee(tid)
    before = [base.token_balance(a) for a in (t1.address, t2.address)]
    got1 = t1.withdraw().event("Withdrawn")["amount"]
    got2 = t2.withdraw().event("Withdrawn")["amount"]
    assert got1 == refunds[t1.address] + rewards[t1.address] and got2 == refunds[t2.address] + rewards[t2.address]
    assert [base.token_balance(a) for a in (t1.address, t2.address)] == [before[0] + got1, before[1] + got2]


def test_eip712_digest_and_signature_match_the_contract(roles, running_task):
    _, tid = running_task
    t1 = roles["trainers"][0]
    reg = t1.registry.address
    base_root = t1.get_run(tid).weights_root
    p = payload("bafk-x", sha(b"x"))
    digest = t1.outer_gradient_digest(tid, 0, 1, base_root, p)
    msg = encode_typed_data(full_message=outer_gradient_typed_data(31337, reg, tid, 0, 1, base_root, p))
    signed = t1.sign_outer_gradient(tid, 0, 1, p)
    assert len(signed.signature) == 65
    assert Account.recover_message(msg, signature=signed.signature) == t1.address
    from eth_utils import keccak

    assert keccak(b"\x19\x01" + msg.header + msg.body) == digest
    # a signature over another base root (weights the round did not start from) is not the trainer's
    stale = t1.sign_outer_gradient(tid, 0, 1, p, base_root=b"\x01" * 32)
    with pytest.raises(ChainRevert) as ei:
        roles["syncer"].prove_invalid(tid, 0, 1, t1.address, SlashReason.NON_FINITE, stale, ChunkOpening(0, b""))
    assert ei.value.error_name in ("Registry__NoSuchSubmission", "Registry__NotSignedBy")
    # A relayer (the syncer) can reveal the trainer's signed gradient once the trainer committed to it.
    from tenzro_operator.root_flow import RevealMessage

    t1.commit_submission(tid, 0, 1, RevealMessage.of(tid, 0, 1, t1.address, base_root, signed).commitment())
    past_commit_phase(t1, tid)
    res = roles["syncer"].submit_outer_gradient(tid, 0, 1, signed)
    ev = res.event("GradientSubmitted")
    assert ev["trainer"] == t1.address and ev["payloadRoot"] == p.payload_root
    assert SignedPayload.from_event(ev) == signed


# -- reverts decoded by name -----------------------------------------------------------------


def test_reverts_are_decoded_by_name_and_nothing_is_sent(roles, running_task):
    from tenzro_operator.metrics import SyncerMetrics

    spec, tid = running_task
    sponsor, t3 = roles["sponsor"], roles["trainers"][2]
    sponsor.metrics = metrics = SyncerMetrics()
    nonce_before = sponsor.w3.eth.get_transaction_count(sponsor.address)
    with pytest.raises(ChainRevert) as ei:
        sponsor.post_task(spec, "bafyspec", approve=False)
    assert ei.value.error_name == "Registry__TaskExists"
    assert ei.value.args_["taskId"] == tid
    assert "postTask reverted: Registry__TaskExists(taskId=0x" in str(ei.value)
    assert sponsor.w3.eth.get_transaction_count(sponsor.address) == nonce_before  # refused before sending
    assert metrics.chain_tx_failures.labels(method="postTask", reason="Registry__TaskExists")._value.get() == 1
    assert metrics.chain_tx.labels(method="postTask")._value.get() == 0

    with pytest.raises(ChainRevert) as ei:
        t3.enroll_trainer(tid, 100 * TOKEN, "did:x")  # M already enrolled: run is Training
    # which check fires first is the registry's choice; both carry diagnostic args
    assert ei.value.error_name in ("Registry__WrongStatus", "Registry__EnrollmentFull")
    if ei.value.error_name == "Registry__WrongStatus":
        assert ei.value.args_["have"] == RunStatus.TRAINING
    else:
        assert ei.value.args_ == {"taskId": tid, "m": 2}

    other = make_spec(quorum=2)
    post_root_run(sponsor, other, "bafyspec2")
    with pytest.raises(ChainRevert) as ei:
        t3.enroll_trainer(other.task_id_bytes, 5, "did:x")
    assert ei.value.error_name == "Registry__StakeTooLow"
    assert ei.value.args_ == {"stake": 5, "minStake": 100 * TOKEN}

    with pytest.raises(ChainRevert) as ei:
        roles["trainers"][0].prove_invalid(tid, 0, 0, t3.address, SlashReason.NON_FINITE, payload("c", sha(b"c")))
    assert ei.value.error_name == "Registry__NotEnrolled"
    # ERC-20 errors of the token (another contract) decode too.
    with pytest.raises(ChainRevert) as ei:
        t3.transfer_tokens(sponsor.address, 10**40)
    assert ei.value.error_name == "ERC20InsufficientBalance"
    # the nonce counter is intact after refused transactions
    assert sponsor.approve(1).status == 1


def test_unknown_task_view_reverts_by_name(roles):
    with pytest.raises(ChainRevert, match="Registry__UnknownTask"):
        roles["base"].get_run(b"\x42" * 32)
    assert roles["base"].run_exists(b"\x42" * 32) is False


# -- nonces -----------------------------------------------------------------------------------


def test_many_transactions_in_flight_from_threads(roles):
    sponsor = roles["sponsor"]
    to = roles["trainers"][2].address
    start_balance = sponsor.token_balance(to)
    pending = []
    lock = threading.Lock()

    def worker():
        for _ in range(5):
            p = sponsor.send("transfer", to, 1, contract="TenzroToken")
            with lock:
                pending.append(p)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    nonces = sorted(p.nonce for p in pending)
    assert nonces == list(range(nonces[0], nonces[0] + 20))  # no gaps, no duplicates
    results = [sponsor.wait(p) for p in pending]
    assert all(r.status == 1 for r in results)
    assert sponsor.token_balance(to) == start_balance + 20


def test_nonce_resyncs_after_an_outside_transaction(roles, stack, caplog):
    a = roles["sponsor"]
    a.approve(5)  # the counter is now primed
    # Another client with the same key sends behind our back: our local nonce is stale.
    other = ChainClient(stack.rpc_url, stack.deployments, anvil_account(1))
    other.approve(6)
    res = a.approve(7)  # "nonce too low" -> resync -> resend
    assert res.status == 1
    assert "resyncing from the node" in caplog.text
    assert a.allowance() == 7


# -- RPC outages --------------------------------------------------------------------------------


def test_client_rides_out_an_anvil_restart(fresh_stack):
    client = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1), retries=40,
                         backoff_s=0.1, max_backoff_s=0.5)
    client.approve(11)
    head = client.block_number()
    restarter = threading.Thread(target=fresh_stack.anvil.restart)
    restarter.start()
    time.sleep(0.2)
    # Calls during the outage retry with backoff and succeed once anvil (same state) is back.
    assert client.block_number() >= head
    restarter.join()
    assert client.allowance() == 11  # the state survived
    client.resync_nonce()
    assert client.approve(12).status == 1


def test_outage_longer_than_the_retries_is_a_clear_error(fresh_stack):
    client = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1), retries=3, backoff_s=0.05)
    fresh_stack.anvil.stop()
    with pytest.raises(RpcUnavailable, match="gave up after 3 attempt"):
        client.approve(1)


def test_prove_invalid_slashes_with_evidence_only(roles, running_task):
    """A NaN payload is proven by opening its chunk: 5 % slashed, 10 % of that to the prover,
    the rest burned; the sound chunk of the same payload proves nothing."""
    _, tid = running_task
    base, syncer, t1 = roles["base"], roles["syncer"], roles["trainers"][0]
    values = torch.ones(600)
    values[37] = float("nan")
    tree = ChunkTree(values)
    signed = force_commit(t1, tid, 0, 0, payload("bafk-bad", sha(b"bad"), values)).signed_payload()
    past_commit_phase(base, tid)
    t1.submit_outer_gradient(tid, 0, 0, signed)
    with pytest.raises(ChainRevert) as ei:
        syncer.prove_invalid(tid, 0, 0, t1.address, SlashReason.NON_FINITE, signed, ChunkOpening.of(tree, 0))
    assert ei.value.error_name == "Registry__NotProven"
    bps = base.call("INVALID_SLASH_BPS")
    before = base.get_run(tid)
    burned_before, bounty_before = base.burned(), base.withdrawable(syncer.address)
    res = syncer.prove_invalid(tid, 0, 0, t1.address, SlashReason.NON_FINITE, signed, ChunkOpening.of(tree, 2))
    ev = res.event("InvalidProven")
    assert ev["trainer"] == t1.address and ev["reason"] == SlashReason.NON_FINITE and ev["prover"] == syncer.address
    assert ev["slashed"] == 100 * TOKEN * bps // 10_000 and ev["bounty"] == ev["slashed"] // 10
    assert base.submissions_of(tid, 0, t1.address) == (1, 1)
    run = base.get_run(tid)
    assert run.stake_held == before.stake_held - ev["slashed"]
    assert base.burned() == burned_before + ev["slashed"] - ev["bounty"]
    assert base.withdrawable(syncer.address) == bounty_before + ev["bounty"]
    assert run.reward_pool_left == before.reward_pool_left  # never fed to the pool (or the sponsor)


def test_availability_challenge_expires_into_a_slash(roles, running_task):
    """A payload the syncer cannot use is challenged; unanswered within challengeSeconds, anyone
    expires it: the trainer is slashed and the challenger gets its bond back plus the bounty."""
    _, tid = running_task
    base, syncer, t1 = roles["base"], roles["syncer"], roles["trainers"][0]
    signed = force_commit(t1, tid, 0, 0, payload("bafk-gone", sha(b"gone"))).signed_payload()
    past_commit_phase(base, tid)
    t1.submit_outer_gradient(tid, 0, 0, signed)
    res = syncer.challenge_availability(tid, 0, 0, t1.address, signed, 1)
    ch = res.event("AvailabilityChallenged")
    assert ch["bond"] == base.get_run(tid).syncer_bond // 10 and ch["chunkIndex"] == 1
    assert base.get_run(tid).open_challenges == 1
    pending = base.availability_challenge(tid, 0, 0, t1.address)
    assert pending["challenger"] == syncer.address and pending["chunkIndex"] == 1
    assert pending["payloadRoot"] == signed.payload_root and pending["bond"] == ch["bond"]
    anyone = roles["trainers"][1]
    with pytest.raises(ChainRevert) as ei:
        anyone.expire_availability(tid, 0, 0, t1.address)
    assert ei.value.error_name == "Registry__ChallengeDeadline"
    base.mine(seconds=base.get_run(tid).challenge_seconds + 1)
    ev = anyone.expire_availability(tid, 0, 0, t1.address).event("InvalidProven")
    assert ev["reason"] == SlashReason.UNAVAILABLE and ev["prover"] == syncer.address
    assert base.get_run(tid).open_challenges == 0 and base.challenge_bonds_held() == 0
    assert base.availability_challenge(tid, 0, 0, t1.address)["challenger"] == "0x" + "0" * 40


def test_cancel_during_enrollment_refunds(roles):
    spec = make_spec()
    sponsor = roles["sponsor"]
    post_root_run(sponsor, spec, "bafyspec")
    roles["trainers"][2].enroll_trainer(spec.task_id_bytes, 100 * TOKEN, "did:x")
    before = sponsor.withdrawable()
    ev = sponsor.cancel_task(spec.task_id_bytes).event("TaskCancelled")
    assert ev["poolRefunded"] == spec.reward_pool_atto and ev["trainersRefunded"] == 1
    assert sponsor.withdrawable() == before + spec.reward_pool_atto
    assert roles["base"].get_run(spec.task_id_bytes).status == RunStatus.CANCELLED


def test_run_start_block_is_the_block_of_posting(roles):
    """Event scans of a run start at `run_start_block`: found by binary search over block
    timestamps, it is at or before the postTask block and after every block of an earlier second."""
    base = roles["base"]
    base.mine(seconds=5, blocks=3)  # earlier blocks, strictly earlier seconds
    spec = make_spec()
    tx = roles["sponsor"].post_task(spec, "bafyspec")
    base.mine(seconds=5, blocks=3)  # later blocks
    run = base.get_run(spec.task_id_bytes)
    start = base.run_start_block(run)
    assert start <= tx.block_number
    assert base.block_timestamp(start) == run.posted_at
    assert base.block_timestamp(start - 1) < run.posted_at
    posted = base.get_logs(start, base.block_number(), ["TaskPosted"], task_id=spec.task_id_bytes)
    assert [e["block_number"] for e in posted] == [tx.block_number]
    assert base.first_block_at(base.block_timestamp("latest") + 1000) == base.block_number() + 1
    assert base.first_block_at(0) == base.deployment.deploy_block


# -- enrollment deadline, two-step elections, syncer replacement ---------------------------------


def test_enrollment_deadline_lets_anyone_close_or_cancel(roles):
    """After the spec's enrollment window anyone opens round 0 with >= K enrolled, or cancels
    with fewer; before it only the sponsor may cancel, and nobody may close."""
    base, sponsor, outsider = roles["base"], roles["sponsor"], roles["trainers"][2]
    t1 = roles["trainers"][0]
    ready = make_spec(enrollment_window_ms=20_000)  # M=2, K=1
    short = make_spec(enrollment_window_ms=20_000, quorum=2)  # M=2, K=2
    for spec in (ready, short):
        post_root_run(sponsor, spec, "bafyspec")
        t1.enroll_trainer(spec.task_id_bytes, 100 * TOKEN, "did:tenzro:machine:t1")
    run = base.get_run(ready.task_id_bytes)
    assert run.enrollment_deadline == run.posted_at + 20
    with pytest.raises(ChainRevert) as ei:
        outsider.close_enrollment(ready.task_id_bytes)
    assert ei.value.error_name == "Registry__EnrollmentStillOpen" and ei.value.args_["deadline"] == run.enrollment_deadline
    with pytest.raises(ChainRevert, match="Registry__NotSponsor"):
        outsider.cancel_task(short.task_id_bytes)
    with pytest.raises(ChainRevert, match="Registry__WrongStatus"):  # no election while Enrolling
        outsider.request_syncer_election(ready.task_id_bytes)

    base.mine(seconds=21)
    with pytest.raises(ChainRevert, match="Registry__EnrollmentClosed"):
        roles["trainers"][1].enroll_trainer(ready.task_id_bytes, 100 * TOKEN, "did:late")
    with pytest.raises(ChainRevert, match="Registry__RunCanTrain"):
        outsider.cancel_task(ready.task_id_bytes)  # K enrolled: the run can still train
    with pytest.raises(ChainRevert, match="Registry__NotEnoughEnrolled"):
        outsider.close_enrollment(short.task_id_bytes)
    opened = outsider.close_enrollment(ready.task_id_bytes).event("RoundOpened")
    assert opened["round"] == 0 and base.get_run(ready.task_id_bytes).status == RunStatus.TRAINING
    owed = t1.withdrawable()
    ev = outsider.cancel_task(short.task_id_bytes).event("TaskCancelled")
    assert (ev["poolRefunded"], ev["trainersRefunded"]) == (short.reward_pool_atto, 1)
    assert t1.withdrawable() == owed + 100 * TOKEN
    assert base.get_run(short.task_id_bytes).status == RunStatus.CANCELLED


def test_election_is_two_steps_and_pending_requests_are_shared(roles):
    base, sponsor, syncer, outsider = roles["base"], roles["sponsor"], roles["syncer"], roles["trainers"][2]
    spec = make_spec(trainer_count=1, quorum=1)
    post_root_run(sponsor, spec, "bafyspec")
    tid = spec.task_id_bytes
    roles["trainers"][0].enroll_trainer(tid, 100 * TOKEN, "did:tenzro:machine:t1")  # M-th: Training
    ensure_syncer_stake(syncer, spec.syncer_bond_atto, MIN_SYNCER_STAKE)
    with pytest.raises(ChainRevert, match="Registry__NoElectionRequested"):
        outsider.elect_syncer(tid)
    req = outsider.request_syncer_election(tid)  # anyone may ask
    assert req.event("SyncerElectionRequested")["requestBlock"] == req.block_number
    assert base.get_run(tid).election_block == req.block_number
    with pytest.raises(ChainRevert) as ei:
        syncer.request_syncer_election(tid)
    assert ei.value.error_name == "Registry__ElectionPending" and ei.value.args_["requestBlock"] == req.block_number
    # the helper resolves someone else's pending request instead of asking again
    assert syncer.run_syncer_election(tid) == syncer.address
    run = base.get_run(tid)
    assert run.syncer == syncer.address and run.election_block == 0 and run.syncer_elected_at > 0
    assert run.syncer_replaceable_at == max(run.round_deadline, run.syncer_elected_at) + base.syncer_timeout()
    with pytest.raises(ChainRevert, match="Registry__SyncerStillActive"):
        outsider.request_syncer_election(tid)


def _run_with_one_elected_syncer(fresh_stack):
    """Own chain: a 1-trainer run (sponsor anvil 1, trainer 3 enrolled) whose only syncer candidate A
    (anvil 2) is elected. Returns (base client, sponsor, A, trainer, anvil 4's client, spec, task id)."""
    base = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments)
    sponsor, a, trainer, other = (base.with_account(anvil_account(i)) for i in (1, 2, 3, 4))
    spec = make_spec(trainer_count=1, quorum=1)
    post_root_run(sponsor, spec, "bafyspec")
    tid = spec.task_id_bytes
    trainer.enroll_trainer(tid, 100 * TOKEN, "did:tenzro:machine:t")
    a.register_syncer(base.min_syncer_stake())
    assert a.run_syncer_election(tid) == a.address  # the only candidate
    return base, sponsor, a, trainer, other, spec, tid


def test_silent_syncer_is_replaced_and_its_bond_burned(fresh_stack):
    """Own chain: two candidates. Syncer A is elected, stays silent past syncerReplaceableAt;
    anyone's two-step election replaces it by B (A excluded) and burns A's bond for the run."""
    base, sponsor, a, trainer, b, spec, tid = _run_with_one_elected_syncer(fresh_stack)
    b.register_syncer(base.min_syncer_stake())
    stake_a = a.syncer_info().stake
    run = base.get_run(tid)
    base.mine(seconds=run.syncer_replaceable_at - base.block_timestamp() + 1)
    assert trainer.run_syncer_election(tid) == b.address  # anyone drives it; A is excluded
    elected = base.get_logs(base.run_start_block(run), base.block_number(), ["SyncerElected"],
                            task_id=tid)[-1]["args"]
    assert (elected["previous"], elected["previousSlashed"]) == (a.address, spec.syncer_bond_atto)
    assert base.burned() == spec.syncer_bond_atto
    assert a.syncer_info() == (stake_a - spec.syncer_bond_atto, 0, True, 0)
    assert b.syncer_info().locked == spec.syncer_bond_atto
    assert base.get_run(tid).syncer == b.address


def test_stalled_run_is_cancelled_by_anyone_when_no_syncer_can_take_it(fresh_stack):
    """Own chain, one candidate: syncer A is elected and stays silent; nobody else can be elected,
    so once A is replaceable anyone's ``cancel_stalled_run`` ends the run (protocol v3): A's bond
    burned, the trainer's stake and (no round committed) the whole pool credited back."""
    base, sponsor, a, trainer, outsider, spec, tid = _run_with_one_elected_syncer(fresh_stack)
    with pytest.raises(ChainRevert) as ei:
        outsider.cancel_stalled_run(tid)
    assert ei.value.error_name == "Registry__SyncerStillActive"
    run = base.get_run(tid)
    base.mine(seconds=run.syncer_replaceable_at - base.block_timestamp() + 1)
    pool = run.reward_pool_left
    ev = outsider.cancel_stalled_run(tid).event("StalledRunCancelled")
    assert (ev["committedRounds"], ev["trainersPot"], ev["sponsorRefund"], ev["syncerBondBurned"]) == (
        0, 0, pool, spec.syncer_bond_atto)
    assert base.get_run(tid).status == RunStatus.CANCELLED
    assert base.burned() == spec.syncer_bond_atto
    assert base.withdrawable(trainer.address) == 100 * TOKEN
    assert base.withdrawable(sponsor.address) == pool
    with pytest.raises(ChainRevert) as ei:
        a.claim_syncer_fee(tid)  # a Cancelled run's fees are claimable; A committed no round
    assert ei.value.error_name == "Registry__NoSyncerFee"

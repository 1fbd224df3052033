"""The trainer and syncer daemons on a real devnet (anvil + IPFS node + the compiled contracts):
a full run seals with every trainer credited; invalid payloads are left out with their reason in
the transcript, and a forced one is proven invalid and slashed with the contract's reason; a
syncer stopped mid-run resumes (from its state file, or by replaying the transcripts) and loses
no submission."""

from __future__ import annotations

import hashlib
import logging
import re
import time

import pytest

from roles_stack import (
    TRAINERS,
    accepted_counts,
    assert_tokens_conserved,
    events,
    post_small_task,
    read_jsonl,
    syncer_daemon,
    trainer_daemon,
)
from tenzro_operator.chain import RunStatus
from tenzro_operator.root_flow import committed_rounds, cumulative_credits
from tenzro_operator.transcript import RoundTranscript

pytestmark = pytest.mark.timeout(300)


def _rounds(client, tid) -> dict[int, dict]:
    """``round -> RoundCommitted args`` of the run's committed rounds."""
    return committed_rounds(client, tid, client.deployment.deploy_block, client.get_run(tid).max_rounds)


def _transcripts(dev, client, tid) -> list[RoundTranscript]:
    """Every committed round's transcript; the weights blobs it names hash to its SHA-256s."""
    ipfs, out = dev.ipfs(), []
    for r, a in sorted(_rounds(client, tid).items()):
        tr = RoundTranscript.parse(ipfs.cat(a["transcriptCid"]), bytes(a["transcriptHash"]))
        for cid, h in zip(*tr.weights_refs()):
            assert hashlib.sha256(ipfs.cat(cid)).digest() == h
        out.append(tr)
    return out


def _conserved(client, tid, enrolled: int) -> None:
    """`assert_tokens_conserved`, and the pool never grew by a slash: what claims may take is the
    pool less the syncer's fees."""
    run = client.get_run(tid)
    assert events(client, tid, "RootRunSealed")[0]["args"]["claimable"] + run.syncer_fees_accrued == run.reward_pool
    assert_tokens_conserved(client, tid, enrolled)


@pytest.mark.slow
def test_full_run_seals_with_every_trainer_credited(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=3, quorum=2, fragments=2, rounds=2)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer"))
    for i, idx in enumerate(TRAINERS[:3]):
        runner.start(f"trainer{i}", trainer_daemon(dev, idx, tid, tmp_path / f"t{i}"))
    results = runner.join(240)
    assert results == {"syncer": 0, "trainer0": 0, "trainer1": 0, "trainer2": 0}

    client = dev.client()
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    # every trainer: both fragments accepted in both rounds, nothing slashed
    assert set(accepted_counts(client, tid).values()) == {4}
    assert all(client.trainer_stats(tid, dev.client(idx).address).slashed == 0 for idx in TRAINERS[:3])
    # the syncer was elected once the run trained, earned one fee per round and claimed it after the seal
    fee_per_round = run.reward_pool * run.syncer_fee_bps // 10_000 // run.max_rounds
    assert run.syncer_fees_accrued == 2 * fee_per_round > 0
    syncer = runner.daemons["syncer"]
    assert syncer.summary == {"rounds_finalized": 2, "runs_sealed": 1, "fees_claimed_atto": 2 * fee_per_round,
                              "weights_challenges_answered": 0, "unrevealed_slashed": 0}
    assert client.syncer_fee_of(tid, syncer.account.address) == 0
    claimed = events(client, tid, "SyncerFeeClaimed")
    assert [(e["args"]["syncer"], e["args"]["amount"]) for e in claimed] == [(syncer.account.address,
                                                                              2 * fee_per_round)]
    elected = events(client, tid, "SyncerElected")[0]
    assert elected["block_number"] > events(client, tid, "RoundOpened")[0]["block_number"]
    # conservation: claims + refunds + dust + syncer fees == reward pool + stakes (nothing slashed)
    _conserved(client, tid, 3)
    assert len(events(client, tid, "RewardClaimed")) == 3 and events(client, tid, "StakeBurned") == []
    # the sealed receipt verifies at the TRAINING_VERIFY address
    receipt = client.get_receipt(tid)
    assert client.verify_receipt(receipt.serialized, receipt.run_root)
    _transcripts(dev, client, tid)
    # the syncer's round log (benchmark input) and the trainers' logs
    rounds = read_jsonl(tmp_path / "syncer" / "syncer-rounds.jsonl")
    assert [r["round"] for r in rounds] == [0, 1]
    for r in rounds:
        assert r["accepted"] == 6 and r["rejected"] == 0 and r["quorum_met"]
        for k in ("wall_s", "fetch_s", "validate_s", "aggregate_s", "pin_s", "chain_s", "heldout_loss"):
            assert r[k] >= 0
    assert rounds[-1]["heldout_loss"] < rounds[0]["heldout_loss_before"]
    for i in range(3):
        tr = read_jsonl(tmp_path / f"t{i}" / "trainer-rounds.jsonl")
        assert [r["round"] for r in tr] == [0, 1] and all(r["inner_s"] > 0 and r["submit_s"] > 0 for r in tr)
        assert (tmp_path / f"t{i}" / "trainer-state.pt").exists()
        m = runner.daemons[f"trainer{i}"].metrics
        task = "0x" + tid.hex()
        assert m.submitted.labels(task=task)._value.get() == 4 and m.accepted.labels(task=task)._value.get() == 4
        assert m.missed_rounds.labels(task=task)._value.get() == 0
        _assert_labelled(m, task, "tenzro_trainer_")
    sm = syncer.metrics
    assert sm.submissions.labels(task="0x" + tid.hex())._value.get() == 12  # 3 trainers x 2 fragments x 2 rounds
    _assert_labelled(sm, "0x" + tid.hex(), "tenzro_syncer_")
    # an off-chain replay (verify-receipt) reproduces every aggregate, root and the run root
    from tenzro_operator.replay import verify_receipt

    report = verify_receipt(client, dev.ipfs(), tid)
    assert report.ok, report.first_mismatch
    # a restarted trainer is idempotent: no second enrollment, no submission, exits 0
    enrolled_before = len(events(client, tid, "TrainerEnrolled"))
    again = trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0")
    assert again.run() == 0
    assert len(events(client, tid, "TrainerEnrolled")) == enrolled_before
    assert again.summary["submitted"] == 0


def _assert_labelled(metrics, task: str, prefix: str) -> None:
    """Every sample of the role's per-run series (``prefix``...) in the exposition text carries
    ``task="<task>"``, and there is at least one (metrics present and labelled)."""
    from prometheus_client import generate_latest

    samples = [ln for ln in generate_latest(metrics.registry).decode().splitlines()
               if ln.startswith(prefix)]
    assert samples, f"no {prefix}* samples"
    bad = [ln for ln in samples if f'task="{task}"' not in ln]
    assert not bad, bad


@pytest.mark.slow
def test_invalid_payloads_are_left_out_and_forced_ones_proven_and_slashed(dev, runner, tmp_path, caplog):
    """Off-chain, an invalid payload only goes uncredited (its reason in the transcript); forced
    on-chain, it binds the syncer, which proves it invalid with evidence: the trainer is slashed with
    the contract's reason (NonFinite opening the chunk; NormOutlier against the previous round's
    accepted sums)."""
    caplog.set_level(logging.WARNING, logger="tenzro.syncer")
    tid = post_small_task(dev, trainers=5, quorum=2, fragments=2, rounds=2)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer"))
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0"))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    runner.start("nan", trainer_daemon(dev, TRAINERS[2], tid, tmp_path / "t2", force_onchain=True,
                                       fault={"kind": "nan", "rounds": [1]}))
    runner.start("wrong", trainer_daemon(dev, TRAINERS[3], tid, tmp_path / "t3",
                                         fault={"kind": "wrong_hash", "rounds": [0], "fragments": [1]}))
    runner.start("big", trainer_daemon(dev, TRAINERS[4], tid, tmp_path / "t4", force_onchain=True,
                                       fault={"kind": "scale100", "rounds": [1], "fragments": [0]}))
    results = runner.join(240)
    assert all(v == 0 for v in results.values()), results

    client = dev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    nan_addr, wrong_addr = dev.client(TRAINERS[2]).address, dev.client(TRAINERS[3]).address
    big_addr = dev.client(TRAINERS[4]).address
    slashes = [(e["args"]["trainer"], e["args"]["reason"], e["args"]["round"], e["args"]["fragment"])
               for e in events(client, tid, "TrainerSlashed")]
    # SlashReason (ITrainingRegistry): 3 NonFinite and 4 NormOutlier, proven with evidence on the
    # forced submissions; the off-chain payload whose bytes do not hash to its payloadHash is not slashed
    assert sorted(slashes) == sorted([(nan_addr, 3, 1, 0), (nan_addr, 3, 1, 1), (big_addr, 4, 1, 0)])
    syncer_addr = client.get_run(tid).syncer
    proofs = events(client, tid, "InvalidProven")
    assert {e["args"]["prover"] for e in proofs} == {syncer_addr}
    assert sum(e["args"]["bounty"] for e in proofs) == sum(e["args"]["slashed"] // 10 for e in proofs) > 0
    assert events(client, tid, "AvailabilityChallenged") == []
    accepted = accepted_counts(client, tid)
    assert accepted[nan_addr] == 2  # round 0 only
    assert accepted[wrong_addr] == 3  # everything but (round 0, fragment 1)
    assert accepted[big_addr] == 3  # everything but (round 1, fragment 0)
    # the rejections are in the transcripts with their reasons...
    reasons = {}
    for tr in _transcripts(dev, client, tid):
        for fr in tr.fragments:
            for rej in fr.rejected:
                reasons[(tr.round, fr.fragment, rej.trainer)] = rej.reason
            assert all(s.trainer != nan_addr.lower() for s in fr.accepted) or tr.round == 0
    assert reasons == {(1, 0, nan_addr.lower()): "NonFinite", (1, 1, nan_addr.lower()): "NonFinite",
                       (0, 1, wrong_addr.lower()): "HashMismatch", (1, 0, big_addr.lower()): "NormOutlier"}
    # ...and in the log, with trainer, fragment and reason
    text = caplog.text
    assert f"trainer={wrong_addr} fragment=1" in text and "reason=HashMismatch" in text
    assert f"trainer={nan_addr} fragment=0" in text and "reason=NonFinite" in text
    assert f"trainer={big_addr} fragment=0" in text and "reason=NormOutlier" in text
    # slashes are burned but for the prover's capped bounty: every slash has its StakeBurned of 90 %
    slashed = [e["args"]["amount"] for e in events(client, tid, "TrainerSlashed")]
    burned = events(client, tid, "StakeBurned")
    assert sorted(e["args"]["amount"] for e in burned) == sorted(a - a // 10 for a in slashed) and sum(slashed) > 0
    assert {e["args"]["from"] for e in burned} == {nan_addr, big_addr}
    trainers = [dev.client(i).address for i in TRAINERS[:5]]
    assert sum(client.trainer_stats(tid, t).slashed for t in trainers) == sum(slashed)
    # conservation: the pool never grew by a slash; nothing left held
    _conserved(client, tid, 5)
    assert client.get_run(tid).open_challenges == 0 and client.challenge_bonds_held() == 0


@pytest.mark.slow
def test_syncer_restarts_resume_without_losing_submissions(dev, runner, tmp_path, caplog):
    """Syncer A commits round 0 and exits; the trainers deliver round 1 while no syncer runs (they
    publish again every poll until the round is committed); syncer B (same state file) takes them
    in, commits round 1 and exits; the state file is deleted and syncer C rebuilds rounds 0-1 from
    the transcripts, commits round 2 and seals."""
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=3)
    sdir = tmp_path / "syncer"
    for i, idx in enumerate(TRAINERS[:2]):
        runner.start(f"trainer{i}", trainer_daemon(dev, idx, tid, tmp_path / f"t{i}"))
    client = dev.client()
    a = syncer_daemon(dev, tid, sdir, exit_after_rounds=1)
    assert a.run() == 0
    assert client.get_run(tid).current_round == 1
    # round 1's submissions are delivered while no syncer runs
    me = [dev.client(i).address for i in TRAINERS[:2]]
    deadline = time.monotonic() + 60
    while not all(1 in runner.daemons[f"trainer{i}"]._outbox for i in range(2)):
        assert time.monotonic() < deadline, "trainers did not deliver round 1"
        time.sleep(0.3)
    caplog.set_level(logging.INFO, logger="tenzro.syncer")
    b = syncer_daemon(dev, tid, sdir, exit_after_rounds=1)
    assert b.run() == 0
    assert b.history[0]["round"] == 1 and b.history[0]["accepted"] == 4  # nothing lost
    # B read round 1's forced submissions from the block round 1 opened in (round 0's commit),
    # not from the deploy block
    start = int(re.search(r"round 1: reading submissions from block (\d+)", caplog.text)[1])
    round0_block = events(client, tid, "RoundCommitted")[0]["block_number"]
    assert dev.client().deployment.deploy_block < start <= round0_block
    state_files = list(sdir.glob("syncer-*.pt"))
    assert len(state_files) == 1
    state_files[0].unlink()
    c = syncer_daemon(dev, tid, sdir)
    assert c.run() == 0
    assert "rebuilt round 0 from its transcript" in caplog.text
    assert "rebuilt round 1 from its transcript" in caplog.text
    assert [h["round"] for h in c.history] == [2]
    results = runner.join(120)
    assert results == {"trainer0": 0, "trainer1": 0}
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    assert set(accepted_counts(client, tid).values()) == {6}
    receipt = client.get_receipt(tid)
    assert client.verify_receipt(receipt.serialized, receipt.run_root)
    _transcripts(dev, client, tid)


@pytest.mark.slow
def test_absent_trainer_earns_nothing_and_round_closes_at_the_deadline(dev, runner, tmp_path):
    """K = M = 3 but one enrolled trainer never delivers: the quorum cannot be met, so the syncer
    commits after the round deadline with what arrived; the absent trainer has no credit (and
    no share of the pool) and the run still seals."""
    tid = post_small_task(dev, trainers=3, quorum=3, fragments=2, rounds=1)
    absent = dev.client(TRAINERS[2])
    absent.enroll_trainer(tid, 100 * 10**18, "did:tenzro:machine:absent")
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer"))
    for i, idx in enumerate(TRAINERS[:2]):
        runner.start(f"trainer{i}", trainer_daemon(dev, idx, tid, tmp_path / f"t{i}"))
    results = runner.join(120)
    assert all(v == 0 for v in results.values()), results
    client = dev.client()
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    (com,) = events(client, tid, "RoundCommitted")
    assert sorted(int(b) for b in com["args"]["acceptedBitmaps"]) == [0, 0b11, 0b11]  # quorum not met
    assert client.block_timestamp(com["block_number"]) > events(client, tid, "RoundOpened")[0]["args"]["deadline"]
    accepted = accepted_counts(client, tid)
    assert accepted[absent.address] == 0 and [accepted[dev.client(i).address] for i in TRAINERS[:2]] == [2, 2]
    credits = cumulative_credits(_rounds(client, tid), run.fragment_sizes, 3)
    assert credits[client.trainers_of(tid).index(absent.address)] == 0
    assert absent.address not in {e["args"]["trainer"] for e in events(client, tid, "RewardClaimed")}


@pytest.mark.slow
def test_enrollment_deadline_opens_a_short_run_and_cancels_one_below_quorum(dev, runner, tmp_path):
    """Run A: M=3, K=2, only two trainers come; once its enrollment window has passed the syncer
    opens round 0 itself (closeEnrollment), is then elected (there is no election while a run
    enrolls) and the run seals. Run B: K=2, one trainer comes; after its window that trainer
    cancels the run (anyone may) and gets its stake back."""
    short = post_small_task(dev, trainers=3, quorum=2, fragments=2, rounds=1, enrollment_window_ms=20_000)
    lonely = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1, enrollment_window_ms=20_000)
    runner.start("syncer", syncer_daemon(dev, short, tmp_path / "syncer"))
    for i, idx in enumerate(TRAINERS[:2]):
        runner.start(f"trainer{i}", trainer_daemon(dev, idx, short, tmp_path / f"t{i}"))
    loner = dev.client(TRAINERS[2])
    owed = loner.withdrawable()
    runner.start("lonely", trainer_daemon(dev, TRAINERS[2], lonely, tmp_path / "t2"))
    results = runner.join(200)
    assert all(v == 0 for v in results.values()), results

    client = dev.client()
    a = client.get_run(short)
    assert a.status == RunStatus.SEALED and (a.enrolled_count, a.trainer_count) == (2, 3)
    opened = events(client, short, "RoundOpened")[0]
    assert client.block_timestamp(opened["block_number"]) > a.enrollment_deadline  # not before the deadline
    assert events(client, short, "SyncerElected")[0]["block_number"] > opened["block_number"]
    assert runner.daemons["syncer"].summary["fees_claimed_atto"] == a.syncer_fees_accrued > 0
    b = client.get_run(lonely)
    assert b.status == RunStatus.CANCELLED
    cancelled = events(client, lonely, "TaskCancelled")[0]
    assert client.block_timestamp(cancelled["block_number"]) > b.enrollment_deadline
    assert loner.withdrawable() == owed + 100 * 10**18  # its whole stake back

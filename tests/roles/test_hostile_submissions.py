"""Hostile submissions against the syncer daemon on a real devnet (issue 14: H1, M6, M8): every
fault of a submission is that submission's rejection, never a reason for the syncer to halt; the
run finalizes and seals, the faulty trainers are slashed where the fault is provable (here: an
availability challenge nobody answers, PROTOCOL.md §4), the honest ones lose nothing, and tokens
are conserved."""

from __future__ import annotations

import hashlib
import os

import pytest

from roles_stack import TRAINERS, events, post_small_task, syncer_daemon, trainer_daemon
from stack import TOKEN, wait_until
from tenzro_operator.chain import RunStatus, SignedPayload
from tenzro_operator.ipfs import Cid, kubo_cid
from tenzro_operator.transcript import RoundTranscript

pytestmark = pytest.mark.timeout(300)

BLAKE2B_RAW_CID = str(Cid(1, 0x55, 0xB220, hashlib.blake2b(b"x", digest_size=32).digest()))


@pytest.mark.slow
def test_bad_cids_unavailable_and_copied_payloads_are_rejected_and_the_run_seals(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=4, quorum=2, fragments=2, rounds=1, challenge_window_ms=3_000)
    a, b = dev.client(TRAINERS[2]), dev.client(TRAINERS[3])  # the attackers, enrolled by hand
    for t in (a, b):
        t.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{t.address}")
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=60.0, evaluate=False))
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0"))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    client = dev.client()
    wait_until(lambda: client.get_run(tid).status == RunStatus.TRAINING, 120, "round 0")
    zero = b"\x00" * 32

    def junk(cid: str) -> SignedPayload:
        return SignedPayload(os.urandom(32), 0x3F800000, cid, zero)

    # H1: a CID that is not one, and one with a multihash this operator can not verify
    a.submit_outer_gradient(tid, 0, 0, junk("not-a-cid"))
    a.submit_outer_gradient(tid, 0, 1, junk(BLAKE2B_RAW_CID))
    # M6: a well-formed CID nobody can serve
    b.submit_outer_gradient(tid, 0, 0, junk(kubo_cid(os.urandom(1000))))
    # M8: a copy of an honest trainer's payload (its CID and hash, signed by the copier)
    honest = dev.client(TRAINERS[0]).address
    ev = wait_until(lambda: next((e for e in events(client, tid, "GradientSubmitted")
                             if e["args"]["trainer"] == honest and e["args"]["fragment"] == 1), None),
               180, "an honest submission to copy")
    copied = SignedPayload.from_event(ev["args"])
    b.submit_outer_gradient(tid, 0, 1, SignedPayload(copied.payload_root, copied.payload_sumsq, copied.cid,
                                                     copied.payload_hash))

    results = runner.join(240)
    assert results == {"syncer": 0, "honest0": 0, "honest1": 0}, results
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    slashes = sorted((e["args"]["trainer"], e["args"]["fragment"], e["args"]["reason"])
                     for e in events(client, tid, "TrainerSlashed"))
    # none of them is provable from its bytes, so the syncer challenged each for availability; the
    # attackers did not answer, and the syncer expired the challenges before the seal (5 = Unavailable)
    assert slashes == sorted([(a.address, 0, 5), (a.address, 1, 5), (b.address, 0, 5), (b.address, 1, 5)])
    assert len(events(client, tid, "AvailabilityChallenged")) == 4
    for idx in TRAINERS[:2]:
        st = client.trainer_stats(tid, dev.client(idx).address)
        assert (st.accepted, st.slashed) == (2, 0)
    ipfs = dev.ipfs()
    fin = events(client, tid, "RoundFinalized")[0]["args"]["commit"]
    tr = RoundTranscript.parse(ipfs.cat(fin["transcriptCid"]), bytes(fin["transcriptHash"]))
    rej = {(fr.fragment, r.trainer): (r.reason, r.detail) for fr in tr.fragments for r in fr.rejected}
    assert rej[(0, a.address.lower())][0] == "Malformed" and "not a valid CID" in rej[(0, a.address.lower())][1]
    assert rej[(1, a.address.lower())][0] == "Malformed" and "0xb220" in rej[(1, a.address.lower())][1]
    assert rej[(0, b.address.lower())][0] == "Unavailable"
    assert rej[(1, b.address.lower())][0] == "Malformed" and "trainer" in rej[(1, b.address.lower())][1]
    # conservation: payouts + syncer fees + burned == pool + the four stakes
    payouts = events(client, tid, "PayoutCredited")
    credited = sum(p["args"]["reward"] + p["args"]["stakeRefund"] for p in payouts)
    burned = sum(e["args"]["amount"] for e in events(client, tid, "TrainerSlashed"))
    assert burned > 0
    assert credited + run.syncer_fees_accrued + burned == run.reward_pool + 4 * 100 * TOKEN


@pytest.mark.slow
def test_a_submission_landing_just_before_the_finalize_is_collected_not_a_halt(dev, runner, tmp_path):
    """A trainer's submission mined after the syncer's last read and before its finalize (the
    race every straggler can win, and a lagging node widens): the registry refuses the commit
    (``Registry__SubmissionOmitted``); the syncer reads the late submission, handles it (here an
    unservable payload: rejected and challenged) and finalizes again, instead of halting."""
    tid = post_small_task(dev, trainers=3, quorum=2, fragments=2, rounds=1, challenge_window_ms=3_000)
    late = dev.client(TRAINERS[2])
    late.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{late.address}")
    sync = syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, fetch_timeout_s=1.0, fetch_retries=1)
    original, calls = sync.chain.finalize_round, []

    def finalize_after_a_late_submission(commit):
        if not calls:  # the first attempt: the straggler's transaction is mined just before it
            late.submit_outer_gradient(tid, 0, 1, SignedPayload(os.urandom(32), 0x3F800000,
                                                                kubo_cid(os.urandom(1000)), b"\x00" * 32))
        calls.append(commit.round)
        return original(commit)

    sync.chain.finalize_round = finalize_after_a_late_submission
    runner.start("syncer", sync)
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0"))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    assert runner.join(240) == {"syncer": 0, "honest0": 0, "honest1": 0}
    client = dev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    assert calls == [0, 0]  # refused once, then committed with the late submission handled
    slashes = [(e["args"]["trainer"], e["args"]["fragment"]) for e in events(client, tid, "TrainerSlashed")]
    assert slashes == [(late.address, 1)]  # its challenge expired unanswered
    for idx in TRAINERS[:2]:
        st = client.trainer_stats(tid, dev.client(idx).address)
        assert (st.accepted, st.slashed) == (2, 0)

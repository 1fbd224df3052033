"""Hostile forced submissions against the syncer daemon on a real devnet (issue 14: H1, M6): every
fault of a submission is that submission's rejection, never a reason for the syncer to halt; the
run commits and seals, the faulty trainers are slashed where the fault is provable (here: a
whole-payload availability challenge nobody answers, PROTOCOL.md §4), the honest ones lose
nothing, and tokens are conserved. (A copy of an honest payload, M8, cannot be forced in the
one flow: payloads are public only after the commit phase; the copycat is
tests/roles/test_root_flow_daemons.py's.)"""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest

from roles_stack import (
    TRAINERS,
    accepted_counts,
    assert_tokens_conserved,
    events,
    post_small_task,
    syncer_daemon,
    trainer_daemon,
)
from stack import TOKEN, force_commit, wait_until
from tenzro_operator.chain import RunStatus, SignedPayload
from tenzro_operator.ipfs import Cid, kubo_cid
from tenzro_operator.root_flow import RevealMessage
from tenzro_operator.transcript import RoundTranscript

pytestmark = pytest.mark.timeout(300)

BLAKE2B_RAW_CID = str(Cid(1, 0x55, 0xB220, hashlib.blake2b(b"x", digest_size=32).digest()))


def _junk(cid: str) -> SignedPayload:
    return SignedPayload(os.urandom(32), 0x3F800000, cid, b"\x00" * 32)


def _reveal_after_the_phase(client, trainer, tid: bytes, m: RevealMessage, delay_s: float = 0.0) -> None:
    closes = client.commit_phase(tid)[0]
    wait_until(lambda: client.block_timestamp("latest") > closes or client.mine() or False, 60, "the commit phase")
    time.sleep(delay_s)
    trainer.submit_outer_gradient(tid, 0, m.fragment, m.signed_payload())


@pytest.mark.slow
def test_bad_cids_and_unavailable_forced_payloads_are_rejected_and_the_run_seals(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=4, quorum=2, fragments=2, rounds=1, grace_window_ms=30_000)
    a, b = dev.client(TRAINERS[2]), dev.client(TRAINERS[3])  # the attackers, enrolled by hand
    for t in (a, b):
        t.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{t.address}")
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=60.0, evaluate=False))
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0"))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    client = dev.client()
    wait_until(lambda: client.get_run(tid).status == RunStatus.TRAINING, 120, "round 0")
    # H1: a CID that is not one, and one with a multihash this operator can not verify;
    # M6: a well-formed CID nobody can serve. Committed in the commit phase, revealed after it.
    forced = [(a, force_commit(a, tid, 0, 0, _junk("not-a-cid"))),
              (a, force_commit(a, tid, 0, 1, _junk(BLAKE2B_RAW_CID))),
              (b, force_commit(b, tid, 0, 0, _junk(kubo_cid(os.urandom(1000)))))]
    for t, m in forced:
        _reveal_after_the_phase(client, t, tid, m)

    results = runner.join(240)
    assert results == {"syncer": 0, "honest0": 0, "honest1": 0}, results
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    slashes = sorted((e["args"]["trainer"], e["args"]["fragment"], e["args"]["reason"])
                     for e in events(client, tid, "TrainerSlashed"))
    # none of them is provable from its bytes, so the syncer demanded each whole; the attackers did
    # not answer, and the syncer expired the challenges before it committed (5 = Unavailable)
    assert slashes == sorted([(a.address, 0, 5), (a.address, 1, 5), (b.address, 0, 5)])
    assert len(events(client, tid, "AvailabilityChallenged")) == 3
    accepted = accepted_counts(client, tid)
    for idx in TRAINERS[:2]:
        who = dev.client(idx).address
        assert (accepted[who], client.trainer_stats(tid, who).slashed) == (2, 0)
    ipfs = dev.ipfs()
    (com,) = events(client, tid, "RoundCommitted")
    tr = RoundTranscript.parse(ipfs.cat(com["args"]["transcriptCid"]), bytes(com["args"]["transcriptHash"]))
    rej = {(fr.fragment, r.trainer): (r.reason, r.detail) for fr in tr.fragments for r in fr.rejected}
    assert rej[(0, a.address.lower())][0] == "Malformed" and "not a valid CID" in rej[(0, a.address.lower())][1]
    assert rej[(1, a.address.lower())][0] == "Malformed" and "0xb220" in rej[(1, a.address.lower())][1]
    assert rej[(0, b.address.lower())][0] == "Unavailable"
    # conservation: refunds + claims + syncer fees + slashes + dust == pool + the four stakes
    assert sum(e["args"]["amount"] for e in events(client, tid, "TrainerSlashed")) > 0
    assert_tokens_conserved(client, tid, 4)


@pytest.mark.slow
def test_a_forced_reveal_landing_late_holds_the_commit_until_it_is_handled(dev, runner, tmp_path):
    """A trainer commits on-chain in the commit phase and reveals only a second after it, while the
    syncer has every off-chain submission in hand (the race every straggler can win, and a lagging
    node widens): the registry takes no commit while a commitment is unrevealed, and a reveal left
    out would be an omission anyone proves. The syncer waits for it, reads it, handles it (here an
    unservable payload: demanded whole, unanswered, expired and slashed) and commits, instead of
    committing without it or halting."""
    tid = post_small_task(dev, trainers=3, quorum=2, fragments=2, rounds=1, grace_window_ms=30_000)
    late = dev.client(TRAINERS[2])
    late.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{late.address}")
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, fetch_timeout_s=1.0,
                                         fetch_retries=1))
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0"))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    client = dev.client()
    wait_until(lambda: client.get_run(tid).status == RunStatus.TRAINING, 120, "round 0")
    m = force_commit(late, tid, 0, 1, _junk(kubo_cid(os.urandom(1000))))
    t = threading.Thread(target=_reveal_after_the_phase, args=(client, late, tid, m, 1.0), daemon=True)
    t.start()
    assert runner.join(240) == {"syncer": 0, "honest0": 0, "honest1": 0}
    t.join(5)
    assert client.get_run(tid).status == RunStatus.SEALED
    (revealed,) = events(client, tid, "GradientSubmitted")
    (com,) = events(client, tid, "RoundCommitted")
    assert com["block_number"] > revealed["block_number"]  # committed only once the reveal was in
    slashes = [(e["args"]["trainer"], e["args"]["fragment"]) for e in events(client, tid, "TrainerSlashed")]
    assert slashes == [(late.address, 1)]  # its whole-payload challenge expired unanswered
    assert not events(client, tid, "RoundProvenWrong")  # nothing left out: no omission to prove
    accepted = accepted_counts(client, tid)
    for idx in TRAINERS[:2]:
        who = dev.client(idx).address
        assert (accepted[who], client.trainer_stats(tid, who).slashed) == (2, 0)


@pytest.mark.slow
def test_a_forced_commitment_never_revealed_is_slashed_once_the_round_is_committed(dev, runner, tmp_path):
    """Commit never reveal (issue #23): a trainer commits a forced submission on-chain and never
    reveals it, so the round cannot commit before its deadline. The syncer commits after the
    deadline and then slashes the lapsed commitment (``slashUnrevealed``, reason 6, burned); the
    honest trainers lose nothing, the run seals and tokens are conserved."""
    tid = post_small_task(dev, trainers=3, quorum=2, fragments=2, rounds=1, grace_window_ms=20_000)
    silent = dev.client(TRAINERS[2])
    silent.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{silent.address}")
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False))
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0"))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    client = dev.client()
    wait_until(lambda: client.get_run(tid).status == RunStatus.TRAINING, 120, "round 0")
    force_commit(silent, tid, 0, 1, _junk(kubo_cid(os.urandom(1000))))
    assert client.commit_phase(tid)[1] == 1  # one commitment the early commit waits for

    assert runner.join(240) == {"syncer": 0, "honest0": 0, "honest1": 0}
    assert client.get_run(tid).status == RunStatus.SEALED
    (com,) = events(client, tid, "RoundCommitted")
    assert com["args"]["round"] == 0 and not events(client, tid, "GradientSubmitted")
    assert client.get_round(tid, 0).finalized_at > client.get_round(tid, 0).opened_at + 20  # after the deadline
    slashes = [(e["args"]["trainer"], e["args"]["fragment"], e["args"]["reason"], e["args"]["amount"])
               for e in events(client, tid, "TrainerSlashed")]
    assert slashes == [(silent.address, 1, 6, 100 * TOKEN * 5 // 100)]
    assert client.trainer_stats(tid, silent.address).slashed == 5 * TOKEN
    assert runner.daemons["syncer"].summary["unrevealed_slashed"] == 1
    for idx in TRAINERS[:2]:
        assert client.trainer_stats(tid, dev.client(idx).address).slashed == 0
    assert_tokens_conserved(client, tid, 3)

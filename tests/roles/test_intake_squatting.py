"""Commitment squatting (issue #24) on a real devnet and IPFS node: as round 0 opens, a keyless
outsider sends `MAX_COMMITMENTS` made-up commitments per trainer and fragment, over pubsub and the
syncer's JSON-RPC endpoint, and as many signed with its own key naming the trainers. Against
cb6ae44 they filled every slot, the trainers' real commitments were refused
(``too_many_commitments``) and their reveals opened nothing: the round was lost to them. Now only
a commitment signed by the trainer it names is kept, and the round's every submission reaches
the syncer's validation. A stand-in syncer's intake (issue 25) keeps the same, and only the open
round's."""

from __future__ import annotations

import secrets
from dataclasses import replace

import pytest

from stack import wait_until
from tenzro_operator.chain import RunStatus, SignedPayload
from tenzro_operator.ipfs.pubsub import submission_topic
from tenzro_operator.roles.delivery import post_messages
from tenzro_operator.root_flow import MAX_COMMITMENTS, CommitMessage, RevealMessage

pytestmark = pytest.mark.timeout(300)

OUTSIDER = 8  # funded, enrolled nowhere


def _reveal(client, tid: bytes, f: int, base: bytes, trainer: str | None = None) -> RevealMessage:
    payload = SignedPayload(bytes([f + 1]) * 32, 0x3F800000, f"bafkreal{f}", bytes([f + 2]) * 32)
    signed = client.sign_outer_gradient(tid, 0, f, payload, base_root=base)
    return RevealMessage.of(tid, 0, f, trainer or client.address, base, signed)


def _commit(client, m: RevealMessage) -> CommitMessage:
    return CommitMessage.signed(client.account, client.chain_id, client.registry.address, m)


def test_a_squatted_round_is_no_longer_lost(dev, collecting):
    s, run, tid, trainers = collecting
    url, ipfs, topic = s._endpoint.url, dev.ipfs(), submission_topic(tid)
    outsider = dev.client(OUTSIDER)

    # the squat: made-up words and signatures, and words signed by the outsider, naming each trainer
    squat = [CommitMessage(task="0x" + tid.hex(), round=0, fragment=f, trainer=t.address.lower(),
                           commitment="0x" + secrets.token_hex(32), signature="0x" + secrets.token_hex(65))
             for t in trainers for f in (0, 1) for _ in range(MAX_COMMITMENTS)]
    squat += [_commit(outsider, _reveal(outsider, tid, f, run.weights_root, trainer=t.address))
              for t in trainers for f in (0, 1)]
    answers = post_messages(url, [m.encode() for m in squat])
    assert {a["data"]["reason"] for a in answers} == {"bad_signature"}
    for m in squat:
        ipfs.pubsub_publish(topic, m.encode())
    s.root_collect(run, s._round.closes)
    assert s._commitments == {}

    # the trainers' own commitments, over pubsub as the daemons publish them: kept
    real = {(t.address.lower(), f): _reveal(t, tid, f, run.weights_root) for t in trainers for f in (0, 1)}
    commits = {k: _commit(t, real[(t.address.lower(), f)]) for t in trainers for f in (0, 1)
               for k in [(t.address.lower(), f)]}

    def all_kept() -> bool:
        for m in commits.values():
            ipfs.pubsub_publish(topic, m.encode())
        s.root_collect(run, s._round.closes)
        return all(commits[(a, f)].word() in s._commitments.get((0, f, a), ()) for a, f in commits)

    wait_until(all_kept, 60, "the trainers' signed commitments kept")

    # after the phase, their reveals open them: every submission of the round is validated
    s.chain.mine(seconds=s._round.closes - s.chain_now() + 1)
    subs: dict = {}  # root_collect offers a reveal again on each call until the round takes it

    def revealed() -> bool:
        for m in real.values():
            ipfs.pubsub_publish(topic, m.encode())
        subs.update({(x.key, x.fragment): x for x in s.root_collect(run, s._round.closes)})
        return len(subs) == len(real)

    wait_until(revealed, 60, "every reveal turned into a submission")
    assert sorted((x.key, x.fragment, x.cid) for x in subs.values()) == sorted(
        (a, f, m.cid) for (a, f), m in real.items())


def test_a_stand_in_keeps_the_open_rounds_deliveries_and_drops_older_rounds(dev, collecting):
    """`root_stand_by` (issue 25), what a syncer that is not the run's keeps while it waits: the
    open round's commitments signed by the trainers they name, read from the topic through the
    serving syncer's intake (so the squat of the test above is refused here too), then the
    reveals that open them; nothing while the run is not Training; a round that closes takes its
    commitments and reveals with it."""
    s, run, tid, trainers = collecting
    ipfs, topic = dev.ipfs(), submission_topic(tid)
    outsider = dev.client(OUTSIDER)
    signer = {t.address.lower(): t for t in trainers}
    real = {(a, f): _reveal(t, tid, f, run.weights_root) for a, t in signer.items() for f in (0, 1)}
    forged = [_commit(outsider, _reveal(outsider, tid, 0, run.weights_root, trainer=t.address)) for t in trainers]

    def kept() -> bool:
        for m in forged + [_commit(signer[a], m) for (a, _), m in real.items()]:
            ipfs.pubsub_publish(topic, m.encode())
        s.root_stand_by(run)
        return all(s._commitments.get((0, f, a)) == {m.commitment()} for (a, f), m in real.items())

    wait_until(kept, 60, "the trainers' commitments kept by the stand-in")
    assert s._open == (0, s.chain.commit_phase(tid)[0])

    def revealed() -> bool:
        for m in real.values():
            ipfs.pubsub_publish(topic, m.encode())
        s.root_stand_by(run)
        return s._reveals == {(0, f, a): m for (a, f), m in real.items()}

    wait_until(revealed, 60, "the trainers' reveals kept by the stand-in")
    s.root_stand_by(replace(run, status=RunStatus.SEALED, current_round=1))  # not Training: nothing changes
    assert s._open[0] == 0 and len(s._reveals) == len(real)
    s.root_stand_by(replace(run, current_round=1))  # round 1 is open: round 0's are dropped
    assert s._open[0] == 1 and s._commitments == {} and s._reveals == {}

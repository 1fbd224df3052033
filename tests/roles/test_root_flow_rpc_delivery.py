"""Root-flow submissions over the syncer's JSON-RPC endpoint (`tenzro_operator.roles.delivery`,
``tenzro_training_deliver`` in operator/RPC.md), on a real devnet and IPFS node: a plain HTTP client
against a syncer collecting a real run (what the intake keeps and what it refuses, with the reason),
the syncer's signed announcement on the syncer topic, and a run whose trainers never publish on
pubsub yet seals, every message having travelled over JSON-RPC."""

from __future__ import annotations

import httpx
import pytest

from roles_stack import SYNCER, TRAINERS, post_small_task, syncer_daemon, trainer_daemon
from stack import free_port, wait_until
from tenzro_operator.chain import RunStatus, SignedPayload
from tenzro_operator.ipfs.pubsub import multibase_encode, syncer_topic
from tenzro_operator.roles.delivery import DELIVER, MAX_BATCH, Announcement, post_messages
from tenzro_operator.root_flow import MAX_COMMITMENTS, MAX_MESSAGE_BYTES, CommitMessage, RevealMessage, committed_rounds

pytestmark = pytest.mark.timeout(400)

OUTSIDER = 8  # funded, enrolled nowhere


def _call(message, id_=1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": DELIVER, "params": {"message": message}}


def _reveal(client, tid: bytes, r: int, f: int, base: bytes, trainer: str | None = None, cid: str = "bafkqaaa"):
    """``client``'s signed submission of fragment f (payload fields made up: the intake fetches
    nothing), naming ``trainer`` (default: the signer)."""
    payload = SignedPayload(bytes([f + 1]) * 32, 0x3F800000, cid, bytes([f + 2]) * 32)
    signed = client.sign_outer_gradient(tid, r, f, payload, base_root=base)
    return RevealMessage.of(tid, r, f, trainer or client.address, base, signed)


def _commit(m: RevealMessage, client) -> CommitMessage:
    """The commitment to ``m`` signed by ``client`` (the trainer, or a forger)."""
    return CommitMessage.signed(client.account, client.chain_id, client.registry.address, m)


def test_the_endpoint_keeps_valid_messages_and_refuses_the_rest_with_a_reason(dev, collecting):
    s, run, tid, (t0, t1) = collecting
    url, key0 = s._endpoint.url, (0, 0, t0.address.lower())
    m0 = _reveal(t0, tid, 0, 0, run.weights_root)

    # a signed commitment and its reveal of an enrolled trainer: accepted, and in the intake's state
    r = httpx.post(url, json=_call(multibase_encode(_commit(m0, t0).encode())))
    assert r.status_code == 200 and r.json() == {"jsonrpc": "2.0", "result": {"accepted": True}, "id": 1}
    assert s._commitments[key0] == {m0.commitment()}
    assert httpx.post(url, json=_call("0x" + m0.encode().hex(), 2)).json()["result"] == {"accepted": True}  # hex too
    assert s._reveals[key0] == m0
    assert post_messages(url, [m0.encode(), _commit(m0, t0).encode()]) == [None, None]  # sent again: still fine

    def refused(message, code: int, reason: str) -> dict:
        err = httpx.post(url, json=_call(message, 7)).json()["error"]
        assert (err["code"], err["data"]["reason"]) == (code, reason), err
        assert "Traceback" not in err["message"]
        return err

    # malformed: not an encoding, bad multibase, not JSON, a bad field, no message at all
    for bad in ("zzz", "u!!!", 42, multibase_encode(b"not json"), multibase_encode(b'{"type":"commit"}')):
        refused(bad, -32602, "malformed")
    err = httpx.post(url, json={"jsonrpc": "2.0", "id": 3, "method": DELIVER, "params": {}}).json()["error"]
    assert err["code"] == -32602 and "message" in err["message"]
    # too large: a message over MAX_MESSAGE_BYTES (the body itself is within the limit)
    err = refused(multibase_encode(b"{" + b" " * MAX_MESSAGE_BYTES + b"}"), -32602, "too_large")
    assert err["data"]["limit_bytes"] == MAX_MESSAGE_BYTES
    # wrong task: another run's message (the endpoint serves this run only)
    other = bytes.fromhex("ab" * 32)
    err = refused(multibase_encode(_reveal(t0, other, 0, 0, run.weights_root).encode()), -32010, "wrong_task")
    assert err["data"]["tasks"] == ["0x" + tid.hex()]
    # a reveal signed by someone else than the trainer it names, opening that trainer's signed
    # commitment: bad signature, and not kept
    real = _reveal(t0, tid, 0, 1, run.weights_root)
    assert post_messages(url, [_commit(real, t0).encode()]) == [None]
    forged = _reveal(t1, tid, 0, 1, run.weights_root, trainer=t0.address)
    err = refused(multibase_encode(forged.encode()), -32003, "bad_signature")
    assert err["data"]["recovered"] == t1.address.lower() and (0, 1, key0[2]) not in s._reveals
    # a commitment signed by someone else than the trainer it names: bad signature, not kept
    squat = _commit(_reveal(t0, tid, 0, 1, run.weights_root, cid="bafksquat"), t1)
    err = refused(multibase_encode(squat.encode()), -32003, "bad_signature")
    assert squat.word() not in s._commitments[(0, 1, key0[2])]
    # a reveal that opens no kept commitment: refused before any signature check
    refused(multibase_encode(_reveal(t0, tid, 0, 1, run.weights_root, cid="bafknone").encode()), -32010,
            "no_commitment")
    # wrong round, a fragment the run does not have, a trainer not enrolled
    refused(multibase_encode(_commit(_reveal(t0, tid, 1, 0, run.weights_root), t0).encode()), -32010, "wrong_round")
    refused(multibase_encode(_commit(_reveal(t0, tid, 0, 5, run.weights_root), t0).encode()), -32010, "bad_fragment")
    outsider = dev.client(OUTSIDER)
    refused(multibase_encode(_commit(_reveal(outsider, tid, 0, 0, run.weights_root), outsider).encode()), -32010,
            "not_enrolled")
    # at most MAX_COMMITMENTS signed commitments per trainer and fragment are kept (its own bound)
    spam = [_commit(_reveal(t1, tid, 0, 0, run.weights_root, cid=f"bafkspam{i}"), t1)
            for i in range(MAX_COMMITMENTS + 1)]
    answers = post_messages(url, [c.encode() for c in spam])
    assert answers[:MAX_COMMITMENTS] == [None] * MAX_COMMITMENTS
    assert answers[-1]["code"] == -32010 and answers[-1]["data"]["reason"] == "too_many_commitments"

    # a batch: answered in order, one failure does not stop the others; a notification is not answered
    m1 = _reveal(t1, tid, 0, 1, run.weights_root)
    batch = [_call(multibase_encode(_commit(m1, t1).encode()), "a"), _call("zzz", "b"),
             {"jsonrpc": "2.0", "method": DELIVER, "params": [multibase_encode(m1.encode())]},  # by position
             {"jsonrpc": "2.0", "id": "d", "method": "tenzro_training_nope"}]
    out = httpx.post(url, json=batch).json()
    assert [a["id"] for a in out] == ["a", "b", "d"]
    assert out[0]["result"] == {"accepted": True}
    assert out[1]["error"]["data"]["reason"] == "malformed" and out[2]["error"]["code"] == -32601
    assert s._reveals[(0, 1, t1.address.lower())] == m1
    over = httpx.post(url, json=[_call("zzz", i) for i in range(MAX_BATCH + 1)]).json()
    assert over["error"]["code"] == -32600
    # a body over the request limit: HTTP 413, never read; not JSON: a parse error
    r = httpx.post(url, content=b"[" + b" " * s.config.submission_rpc_max_request_bytes + b"]")
    assert r.status_code == 413 and r.json()["error"]["code"] == -32001
    assert httpx.post(url, content=b"{nope").json()["error"]["code"] == -32700

    # after the commit phase: a late commitment is refused; the reveals of timely commitments are
    # what the syncer validates, as the ones from pubsub
    s.chain.mine(seconds=s._round.closes - s.chain_now() + 1)
    now = s.chain_now()
    err = refused(multibase_encode(_commit(_reveal(t1, tid, 0, 0, run.weights_root, cid="bafklate"), t1).encode()),
                  -32010, "commit_phase_closed")
    assert err["data"]["closes"] == s._round.closes and err["data"]["now"] >= now
    subs = s.root_collect(run, s._round.closes)
    assert sorted((x.fragment, x.key, x.cid) for x in subs) == [(0, key0[2], m0.cid), (1, t1.address.lower(), m1.cid)]
    assert all(x.offchain for x in subs)


def test_the_syncer_announces_its_endpoint_signed_on_the_syncer_topic(dev, collecting):
    s, run, tid, _ = collecting
    with dev.ipfs().pubsub_subscribe(syncer_topic(tid)) as sub:
        def announced():
            s._announced_at = 0.0
            s.root_serve_endpoint()
            msg = sub.get(timeout_s=1)
            return msg and Announcement.parse(msg.data)

        a = wait_until(announced, 30, "an announcement")
    assert (a.task, a.url, a.syncer) == ("0x" + tid.hex(), s._endpoint.url, dev.client(SYNCER).address.lower())
    assert a.signer() == a.syncer
    assert Announcement(**{**a.model_dump(), "url": "http://evil.example/"}).signer() != a.syncer
    # the endpoint is released with the run: the port no longer answers
    url = s._endpoint.url
    s.root_close()
    with pytest.raises(httpx.TransportError):
        httpx.post(url, json=_call("zzz"), timeout=2)


@pytest.mark.slow
def test_a_run_without_pubsub_delivery_seals_over_json_rpc(dev, runner, tmp_path):
    """Both trainers publish nothing on pubsub (``publish_pubsub: false``): t0 posts to its
    configured ``syncer_rpc`` URL, t1 to the URL the syncer announces on its topic. Both rounds
    are committed with every submission accepted, and the run seals."""
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2, grace_window_ms=16_000,
                          challenge_window_ms=4_000)
    port = free_port()
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=30.0, evaluate=False,
                                         submission_rpc_port=port))
    runner.start("t0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0", publish_pubsub=False,
                                      syncer_rpc=f"http://127.0.0.1:{port}/"))
    runner.start("t1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1", publish_pubsub=False))
    assert runner.join(300) == {"syncer": 0, "t0": 0, "t1": 0}
    client = dev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
    assert [list(rounds[r]["acceptedBitmaps"]) for r in (0, 1)] == [[3, 3], [3, 3]]
    assert runner.daemons["t1"]._ann is not None  # t1 learned the endpoint from the announcement


def test_a_dead_endpoint_is_logged_once_per_round_and_never_stops_the_trainer(dev, tmp_path, caplog):
    import logging

    t = trainer_daemon(dev, TRAINERS[0], None, tmp_path / "t", syncer_rpc=f"http://127.0.0.1:{free_port()}/")
    caplog.set_level(logging.WARNING, logger="tenzro.trainer")
    for r in (0, 0, 0, 1, 1):
        t.deliver_rpc(r, [b"{}"])  # nobody listens: logged, not raised
        assert t._delivery.wait_idle(10)  # posted on the trainer's delivery worker
    dead = [rec.getMessage() for rec in caplog.records if "does not answer" in rec.getMessage()]
    assert len(dead) == 2 and dead[0].startswith("round 0") and dead[1].startswith("round 1")

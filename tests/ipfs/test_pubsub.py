"""Pubsub across two real local IPFS nodes (scripts/ipfs/node.mjs: gossipsub over libp2p TCP, the Kubo
RPC pubsub endpoints) through the Python client and raw HTTP, checked against Kubo's shapes
(core/commands/pubsub.go: topics, data and seqno as multibase base64url `u...`, `sub` as
newline-delimited JSON {"from","data","seqno","topicIDs"}, lists as {"Strings": [...]})."""

from __future__ import annotations

import base64
import http.server
import json
import os
import threading
import time

import httpx
import pytest

from ipfs_fixtures import NodeHandle, node_pair
from stack import free_port, wait_until
from tenzro_operator.errors import IpfsNodeError
from tenzro_operator.errors import IpfsBadTopic, IpfsError, IpfsMessageTooLarge, IpfsPubsubError, IpfsUnavailable
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node
from tenzro_operator.ipfs.pubsub import (
    MAX_MESSAGE_BYTES,
    SUBMISSION_TOPIC,
    SYNCER_TOPIC,
    PubsubMessage,
    PubsubSubscription,
    submission_topic,
    syncer_topic,
)

TASK = bytes(range(32))


def u(text: str | bytes) -> str:
    """Kubo's multibase base64url, computed independently of the client."""
    raw = text.encode() if isinstance(text, str) else text
    return "u" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    """Two nodes, B connected to A through A's advertised swarm address."""
    with node_pair(tmp_path_factory.mktemp("pubsub")) as nodes:
        yield nodes


def subscribed_across(publisher: IpfsClient, topic: str, subscriber_id: str) -> None:
    """Wait until the publisher's node knows the subscriber's node joined ``topic``."""
    wait_until(lambda: subscriber_id in publisher.pubsub_peers(topic), what=f"{subscriber_id} on {topic}")


def test_message_crosses_two_nodes_intact(pair):
    a, b, ca, cb = pair
    topic = submission_topic(TASK)
    payloads = [os.urandom(3000) + b"\n\x00\xff{\"", b"", os.urandom(MAX_MESSAGE_BYTES)]
    with cb.pubsub_subscribe(topic) as sub:
        subscribed_across(ca, topic, b.proc.peer_id)
        t0 = time.monotonic()
        for p in payloads:
            ca.pubsub_publish(topic, p)
        got = [sub.get(timeout_s=5) for _ in payloads]
        took = time.monotonic() - t0
    assert all(m is not None for m in got), got
    assert sorted(m.data for m in got) == sorted(payloads)  # bytes intact, newlines and NULs included
    assert took < 5, f"three messages took {took:.1f} s"
    assert {m.from_peer for m in got} == {a.proc.peer_id}
    assert all(m.topic_ids == (topic,) for m in got)
    assert len({m.seqno for m in got}) == 3 and all(m.seqno > 0 for m in got)
    assert sub.dropped == 0


def test_own_node_delivers_to_its_subscribers(pair):
    # processes sharing one node (the demo) hear each other through it, as with Kubo
    a, _, ca, _ = pair
    topic = syncer_topic(TASK)
    with ca.pubsub_subscribe(topic) as sub:
        ca.pubsub_publish(topic, b"syncer announcement")
        msg = sub.get(timeout_s=5)
    assert msg is not None and msg.data == b"syncer announcement" and msg.from_peer == a.proc.peer_id


def test_other_topics_do_not_leak(pair):
    _, b, ca, cb = pair
    mine, other = submission_topic(TASK), submission_topic(bytes(32))
    with cb.pubsub_subscribe(mine) as sub, cb.pubsub_subscribe(other) as sub_other:
        subscribed_across(ca, mine, b.proc.peer_id)
        subscribed_across(ca, other, b.proc.peer_id)
        ca.pubsub_publish(other, b"for the other task")
        ca.pubsub_publish(mine, b"for this task")
        assert sub.get(timeout_s=5).data == b"for this task"
        assert sub_other.get(timeout_s=5).data == b"for the other task"
        assert sub.get(timeout_s=0.5) is None


def test_ls_and_peers_follow_subscriptions(pair):
    a, b, ca, cb = pair
    topic = f"{SUBMISSION_TOPIC}/ls-test"
    assert topic not in cb.pubsub_topics()
    sub1 = cb.pubsub_subscribe(topic)
    sub2 = cb.pubsub_subscribe(topic)  # two readers of one topic on one node
    try:
        assert topic in cb.pubsub_topics()
        subscribed_across(ca, topic, b.proc.peer_id)
        assert ca.pubsub_peers(topic) == [b.proc.peer_id]
        assert b.proc.peer_id in ca.pubsub_peers()  # no topic: every pubsub peer
        assert cb.pubsub_peers(topic) == []  # A is not subscribed to it
        sub1.close()
        assert topic in cb.pubsub_topics()  # still held by sub2
        ca.pubsub_publish(topic, b"still here")
        assert sub2.get(timeout_s=5).data == b"still here"
    finally:
        sub1.close()
        sub2.close()
    wait_until(lambda: topic not in cb.pubsub_topics(), 3, "B leaving the topic")
    wait_until(lambda: ca.pubsub_peers(topic) == [], 5, "A seeing B leave")


def test_http_shapes_match_kubo(pair):
    a, b, ca, _ = pair
    topic = f"{SUBMISSION_TOPIC}/shapes"
    data = os.urandom(100)
    with httpx.stream("POST", f"{b.url}/api/v0/pubsub/sub", params={"arg": u(topic)}, timeout=10) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "application/json"
        assert resp.headers["x-chunked-output"] == "1"
        # Kubo's lists: {"Strings": [multibase topics]} and {"Strings": [sorted peer IDs]}
        assert u(topic) in httpx.post(f"{b.url}/api/v0/pubsub/ls").json()["Strings"]
        subscribed_across(ca, topic, b.proc.peer_id)
        assert httpx.post(f"{a.url}/api/v0/pubsub/peers", params={"arg": u(topic)}).json() == {
            "Strings": [b.proc.peer_id]}
        pub = httpx.post(f"{a.url}/api/v0/pubsub/pub", params={"arg": u(topic)},
                         files={"file": ("data", data, "application/octet-stream")})
        assert pub.status_code == 200 and pub.content == b""
        line = next(resp.iter_lines())
    msg = json.loads(line)
    assert set(msg) == {"from", "data", "seqno", "topicIDs"}
    assert msg["from"] == a.proc.peer_id
    assert msg["data"] == u(data)
    assert msg["topicIDs"] == [u(topic)]
    assert msg["seqno"].startswith("u") and len(base64.urlsafe_b64decode(msg["seqno"][1:] + "==")) == 8
    ident = httpx.post(f"{a.url}/api/v0/id").json()
    assert a.proc.swarm_addr in ident["Addresses"]
    assert all(addr.endswith(f"/p2p/{ident['ID']}") for addr in ident["Addresses"])
    assert "/meshsub/1.1.0" in ident["Protocols"]
    # swarm/connect again (already connected): Kubo's answer shape
    r = httpx.post(f"{b.url}/api/v0/swarm/connect", params={"arg": a.proc.swarm_addr}, timeout=15)
    assert r.json() == {"Strings": [f"connect {a.proc.peer_id} success"]}
    peers = httpx.post(f"{b.url}/api/v0/swarm/peers").json()["Peers"]
    assert [p["Peer"] for p in peers] == [a.proc.peer_id] and peers[0]["Addr"].startswith("/ip4/127.0.0.1/tcp/")


def kubo_error(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["Type"] == "error" and body["Code"] == code, body
    return body["Message"]


def test_malformed_requests_are_kubo_errors(pair):
    a, _, _, _ = pair
    api = f"{a.url}/api/v0"
    one = {"file": ("data", b"x")}
    assert "required" in kubo_error(httpx.post(f"{api}/pubsub/sub"), 400, 1)
    assert "required" in kubo_error(httpx.post(f"{api}/pubsub/pub", files=one), 400, 1)
    # a topic must be multibase, and base64url at that (Kubo's urlArgsDecoder)
    assert "multibase" in kubo_error(httpx.post(f"{api}/pubsub/sub", params={"arg": "tenzro/x"}), 500, 0)
    m_topic = "m" + base64.b64encode(b"tenzro/x").decode()
    assert "base64url" in kubo_error(httpx.post(f"{api}/pubsub/pub", params={"arg": m_topic}, files=one), 500, 0)
    assert "base64url" in kubo_error(httpx.post(f"{api}/pubsub/peers", params={"arg": "u*!"}), 500, 0)
    assert "empty" in kubo_error(httpx.post(f"{api}/pubsub/sub", params={"arg": "u"}), 500, 0)
    assert "UTF-8" in kubo_error(httpx.post(f"{api}/pubsub/sub", params={"arg": u(b"\xff\xfe")}), 500, 0)
    # the data part is required, and capped
    assert "'data' is required" in kubo_error(httpx.post(f"{api}/pubsub/pub", params={"arg": u("t")}), 400, 1)
    big = {"file": ("data", b"\0" * (MAX_MESSAGE_BYTES + 1))}
    assert str(MAX_MESSAGE_BYTES) in kubo_error(
        httpx.post(f"{api}/pubsub/pub", params={"arg": u("t")}, files=big, timeout=30), 500, 0)
    # swarm/connect: not a multiaddr, no peer ID, nobody there
    assert "invalid peer address" in kubo_error(httpx.post(f"{api}/swarm/connect", params={"arg": "nonsense"}), 500, 0)
    assert "/p2p/" in kubo_error(httpx.post(f"{api}/swarm/connect", params={"arg": "/ip4/127.0.0.1/tcp/1"}), 500, 0)
    nobody = f"/ip4/127.0.0.1/tcp/{free_port()}/p2p/{a.proc.peer_id[:-4]}abcd"
    r = httpx.post(f"{api}/swarm/connect", params={"arg": nobody}, timeout=20)
    assert r.status_code in (400, 500) and r.json()["Type"] == "error"
    assert httpx.get(f"{api}/pubsub/ls").status_code == 405
    # the node still serves after all of that
    assert isinstance(httpx.post(f"{api}/pubsub/ls").json()["Strings"], list)


def test_client_errors_are_ipfs_errors(pair):
    a, _, ca, _ = pair
    dead = IpfsClient(f"http://127.0.0.1:{free_port()}", timeout_s=2, retries=0)
    # checked before anything is sent: the dead node is never reached
    with pytest.raises(IpfsMessageTooLarge) as err:
        dead.pubsub_publish("t", b"\0" * (MAX_MESSAGE_BYTES + 1))
    assert err.value.limit == MAX_MESSAGE_BYTES and isinstance(err.value, IpfsError)
    for bad in ("", "x" * 1025, None):
        with pytest.raises(IpfsBadTopic):
            dead.pubsub_publish(bad, b"x")  # type: ignore[arg-type]
        with pytest.raises(IpfsBadTopic):
            dead.pubsub_subscribe(bad)  # type: ignore[arg-type]
    with pytest.raises(IpfsUnavailable):
        dead.pubsub_subscribe("t")
    with pytest.raises(IpfsUnavailable):
        dead.pubsub_publish("t", b"x")
    dead.close()
    with pytest.raises(IpfsPubsubError, match="/p2p/"):
        ca.swarm_connect("/ip4/127.0.0.1/tcp/1")
    nobody = f"/ip4/127.0.0.1/tcp/{free_port()}/p2p/{a.proc.peer_id[:-4]}abcd"
    with pytest.raises(IpfsPubsubError, match="failure|invalid"):
        ca.swarm_connect(nobody)


def test_subscription_caps_bytes_per_message(pair):
    _, b, ca, cb = pair
    topic = f"{SUBMISSION_TOPIC}/cap"
    with cb.pubsub_subscribe(topic, max_bytes=1000) as sub:
        subscribed_across(ca, topic, b.proc.peer_id)
        ca.pubsub_publish(topic, os.urandom(200_000))  # over this reader's cap: skipped, counted
        ca.pubsub_publish(topic, b"\x01" * 1000)  # exactly at the cap: delivered
        ca.pubsub_publish(topic, b"small")
        got = [sub.get(timeout_s=5), sub.get(timeout_s=5)]
    assert [m.data for m in got if m] == [b"\x01" * 1000, b"small"]
    assert sub.dropped == 1


def test_close_ends_a_blocked_iteration_cleanly(pair):
    _, b, _, cb = pair
    topic = f"{SUBMISSION_TOPIC}/close"
    sub = cb.pubsub_subscribe(topic)
    seen, errors = [], []

    def consume():
        try:
            for msg in sub:
                seen.append(msg)
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    reader = threading.Thread(target=consume)
    reader.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    sub.close()
    reader.join(timeout=3)
    assert not reader.is_alive() and time.monotonic() - t0 < 3
    assert errors == [] and seen == []
    assert sub.get(timeout_s=0.1) is None
    sub.close()  # idempotent
    wait_until(lambda: topic not in cb.pubsub_topics(), 3, "the node leaving the topic")


def test_node_stopping_breaks_the_subscription(tmp_path):
    node = NodeHandle(tmp_path / "ipfs", free_port())
    node.start()
    try:
        with IpfsClient(node.url, retries=0) as c:
            sub = c.pubsub_subscribe("tenzro/x")
            c.pubsub_publish("tenzro/x", b"before")
            assert sub.get(timeout_s=5).data == b"before"
            assert node.stop() == 0  # a node with an open subscription still shuts down cleanly
            with pytest.raises(IpfsUnavailable, match="ended"):
                sub.get(timeout_s=5)
            with pytest.raises(IpfsUnavailable):
                sub.get(timeout_s=0.1)  # and stays ended
            sub.close()
    finally:
        node.stop()


def test_swarm_port_taken_fails_clearly(pair, tmp_path):
    a, _, _, _ = pair
    taken = int(a.proc.swarm_addr.split("/tcp/")[1].split("/")[0])
    with pytest.raises(IpfsNodeError, match="in use|EADDRINUSE"):
        proc = start_ipfs_node(tmp_path / "other", free_port(), swarm_port=taken, timeout_s=30)
        stop_ipfs_node(proc)


class _HostileNode(http.server.BaseHTTPRequestHandler):
    """Answers pubsub/sub with garbage, an endless-looking line, and then one good message."""

    good = {"from": "12D3KooWgood", "data": u(b"ok"), "seqno": u(b"\0" * 7 + b"\x05"), "topicIDs": [u("t")]}

    def do_POST(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Chunked-Output", "1")
        self.end_headers()
        self.wfile.write(b"not json\n")
        self.wfile.write(b'{"from": "x", "data": "zzz"}\n')  # base58 data: not Kubo's encoding
        self.wfile.write(b'{"data": "' + b"A" * 300_000 + b'"}\n')  # one line far over the cap
        self.wfile.write(json.dumps(self.good).encode() + b"\n")
        self.wfile.flush()
        time.sleep(1)

    def log_message(self, *args):
        pass


def test_hostile_stream_is_skipped_not_held():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostileNode)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with IpfsClient(f"http://127.0.0.1:{server.server_address[1]}") as c:
            with c.pubsub_subscribe("t", max_bytes=1000) as sub:
                assert isinstance(sub, PubsubSubscription)
                msg = sub.get(timeout_s=5)
                assert msg == PubsubMessage("12D3KooWgood", b"ok", 5, ("t",))
                assert sub.dropped == 3
                with pytest.raises(IpfsUnavailable, match="ended"):
                    sub.get(timeout_s=5)  # the server closed the stream
    finally:
        server.shutdown()


def test_topic_names_carry_the_task_id():
    hex_id = TASK.hex()
    assert submission_topic(TASK) == f"tenzro/training/1.0.0/{hex_id}"
    assert syncer_topic(TASK) == f"tenzro/training/syncer/1.0.0/{hex_id}"
    assert submission_topic("0x" + hex_id.upper()) == submission_topic(hex_id) == submission_topic(TASK)
    for bad in (b"\0" * 31, "0x1234", "zz" * 32, 7):
        with pytest.raises(IpfsBadTopic):
            submission_topic(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            syncer_topic(bad)  # type: ignore[arg-type]

"""Parties find each other's IPFS nodes through signed announcements on the run's nodes topic (issue 25):
`tenzro_operator.peer_book` against three real local nodes (scripts/ipfs/node.mjs on 127.0.0.1).

The set-up of a network that only shares a rendezvous: a trainer's node T and a syncer's node S are each
connected to a hub H (the watcher's node, subscribed to the run's topics), not to each other; bitswap asks
connected peers only, so S cannot read what T pinned. The trainer announces T; S's book reads it and its
keeper dials T, and the payload moves from T to S directly. The attacks on the open topic come first: an
outsider's node, an announcement naming a node other than the publisher's, one signed by a non-party or
forged in a party's name, and a flood from one peer; none of them gets a node dialled."""

from __future__ import annotations

import threading
import time

import pytest
from eth_account import Account

from ipfs_fixtures import NodeHandle, wait_for
from stack import free_port
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.ipfs.peers import BootstrapPeers
from tenzro_operator.ipfs.pubsub import nodes_topic
from tenzro_operator.peer_book import ANNOUNCER_BURST, NodeAnnouncement, PeerBook, dial_refusal
from tenzro_operator.root_flow import RootFlowError

TASK = bytes.fromhex("ab" * 32)
TRAINER, SYNCER, OUTSIDER = Account.create(), Account.create(), Account.create()


@pytest.fixture
def hub_and_two(tmp_path):
    """Nodes H, T, S (H = the rendezvous), T and S each connected to H only, H subscribed to the
    run's nodes topic (so it relays it); yields ``(nodes, clients)`` keyed by "h", "t", "s"."""
    nodes = {k: NodeHandle(tmp_path / k, free_port()) for k in "hts"}
    clients = {}
    try:
        for k, n in nodes.items():
            n.start()
            clients[k] = IpfsClient(n.url, timeout_s=30, retries=0)
        for k in "ts":
            clients[k].swarm_connect(nodes["h"].proc.swarm_addr)
        hub_sub = clients["h"].pubsub_subscribe(nodes_topic(TASK))
        yield nodes, clients
        hub_sub.close()
    finally:
        for c in clients.values():
            c.close()
        for n in nodes.values():
            n.stop()


def announcement(account, peer: str, addrs: list[str], issued: int | None = None) -> bytes:
    return NodeAnnouncement.signed(account, TASK, peer, addrs, issued or int(time.time())).encode()


def test_the_syncer_connects_to_the_announced_trainer_node_and_fetches_its_payload_from_it(hub_and_two):
    nodes, c = hub_and_two
    t, s, h = nodes["t"].proc, nodes["s"].proc, nodes["h"].proc
    cid = c["t"].add(b"a trainer's payload, pinned on its own node only")
    assert c["s"].swarm_peers() == [h.peer_id]
    with pytest.raises(Exception):
        c["s"].cat(cid, timeout_s=3)  # S asks H, which does not hold it: not found
    keeper = BootstrapPeers(IpfsClient(nodes["s"].url, timeout_s=30, retries=0), [], check_interval_s=30)
    stop = threading.Event()
    keeper.start(stop)
    reader = PeerBook(IpfsClient(nodes["s"].url, timeout_s=10, retries=0), TASK, lambda: {TRAINER.address},
                      keeper=lambda: keeper, allow_private=True)
    trainer = PeerBook(IpfsClient(nodes["t"].url, timeout_s=10, retries=0), TASK, lambda: {SYNCER.address},
                       account=TRAINER, allow_private=True)
    try:
        reader.read()  # subscribed before the attacks are published
        hub = c["h"]
        topic = nodes_topic(TASK)
        hub.pubsub_publish(topic, announcement(OUTSIDER, h.peer_id, [h.swarm_addr]))  # not a party of the run
        hub.pubsub_publish(topic, announcement(TRAINER, t.peer_id, [t.swarm_addr]))  # names a node not its own
        forged = NodeAnnouncement.signed(OUTSIDER, TASK, h.peer_id, [h.swarm_addr], int(time.time()))
        hub.pubsub_publish(topic, forged.model_copy(update={"party": TRAINER.address.lower()}).encode())  # forged
        assert wait_for(lambda: reader.read() or reader._liars._seen, 10)
        assert reader.book == {} and h.peer_id in reader._liars  # the forger's peer is checked last from now on

        assert trainer.announce() is not None  # T's own listen address, signed by the trainer
        reader.tick()
        assert wait_for(lambda: (reader.tick(), TRAINER.address.lower() in reader.book)[1], 10)
        assert reader.book[TRAINER.address.lower()].peer == t.peer_id
        assert wait_for(lambda: t.peer_id in c["s"].swarm_peers(), 15)  # the keeper dialled T
        assert c["s"].cat(cid, timeout_s=10) == b"a trainer's payload, pinned on its own node only"

        # an older announcement of the trainer (a replay) does not replace the newest
        hub.pubsub_publish(topic, announcement(TRAINER, h.peer_id, [h.swarm_addr], issued=1))
        time.sleep(1.0)
        reader.read()
        assert reader.book[TRAINER.address.lower()].peer == t.peer_id
    finally:
        stop.set()
        reader.close()
        trainer.close()


def test_a_flood_from_one_peer_is_read_at_its_rate_and_checks_are_bounded(hub_and_two):
    nodes, c = hub_and_two
    reader = PeerBook(IpfsClient(nodes["s"].url, timeout_s=10, retries=0), TASK, lambda: {TRAINER.address},
                      allow_private=True)
    try:
        reader.read()
        h = nodes["h"].proc
        for i in range(40):  # forged in the trainer's name from the hub's node, each newer than the last
            forged = NodeAnnouncement.signed(OUTSIDER, TASK, h.peer_id, [h.swarm_addr], 1000 + i)
            c["h"].pubsub_publish(nodes_topic(TASK), forged.model_copy(update={"party": TRAINER.address.lower()})
                                  .encode())
        time.sleep(2.0)
        reader.read()
        # one peer: at most its burst of messages taken, one signature recovered, none kept
        assert reader._buckets.refused >= 40 - ANNOUNCER_BURST - 2
        assert len(reader._failed) == 1 and reader.book == {}
    finally:
        reader.close()


def test_the_announcement_and_the_dial_policy_refuse_what_they_must():
    peer = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"
    other = "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo"
    good = NodeAnnouncement.signed(TRAINER, TASK, peer, [f"/ip4/203.0.113.7/tcp/4001/p2p/{peer}"], 5)
    assert NodeAnnouncement.parse(good.encode()).signer() == TRAINER.address.lower()
    for bad in ([f"/ip4/203.0.113.7/tcp/4001/p2p/{other}"],  # another peer's address
                ["/ip4/203.0.113.7/tcp/4001"],  # no peer
                [f"/ip4/203.0.113.7/tcp/4001/p2p/{peer}"] * 9,  # too many
                []):
        raw = good.model_dump(mode="json") | {"addrs": bad}
        with pytest.raises(RootFlowError):
            NodeAnnouncement.parse(NodeAnnouncement.model_construct(**raw).encode())
    with pytest.raises(RootFlowError, match="exceeds"):
        NodeAnnouncement.parse(b" " * 5000)
    assert dial_refusal(f"/ip4/93.184.216.34/tcp/4001/p2p/{peer}", False) is None
    assert dial_refusal(f"/ip4/10.77.0.3/tcp/4001/p2p/{peer}", False) == "private"
    assert dial_refusal(f"/ip4/127.0.0.1/tcp/4001/p2p/{peer}", False) == "loopback"
    assert dial_refusal(f"/ip4/10.77.0.3/tcp/4001/p2p/{peer}", True) is None
    assert dial_refusal(f"/dns4/node.example/tcp/4001/p2p/{peer}", False) == "dns"
    assert dial_refusal(f"/ip4/0.0.0.0/tcp/4001/p2p/{peer}", True) == "unspecified"

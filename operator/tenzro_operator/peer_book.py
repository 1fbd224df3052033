"""Where a run's parties' IPFS nodes are: signed node announcements on the run's nodes topic (issue 25).

Bitswap fetches only from connected peers, and the embedded node dials nobody by itself. With
``ipfs_bootstrap`` alone every party would have to list every other party's node. Instead each
party that others fetch from (a trainer: its payloads; the syncer: the round's weights and
transcript) publishes, every `ANNOUNCE_EVERY_S` seconds, a `NodeAnnouncement` on
``tenzro/training/nodes/1.0.0/<task id hex>`` (`pubsub.nodes_topic`): its node's peer ID and
multiaddrs, signed with its Ethereum key. A party reads the topic and hands the nodes it needs to
its `BootstrapPeers` keeper (``want``), which dials them: a syncer or a watcher every enrolled
trainer's and the run's syncer's; a trainer the run's syncer's. So a party needs one
``ipfs_bootstrap`` peer that is subscribed to the run's topics (the watcher's node, the sponsor's)
to join the mesh; the direct connections follow from the announcements::

    book = PeerBook(ipfs, task_id, parties=lambda: {"0xabc..."}, keeper=lambda: daemon.ipfs_keeper(),
                    account=account, allow_private=False)
    book.start(stop_event)        # a thread: announce, read, dial, every `TICK_S` seconds
    book.close()

The topic is open to anyone, so what an announcement may make a party do is bounded:

- it names the node that published it (``peer`` must be the pubsub message's ``from``, which
  gossipsub signs with the node's libp2p key): nobody can point others at a node but its own;
- it is signed by a party the reader needs (`parties`: the run's syncer, its enrolled trainers),
  checked only after the cheap checks (size, this task, the publishing peer, the party, newer than
  the one kept, issued at most `FUTURE_S` ahead of this clock), at most `CHECKS_PER_TICK`
  signatures a tick, a failed (digest, signature, party) remembered (`FailedSignatures`);
- at most `MAX_NOTICES_PER_TICK` messages are read a tick, `ANNOUNCER_RATE_PER_S` a second from
  one peer; at most `MAX_ADDRS` addresses, each a multiaddr of that peer;
- only public IP addresses are dialled unless ``allow_private`` (``ipfs_dial_private``: a LAN,
  one machine's namespaces), which also admits DNS names (resolved by the node, not checked here).

The newest announcement of a party wins (a node moved or restarted with another address); a
party that leaves the set (an evicted trainer, a replaced syncer) is no longer dialled.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import threading
import time
from typing import Callable, ClassVar, Literal

from pydantic import Field, model_validator

from tenzro_operator.errors import IpfsError, ServiceUnavailable, TenzroError
from tenzro_operator.ipfs.peers import check_bootstrap_addr, peer_id_of
from tenzro_operator.ipfs.pubsub import nodes_topic
from tenzro_operator.roles.endpoint_policy import address_refusal
from tenzro_operator.roles.intake_guard import BoundedSet, FailedSignatures, TokenBuckets
from tenzro_operator.root_flow import MAX_MESSAGE_BYTES, Address, Hex32, RootFlowError, Signature
from tenzro_operator.signed_notice import SignedNotice

__all__ = ["ANNOUNCE_EVERY_S", "MAX_ADDRS", "NodeAnnouncement", "PeerBook", "dial_refusal"]

log = logging.getLogger("tenzro.ipfs.peers")

ANNOUNCE_EVERY_S = 5.0  # seconds between two announcements of this party's node
TICK_S = 1.0  # seconds between two rounds of announce / read / dial in `PeerBook.start`'s thread
MAX_ADDRS = 8  # multiaddrs in one announcement
MAX_NOTICES_PER_TICK = 256  # messages read a tick (the subscription holds as many; the node drops beyond)
CHECKS_PER_TICK = 32  # signature recoveries a tick at most
ANNOUNCER_RATE_PER_S, ANNOUNCER_BURST = 1.0, 8.0  # messages a second (and burst) read from one peer
FUTURE_S = 120  # seconds an announcement's issued time may be ahead of the reader's clock
MAX_BACKOFF_S = 30.0  # seconds between two tries of a tick while the node or the chain does not answer


class NodeAnnouncement(SignedNotice):
    """A party's IPFS node for a task: its peer ID and the multiaddrs to dial it on (each ending in
    ``/p2p/<peer>``), signed by the party's Ethereum key (`SignedNotice`)."""

    what: ClassVar[str] = "a node announcement"

    type: Literal["ipfs_node"] = "ipfs_node"
    task: Hex32
    party: Address
    peer: str = Field(pattern=r"^[A-Za-z0-9]{16,128}$")
    addrs: list[str] = Field(min_length=1, max_length=MAX_ADDRS)
    issued: int = Field(ge=0, lt=2**63)  # unix seconds: the newest one of a party wins
    signature: Signature

    @model_validator(mode="after")
    def _addrs_of_peer(self) -> "NodeAnnouncement":
        for a in self.addrs:
            check_bootstrap_addr(a)
            if peer_id_of(a) != self.peer:
                raise ValueError(f"{a} is not an address of peer {self.peer}")
        return self

    @classmethod
    def signed(cls, account, task_id: bytes, peer: str, addrs: list[str], issued: int) -> "NodeAnnouncement":
        return cls.sign_fields(account, task="0x" + task_id.hex(), party=account.address.lower(), peer=peer,
                               addrs=list(addrs), issued=issued)


def dial_refusal(addr: str, allow_private: bool) -> str | None:
    """Why an announced multiaddr is not dialled (a short reason), or None when it may be: its
    IP must pass `endpoint_policy.address_refusal` (public only, unless ``allow_private``); a DNS
    name is dialled only with ``allow_private`` (the node resolves it, unseen here)."""
    proto, host = addr.split("/")[1:3]
    if proto.startswith("dns"):
        return None if allow_private else "dns"
    try:
        return address_refusal(ipaddress.ip_address(host), allow_private)
    except ValueError:
        return "not an IP address"


class PeerBook:
    """A run's node announcements: this party's own, published, and the parties' it needs, dialled.

    Args:
        ipfs: an `IpfsClient` of this party's node, for this book only (its thread uses it).
        task_id: the run (bytes32).
        parties: () -> the addresses (any case) whose nodes this party needs now, or None once the
            run is over (the book stops); read at most every `PARTIES_EVERY_S` seconds.
            Announcements of anyone else are dropped unchecked.
        keeper: () -> the `BootstrapPeers` that dials them (its ``want``), or None: read, not dialled.
        account: this party's signing account; None = announce nothing (a watcher).
        announce_addrs: the multiaddrs to announce; None = the node's own (``id``'s ``Addresses``).
        allow_private: `dial_refusal`'s.
        clock: unix seconds now (the ``issued`` of ours, the bound on theirs).
    """

    PARTIES_EVERY_S: ClassVar[float] = 10.0

    def __init__(self, ipfs, task_id: bytes, parties: Callable[[], set[str] | None], *,
                 keeper: Callable[[], object | None] = lambda: None, account=None,
                 announce_addrs: list[str] | None = None, allow_private: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.ipfs, self.task_id, self.topic = ipfs, task_id, nodes_topic(task_id)
        self._parties_fn, self._keeper_fn, self.account = parties, keeper, account
        self.announce_addrs, self.allow_private, self.clock = announce_addrs, allow_private, clock
        self.book: dict[str, NodeAnnouncement] = {}  # party (lower-case) -> its newest good announcement
        self._own_peer: str | None = None  # this node's peer ID and listen multiaddrs (`_read_own`)
        self._own_addrs: list[str] = []
        self._sub = None
        self._announced_at = -ANNOUNCE_EVERY_S
        self._parties: set[str] = set()
        self._parties_at = -self.PARTIES_EVERY_S
        self._wanted: dict[str, list[str]] = {}
        self._buckets = TokenBuckets(ANNOUNCER_RATE_PER_S, ANNOUNCER_BURST)
        self._failed = FailedSignatures(4096)
        self._liars = BoundedSet(4096)  # peers caught with a bad signature: checked last
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ one tick

    def tick(self) -> None:
        """Announce this party's node (when due), read the topic, hand the needed nodes to the
        keeper. Raises IpfsError / ServiceUnavailable / TenzroError (the node or the chain
        did not answer; `start`'s thread logs it and tries again)."""
        if not self._refresh_parties():  # the run is over: nothing to announce or dial any more
            self._stop.set()
            return
        now = time.monotonic()
        if self.account is not None and now - self._announced_at >= ANNOUNCE_EVERY_S:
            self._announced_at = now
            self.announce()
        self.read()
        wanted = {a.peer: [x for x in a.addrs if dial_refusal(x, self.allow_private) is None]
                  for p, a in self.book.items() if p in self._parties and a.peer != self.own_peer()}
        wanted = {peer: addrs for peer, addrs in wanted.items() if addrs}
        keeper = self._keeper_fn() if wanted or self._wanted else None
        if keeper is not None and wanted != self._wanted:
            keeper.want(wanted)
            self._wanted = wanted

    def _refresh_parties(self) -> bool:
        """Read `parties` again when `PARTIES_EVERY_S` have passed; False once the run is over."""
        now = time.monotonic()
        if now - self._parties_at >= self.PARTIES_EVERY_S:
            parties = self._parties_fn()
            if parties is None:
                return False
            self._parties = {p.lower() for p in parties}
            self._parties_at = now
        return True

    def own_peer(self) -> str:
        """This party's node's peer ID (`_read_own`)."""
        if self._own_peer is None:
            self._read_own()
        return self._own_peer

    def _read_own(self) -> None:
        """Ask the node once (``id``) for its peer ID and the listen multiaddrs of that peer."""
        me = self.ipfs.id()
        peer, addrs = str(me.get("ID", "")), []
        for a in me.get("Addresses") or []:
            try:
                if peer_id_of(check_bootstrap_addr(str(a))) == peer:
                    addrs.append(str(a))
            except (ValueError, IndexError):
                continue
        self._own_peer, self._own_addrs = peer, addrs

    def announce(self) -> NodeAnnouncement | None:
        """Publish this party's node (`NodeAnnouncement`) on the run's nodes topic; None (nothing
        published) when there is no address to announce."""
        addrs = self.announce_addrs
        if addrs is None:
            self.own_peer()
            addrs = self._own_addrs
        if not addrs:
            return None
        ann = NodeAnnouncement.signed(self.account, self.task_id, peer_id_of(addrs[0]), addrs[:MAX_ADDRS],
                                      int(self.clock()))
        self.ipfs.pubsub_publish(self.topic, ann.encode())
        return ann

    def read(self) -> list[str]:
        """Take the topic's new messages into `book`; returns the parties whose entry changed."""
        self._refresh_parties()
        if self._sub is None:
            self._sub = self.ipfs.pubsub_subscribe(self.topic, max_bytes=MAX_MESSAGE_BYTES,
                                                   queue_size=MAX_NOTICES_PER_TICK)
        own, latest = self.own_peer(), self.clock() + FUTURE_S
        newest: dict[str, NodeAnnouncement] = {}  # per publishing peer, its newest candidate
        for _ in range(MAX_NOTICES_PER_TICK):
            msg = self._sub.get(timeout_s=0)
            if msg is None:
                break
            if msg.from_peer == own or not self._buckets.take(msg.from_peer):
                continue
            try:
                a = NodeAnnouncement.parse(msg.data)
            except RootFlowError:
                continue
            kept = self.book.get(a.party.lower())
            if (a.task.lower() != "0x" + self.task_id.hex() or a.peer != msg.from_peer
                    or a.party.lower() not in self._parties or a.issued > latest
                    or (kept is not None and a.issued <= kept.issued)):
                continue
            if msg.from_peer not in newest or a.issued > newest[msg.from_peer].issued:
                newest[msg.from_peer] = a
        peers = list(newest)
        random.shuffle(peers)
        peers.sort(key=lambda p: p in self._liars)  # however many peers a forger runs, the others go first
        changed = []
        for peer in peers[:CHECKS_PER_TICK]:
            a = newest[peer]
            party = a.party.lower()
            triple = (a.digest(), bytes.fromhex(a.signature[2:]), party)
            if triple in self._failed:
                continue
            if a.signer() != party:
                self._failed.add(*triple)
                self._liars.add(peer)
                continue
            kept = self.book.get(party)
            if kept is None or kept.peer != a.peer or kept.addrs != a.addrs:
                log.info("IPFS node of %s: %s (announced)", party, ", ".join(a.addrs))
                changed.append(party)
            self.book[party] = a
        return changed

    # ------------------------------------------------------------------ the thread

    def start(self, stop: threading.Event | None = None) -> threading.Thread:
        """`tick` every `TICK_S` seconds in a daemon thread until ``stop`` (or `close`) is set or
        the run is over; a tick that fails is logged (DEBUG; an unexpected error: WARNING) and
        tried again after a backoff (`MAX_BACKOFF_S` at most)."""
        stops = [self._stop] + ([stop] if stop is not None else [])

        def loop() -> None:
            failures = 0
            while not any(e.is_set() for e in stops):
                try:
                    self.tick()
                    failures = 0
                except (IpfsError, ServiceUnavailable, TenzroError) as exc:
                    failures += 1
                    log.debug("run nodes topic: %s (retrying)", exc)
                    if isinstance(exc, IpfsError) and self._sub is not None:
                        self._sub.close()
                        self._sub = None
                except Exception:  # noqa: BLE001 - a bug must not end the announcements silently
                    failures += 1
                    log.warning("run nodes topic: unexpected error (retrying)", exc_info=True)
                # a dead node or chain is asked again after 1, 2, 4 .. at most 30 s
                self._stop.wait(min(MAX_BACKOFF_S, TICK_S * 2 ** failures) if failures else TICK_S)

        self._thread = threading.Thread(target=loop, daemon=True, name=f"peer-book-{self.task_id.hex()[:8]}")
        self._thread.start()
        return self._thread

    def close(self) -> None:
        """Stop the thread (after its tick in flight) and the subscription; the keeper keeps the
        connections made (they carry the run's last fetches)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._sub is not None:
            self._sub.close()
            self._sub = None

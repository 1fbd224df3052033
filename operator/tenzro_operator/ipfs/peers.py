"""Bootstrap IPFS peers: keep this party's IPFS node connected to the nodes it fetches from (issue 25).

The embedded node (scripts/ipfs/node.mjs) dials nobody by itself, and bitswap only asks connected
peers; so a daemon whose config lists ``ipfs_bootstrap`` multiaddrs (another party's node, e.g.
``/ip4/10.0.0.5/tcp/4001/p2p/12D3KooW...``, as its ``ipfs id`` / ready line gives) connects its
node to each at start and again whenever one drops out of ``swarm/peers``::

    keeper = BootstrapPeers(IpfsClient(api_url, retries=0), cfg.ipfs_bootstrap, check_interval_s=10)
    keeper.connect_all()          # at start: each peer, up to `attempts` dials (never raises)
    keeper.check()                # later: re-dial the configured peers the node is not connected to
    keeper.start(stop_event)      # or both in a background thread until ``stop_event`` is set

Peers learnt while it runs (the nodes a run's parties announce, `tenzro_operator.peer_book`) are
handed over with ``keeper.want({peer id: [multiaddr, ...]})``: each check dials those not
connected, one attempt per address, and the first check after a change runs at once.

Retries are bounded: each peer gets at most ``attempts`` dials per check, ``backoff_s``,
``2*backoff_s``, ... apart; a peer still unreachable is logged (WARNING, its address and the last
error) and dialled again at the next check, ``check_interval_s`` later. Log lines (logger
``tenzro.ipfs.peers``): ``IPFS bootstrap peer <id> connected (<addr>)``, ``... dropped; reconnecting``,
``... unreachable after <n> attempts (last: <error>); next try in <s> s``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from tenzro_operator.errors import IpfsError, ServiceUnavailable

__all__ = ["BootstrapPeers", "check_bootstrap_addr", "peer_id_of"]

log = logging.getLogger("tenzro.ipfs.peers")

_MULTIADDR = re.compile(r"^/(ip4|ip6|dns|dns4|dns6)/[^/]+/tcp/\d{1,5}/p2p/[A-Za-z0-9]{16,}$")


def check_bootstrap_addr(addr: str) -> str:
    """``addr`` if it is a dialable multiaddr of one peer (``/ip4|ip6|dns*/<host>/tcp/<port>/p2p/<peer id>``);
    raises ValueError naming it otherwise."""
    if not isinstance(addr, str) or not _MULTIADDR.match(addr.strip()):
        raise ValueError(f"not a peer multiaddr /ip4/<host>/tcp/<port>/p2p/<peer id>: {addr!r}")
    return addr.strip()


def peer_id_of(addr: str) -> str:
    """The peer ID at the end of a ``.../p2p/<peer id>`` multiaddr."""
    return addr.rsplit("/p2p/", 1)[1].split("/", 1)[0]


class BootstrapPeers:
    """Connects an IPFS node to fixed peers and reconnects those that drop.

    Args:
        ipfs: an `IpfsClient` of this party's node (used by one thread only; give the keeper its own).
        addrs: the peers' multiaddrs (`check_bootstrap_addr`).
        attempts: dials per peer per check (at least 1).
        backoff_s: seconds before the 2nd dial of a check; doubled for each further one.
        dial_timeout_s: seconds one ``swarm/connect`` may take (the node itself gives up after 10 s).
        check_interval_s: seconds between checks in `start`'s thread.
    """

    def __init__(self, ipfs, addrs: Iterable[str], *, attempts: int = 3, backoff_s: float = 1.0,
                 dial_timeout_s: float = 15.0, check_interval_s: float = 10.0) -> None:
        self.ipfs = ipfs
        self.addrs = [check_bootstrap_addr(a) for a in addrs]
        self.attempts = max(1, int(attempts))
        self.backoff_s, self.dial_timeout_s, self.check_interval_s = backoff_s, dial_timeout_s, check_interval_s
        self.dials = 0  # swarm/connect calls made (for tests and metrics)
        self._up: set[str] = set()  # peers seen connected at the last check
        self._announced: dict[str, list[str]] = {}  # peer id -> its multiaddrs (`want`)
        self._lock = threading.Lock()
        self._kick = threading.Event()  # `want` changed the peers, or `check_soon`: check now
        self._stop = threading.Event()
        self._stops: list[threading.Event] = [self._stop]  # any of them set: stop dialling and checking

    def want(self, peers: dict[str, list[str]]) -> None:
        """Keep these peers connected too (``{peer id: [multiaddr, ...]}``, each `check_bootstrap_addr`;
        replaces the previous call's set); a change makes the thread of `start` check at once."""
        peers = {p: [check_bootstrap_addr(a) for a in addrs] for p, addrs in peers.items() if addrs}
        with self._lock:
            changed, self._announced = peers != self._announced, peers
        if changed:
            self._kick.set()

    def check_soon(self) -> None:
        """Make the thread of `start` check now rather than at the end of its interval: the node was
        found with no peer (a fetch failed with `IpfsIsolated`), or the host's link is back after an
        outage. Repeated calls while a check runs make one more check, not one each."""
        self._kick.set()

    def connect(self, addr: str, attempts: int | None = None, kind: str = "bootstrap") -> bool:
        """Dial ``addr`` up to ``attempts`` (default ``self.attempts``) times; True once connected.
        Never raises: a failure is logged."""
        peer, last = peer_id_of(addr), ""
        attempts = self.attempts if attempts is None else attempts
        for attempt in range(attempts):
            if attempt and self._wait(self.backoff_s * 2 ** (attempt - 1)):
                return False
            self.dials += 1
            try:
                self.ipfs.swarm_connect(addr, timeout_s=self.dial_timeout_s)
            except (IpfsError, ServiceUnavailable) as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            log.info("IPFS %s peer %s connected (%s)", kind, peer, addr)
            self._up.add(peer)
            return True
        self._up.discard(peer)
        log.warning("IPFS %s peer %s unreachable after %d attempts (last: %s); next try in %.0f s",
                    kind, peer, attempts, last, self.check_interval_s)
        return False

    def connect_all(self) -> list[str]:
        """Dial every configured peer (`connect`, all at once: an unreachable one does not hold up
        the others; the `want`ed ones are left to `check`) but this node itself (one bootstrap list may serve every party); returns the
        peer IDs now connected."""
        self._drop_self()
        if not self.addrs:
            return []
        with ThreadPoolExecutor(max_workers=min(8, len(self.addrs)), thread_name_prefix="ipfs-dial") as pool:
            ok = list(pool.map(self.connect, self.addrs))
        return [peer_id_of(a) for a, up in zip(self.addrs, ok) if up]

    def _drop_self(self) -> None:
        """Remove this node's own address from the list (its ID from ``id``; kept when the node does not answer)."""
        try:
            own = str(self.ipfs.id().get("ID", ""))
        except (IpfsError, ServiceUnavailable, ValueError, AttributeError):
            return
        if own:
            self.addrs = [a for a in self.addrs if peer_id_of(a) != own]

    def check(self) -> list[str]:
        """Re-dial the configured peers missing from the node's ``swarm/peers``; returns those
        reconnected. Never raises: a node that does not answer is logged and checked next time."""
        try:
            connected = set(self.ipfs.swarm_peers())
        except (IpfsError, ServiceUnavailable) as exc:
            log.warning("IPFS bootstrap peers not checked: the node does not answer swarm/peers (%s)", exc)
            return []
        back = []
        for addr in self.addrs:
            peer = peer_id_of(addr)
            if peer in connected:
                self._up.add(peer)
                continue
            if peer in self._up:
                log.warning("IPFS bootstrap peer %s dropped; reconnecting (%s)", peer, addr)
            if self.connect(addr):
                back.append(peer)
        with self._lock:
            announced = dict(self._announced)
        fixed = {peer_id_of(a) for a in self.addrs}
        for peer, addrs in announced.items():
            if peer in connected or peer in fixed:
                self._up.add(peer)
                continue
            if any(self.connect(a, attempts=1, kind="announced") for a in addrs):
                back.append(peer)
        return back

    def start(self, stop: threading.Event | None = None, first_wait_s: float = 30.0) -> threading.Thread:
        """`connect_all`, then `check` every ``check_interval_s`` seconds, in a daemon thread that
        ends when ``stop`` (or `close`) is set. Returns the thread once the first `connect_all` is
        over, or after ``first_wait_s`` seconds (a peer still dialling then is left to the thread):
        a role that fetches right after start-up (the spec, the weights) finds its peers connected
        instead of failing with "no connected peer"."""
        if stop is not None:
            self._stops.append(stop)
        first = threading.Event()

        def loop() -> None:
            try:
                self.connect_all()
            finally:
                first.set()
            while not self._wait(self.check_interval_s, kick=True):
                self.check()

        thread = threading.Thread(target=loop, daemon=True, name="ipfs-peers")
        thread.start()
        first.wait(first_wait_s)
        return thread

    def _wait(self, seconds: float, kick: bool = False) -> bool:
        """Sleep up to ``seconds`` (in slices of at most 0.2 s); True as soon as a stop is set.
        ``kick``: also end (False) as soon as `want` changed the peers or `check_soon` was called."""
        deadline = time.monotonic() + max(0.0, seconds)
        while True:
            if any(e.is_set() for e in self._stops):
                return True
            left = deadline - time.monotonic()
            if left <= 0 or (kick and self._kick.is_set()):
                if kick:
                    self._kick.clear()
                return False
            self._stop.wait(min(left, 0.2))

    def close(self) -> None:
        """Stop `start`'s thread (after the dial in flight, if any)."""
        self._stop.set()

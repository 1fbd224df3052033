"""The IPFS peers a daemon keeps: its node's bootstrap peers redialled while it runs, and per run
the parties' nodes announced and dialled (`tenzro_operator.peer_book`). A part of `Daemon`."""

from __future__ import annotations

import logging

from tenzro_operator.chain import ZERO_ADDRESS, RunStatus

log = logging.getLogger("tenzro.daemon")


class PeerKeeping:
    """What a daemon does to keep its IPFS node connected to the run's parties (a part of `Daemon`)."""

    def keep_ipfs_peers(self) -> None:
        """Connect the IPFS node to the config's ``ipfs_bootstrap`` peers and re-dial any that drops,
        every ``ipfs_peer_check_s`` seconds (`tenzro_operator.ipfs.peers.BootstrapPeers`: bounded
        dials, logged), in a thread with its own client that ends with the daemon. Returns once the
        first dials are over (at most 30 s), so the role's first fetch finds its peers connected.
        Nothing when the list is empty; never raises for an unreachable peer."""
        if getattr(self.config, "ipfs_bootstrap", None):
            self.ipfs_keeper()

    def ipfs_keeper(self):
        """The `BootstrapPeers` keeping this daemon's node connected (the config's ``ipfs_bootstrap``
        and the nodes its runs' parties announce, `track_peers`), started at the first call."""
        if self.ipfs_peers is None:
            from tenzro_operator.ipfs import IpfsClient
            from tenzro_operator.ipfs.peers import BootstrapPeers

            addrs = list(getattr(self.config, "ipfs_bootstrap", None) or [])
            self.ipfs_peers = BootstrapPeers(IpfsClient(self.ipfs.api_url, timeout_s=30.0, retries=0), addrs,
                                             check_interval_s=float(getattr(self.config, "ipfs_peer_check_s", 10.0)))
            log.info("%s: keeping %d IPFS bootstrap peer(s) connected, checked every %.0f s", self.role, len(addrs),
                     self.ipfs_peers.check_interval_s)
            self.ipfs_peers.start(self.stop)
        return self.ipfs_peers

    def track_peers(self, task_id: bytes) -> None:
        """Announce this party's IPFS node on run ``task_id``'s nodes topic and connect to the
        nodes of the parties it fetches from (`tenzro_operator.peer_book.PeerBook`, in a thread of
        its own until the run is over or the daemon stops): with ``dials_trainers`` every enrolled
        trainer's and the run's syncer's, else the syncer's. Once per run; nothing with
        ``ipfs_dial_announced`` off and nothing to announce (``announces_node``, an account)."""
        dial = bool(getattr(self.config, "ipfs_dial_announced", True))
        account = self.account if self.announces_node else None
        if task_id in self.peer_books or (not dial and account is None):
            return
        from tenzro_operator.ipfs import IpfsClient
        from tenzro_operator.peer_book import PeerBook

        def parties() -> set[str] | None:
            run = self.chain.get_run(task_id)
            if run.status in (RunStatus.SEALED, RunStatus.CANCELLED):
                return None
            out = set(self.chain.trainers_of(task_id)) if self.dials_trainers else set()
            out.add(run.syncer)
            return {a.lower() for a in out} - {ZERO_ADDRESS.lower()}

        book = PeerBook(IpfsClient(self.ipfs.api_url, timeout_s=10.0, retries=0), task_id, parties,
                        keeper=self.ipfs_keeper if dial else lambda: None, account=account,
                        announce_addrs=getattr(self.config, "ipfs_announce", None),
                        allow_private=bool(getattr(self.config, "ipfs_dial_private", False)))
        self.peer_books[task_id] = book
        book.start(self.stop)

    def close_peer_books(self) -> None:
        """Stop every run's `track_peers` thread (the role's ``run`` ends: nothing more to announce)."""
        for book in self.peer_books.values():
            book.close()

"""The chain client's calls of the registry's syncer pool: registration, stake, elections."""

from __future__ import annotations

import time

from eth_utils import to_checksum_address

from tenzro_operator.chain.records import ELECTION_WINDOW_BLOCKS, ZERO_ADDRESS, TxResult, b32
from tenzro_operator.errors import ChainError, ChainRevert


class SyncerPoolCalls:
    """Calls of `ChainClient` of the syncer pool: registration, elections, fees."""

    def register_syncer(self, amount: int, approve: bool = True) -> TxResult:
        """Join the syncer pool with ``amount`` atto-units of stake, or add to it (approves first).

        Raises:
            ChainRevert: ``Registry__SyncerStakeTooLow`` (a first registration below
                ``minSyncerStake``), ``Registry__SyncerPoolFull``.
        """
        if approve:
            return self.spend_approved(amount, "registerSyncer", amount)
        return self.transact("registerSyncer", amount)

    def unregister_syncer(self) -> TxResult:
        """Leave the syncer pool: the first call emits ``SyncerLeaving`` (drawn in no election
        requested from then on), the second, from its ``fromBlock`` on, ``SyncerUnregistered``
        (the stake becomes withdrawable).

        Raises:
            ChainRevert: ``Registry__NotSyncerCandidate``, ``Registry__SyncerBusy``,
                ``Registry__SyncerChangePending`` (before the exit has taken effect).
        """
        return self.transact("unregisterSyncer")

    def request_syncer_election(self, task_id: bytes) -> TxResult:
        """Step 1 of an election (anyone): ``requestSyncerElection``. The run must be Training,
        without a syncer or with a replaceable one; the request's block hash seeds the draw.

        Raises:
            ChainRevert: ``Registry__ElectionPending`` (an earlier request can still be resolved),
                ``Registry__SyncerStillActive``, ``Registry__WrongStatus`` (not Training).
        """
        return self.transact("requestSyncerElection", b32(task_id))

    def elect_syncer(self, task_id: bytes) -> str:
        """Step 2 (anyone, from the block after the request, within 256 blocks): ``electSyncer``;
        returns the elected address (the replaced syncer's bond is burned).

        Raises:
            ChainRevert: ``Registry__NoElectionRequested``, ``Registry__ElectionNotReady`` (same
                block as the request), ``Registry__ElectionExpired``, ``Registry__SyncerStillActive``,
                ``Registry__NoSyncerCandidates``.
        """
        res = self.transact("electSyncer", b32(task_id))
        return to_checksum_address(res.event("SyncerElected")["syncer"])

    def run_syncer_election(self, task_id: bytes, *, timeout_s: float = 120.0) -> str:
        """Both steps of an election: request one (unless a request that can still be resolved is
        pending, e.g. another syncer's), wait for the next block, elect. A request that expired
        (more than 256 blocks old) is made again; if someone else resolved the election meanwhile
        the run's syncer is returned. On a devnet (chain id 31337 / 1337) an empty block is mined
        when none comes by itself (anvil mines only for transactions).

        Returns:
            the run's syncer after the election (checksummed).
        Raises:
            ChainRevert: the election cannot happen (``Registry__SyncerStillActive``,
                ``Registry__WrongStatus``, ``Registry__NoSyncerCandidates``, ...).
            ChainError: no block after the request within ``timeout_s`` seconds.
        """
        tid = b32(task_id)
        deadline = time.monotonic() + timeout_s
        attempts = 0
        while True:
            run = self.get_run(tid)
            pending = run.election_block
            if not pending or self.block_number() > pending + ELECTION_WINDOW_BLOCKS:
                if attempts == 3:
                    raise ChainError(f"the syncer election of task 0x{tid.hex()} did not resolve after 3 requests")
                attempts += 1
                try:
                    pending = self.request_syncer_election(tid).block_number
                except ChainRevert as exc:
                    if exc.error_name != "Registry__ElectionPending":
                        raise
                    pending = int(exc.args_["requestBlock"])
            try:
                return self.elect_syncer(tid)
            except ChainRevert as exc:
                if exc.error_name == "Registry__ElectionNotReady":
                    self._wait_block_after(pending, deadline)
                elif exc.error_name == "Registry__NoElectionRequested":  # resolved by someone else meanwhile
                    syncer = self.get_run(tid).syncer
                    if syncer != ZERO_ADDRESS:
                        return syncer
                elif exc.error_name != "Registry__ElectionExpired":  # expired: request again
                    raise

    def _wait_block_after(self, block: int, deadline: float) -> None:
        """Return once the head is past ``block`` (mining an empty block on a devnet)."""
        while self.block_number() <= block:
            if self.chain_id in (31337, 1337):
                self.mine()
                continue
            if time.monotonic() > deadline:
                raise ChainError(f"no block after {block} arrived on {self.shown_url}")
            time.sleep(self.poll_s * 10)

    def claim_syncer_fee(self, task_id: bytes) -> int:
        """Once the run is Sealed or Cancelled, move this account's accrued syncer fees of ``task_id``
        to its withdrawable balance; returns the amount (atto-units).

        Raises:
            ChainRevert: ``Registry__NoSyncerFee`` (nothing accrued or already claimed),
                ``Registry__WrongStatus`` (neither Sealed nor Cancelled).
        """
        res = self.transact("claimSyncerFee", b32(task_id))
        return int(res.event("SyncerFeeClaimed")["amount"])

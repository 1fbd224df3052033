"""The chain client's views of the registry (typed: `RunView`, `RoundRecord`, `TrainerStats`,
`TrainingReceipt`), the receipt verifier, and the devnet's clock helpers."""

from __future__ import annotations

from eth_utils import to_checksum_address

from tenzro_operator.chain.records import (
    RoundRecord,
    RunView,
    SignedPayload,
    SyncerInfo,
    TrainerStats,
    TrainingReceipt,
    b32,
    from_abi_dict,
)
from tenzro_operator.errors import ChainRevert


class RegistryViews:
    """Typed views of the registry, the receipt verifier and the devnet clock of `ChainClient`."""

    def get_run(self, task_id: bytes) -> RunView:
        """``getRun``.

        Raises:
            ChainRevert: ``Registry__UnknownTask`` when no such run was posted.
        """
        d = self.call_named("getRun", b32(task_id))
        return from_abi_dict(RunView, next(iter(d.values())))

    def run_exists(self, task_id: bytes) -> bool:
        """True iff a run with this task id was posted."""
        try:
            self.get_run(task_id)
        except ChainRevert as exc:
            if exc.error_name == "Registry__UnknownTask":
                return False
            raise
        return True

    def list_runs(self, offset: int = 0, limit: int = 100) -> tuple[list[bytes], int]:
        """One page of task ids in posting order, and the total number of runs."""
        ids, total = self.call("listRuns", offset, limit)
        return [bytes(i) for i in ids], int(total)

    def all_runs(self, start: int = 0, page: int = 100) -> list[bytes]:
        """Every task id from posting index ``start`` on, paging through ``listRuns`` (ids are
        append-only, so a poller passes how many it already has)."""
        out: list[bytes] = []
        while True:
            ids, total = self.list_runs(start + len(out), page)
            out.extend(ids)
            if not ids or start + len(out) >= total:
                return out

    def get_receipt(self, task_id: bytes) -> TrainingReceipt:
        """The sealed receipt with its serialized bytes (reverts unless the run is Sealed)."""
        d = self.call_named("getReceipt", b32(task_id))
        values = list(d.values())
        rec = dict(values[0])
        rec["serialized"] = bytes(values[1])
        return from_abi_dict(TrainingReceipt, rec)

    def get_round(self, task_id: bytes, round: int) -> RoundRecord:
        d = self.call_named("getRound", b32(task_id), int(round))
        return from_abi_dict(RoundRecord, next(iter(d.values())))

    def trainer_stats(self, task_id: bytes, trainer: str | None = None) -> TrainerStats:
        """``trainerMetrics`` of ``trainer`` (default this account)."""
        d = self.call_named("trainerMetrics", b32(task_id), to_checksum_address(trainer or self.address))
        return from_abi_dict(TrainerStats, next(iter(d.values())))

    def trainers_of(self, task_id: bytes) -> list[str]:
        """Trainers in enrollment order (index i trains shard i)."""
        return [to_checksum_address(a) for a in self.call("trainersOf", b32(task_id))]

    def submissions_of(self, task_id: bytes, round: int, trainer: str) -> tuple[int, int]:
        """Fragment bitmaps ``(submitted, rejected)`` of a trainer's forced (on-chain) submissions
        in a round (bit f = fragment f); a committed round's accepted set is in its bitmaps."""
        s, r = self.call("submissionsOf", b32(task_id), int(round), to_checksum_address(trainer))
        return int(s), int(r)

    def withdrawable(self, address: str | None = None) -> int:
        return int(self.call("withdrawable", to_checksum_address(address or self.address)))

    def syncer_info(self, address: str | None = None) -> SyncerInfo:
        """``syncerInfo`` of ``address`` (default this account): stake, active tasks, registered,
        locked (bonds), a `SyncerInfo` (a tuple: ``syncer_info()[2]`` is ``registered``)."""
        s, n, r, locked = self.call("syncerInfo", to_checksum_address(address or self.address))
        return SyncerInfo(int(s), int(n), bool(r), int(locked))

    def syncer_weight(self, address: str | None = None) -> tuple[int, int]:
        """``syncerWeight`` of ``address`` (default this account): its draw weight in elections
        requested from now on (atto-units; 0 while leaving or not a candidate) and the first block
        its weight may change again (a top-up, an exit; 0: now)."""
        w, from_block = self.call("syncerWeight", to_checksum_address(address or self.address))
        return int(w), int(from_block)

    def syncer_fee_of(self, task_id: bytes, syncer: str | None = None) -> int:
        """Fees accrued to ``syncer`` (default this account) in run ``task_id``, not yet claimed,
        atto-units."""
        return int(self.call("syncerFeeOf", b32(task_id), to_checksum_address(syncer or self.address)))

    def burned(self) -> int:
        """Atto-units burned by slashing so far (kept by the registry for ever)."""
        return int(self.call("burned"))

    def challenge_bond(self, task_id: bytes) -> int:
        """``challengeBond``: the bond an availability challenge of the run pulls, atto-units."""
        return int(self.call("challengeBond", b32(task_id)))

    def challenge_bonds_held(self) -> int:
        """Bonds of pending availability challenges held by the registry, atto-units."""
        return int(self.call("challengeBondsHeld"))

    def min_syncer_fee_per_round(self) -> int:
        """Smallest syncer pay per round (``rewardPool * syncerFeeBps / 10000 / maxRounds``) a task
        may offer, atto-units."""
        return int(self.call("minSyncerFeePerRound"))

    def run_binding(self, task_id: bytes) -> tuple[bytes, str, bytes, int]:
        """``runBinding``: ``(sealed run root (zero while not Sealed), sponsor, spec hash, total
        credits)``, what a RewardEscrow checks before paying on a run."""
        root, sponsor, spec_hash, credits = self.call("runBinding", b32(task_id))
        return bytes(root), to_checksum_address(sponsor), bytes(spec_hash), int(credits)

    def syncer_candidates(self) -> list[str]:
        return [to_checksum_address(a) for a in self.call("syncerCandidates")]

    def min_syncer_stake(self) -> int:
        return int(self.call("minSyncerStake"))

    def syncer_timeout(self) -> int:
        """Seconds after the later of a round deadline and the syncer's election before a silent
        syncer may be replaced."""
        return int(self.call("syncerTimeout"))

    def outer_gradient_digest(self, task_id: bytes, round: int, fragment: int, base_root: bytes,
                              payload: SignedPayload) -> bytes:
        """The registry's own EIP-712 digest (to check `sign_outer_gradient` against)."""
        return bytes(self.call("outerGradientDigest", b32(task_id), int(round), int(fragment), b32(base_root),
                               payload.to_abi()))

    # -- verifier -------------------------------------------------------------------------

    def verify_receipt(self, serialized: bytes, run_root: bytes, address: str | None = None) -> bool:
        """Call the receipt verifier (default the precompile address on devnets) with raw calldata
        ``serialized || run_root``; True iff it returns exactly ``0x01``."""
        to = to_checksum_address(address or self.deployment.verifier_address or "")
        out = self._rpc("eth_call verifier", lambda: self.w3.eth.call(
            {"to": to, "data": "0x" + (bytes(serialized) + b32(run_root)).hex()}))
        return bytes(out) == b"\x01"

    # -- devnet helpers -------------------------------------------------------------------

    def nudge_devnet(self, deadline: int) -> None:
        """On a devnet (chain id 31337 / 1337) blocks are mined only for transactions, so the head's
        timestamp can stay at or before a deadline (unix seconds) long after it passed, and a
        transaction that needs it passed would be refused at estimation; mine one empty block
        (anvil stamps it with the current time). On other chains new blocks come by themselves."""
        if self.chain_id in (31337, 1337) and self.block_timestamp("latest") <= deadline:
            self.mine()

    def mine(self, seconds: int = 0, blocks: int = 1) -> None:
        """Devnet only (anvil): advance time by ``seconds`` and mine ``blocks`` blocks."""
        if seconds:
            self._rpc("evm_increaseTime", lambda: self.w3.provider.make_request("evm_increaseTime", [seconds]))
        for _ in range(blocks):
            self._rpc("evm_mine", lambda: self.w3.provider.make_request("evm_mine", []))

"""The chain client's calls of a run's life on the registry: the task's parameters, posting,
the allowlist, enrollment, closing enrollment, cancellation."""

from __future__ import annotations

from typing import Any, Sequence

from eth_utils import to_checksum_address

from tenzro_operator.chain.records import TxResult, b32
from tenzro_operator.errors import ChainError


class RunLifecycleCalls:
    """Calls of `ChainClient` of a run's life: parameters, posting, enrollment, cancellation."""

    def task_params(self, spec, spec_cid: str, initial_weights_root: bytes | None = None) -> dict[str, Any]:
        """``TaskParams`` of ``postTask`` from a validated `tenzro_operator.spec.TaskSpec`.

        ``initial_weights_root`` defaults to the weights root (receipt encoding v1) of
        ``metadata.protocol.initial_weights``.
        """
        from tenzro_operator.spec import spec_hash

        p = spec.require_protocol()
        if initial_weights_root is None:
            from tenzro_operator.receipt import weights_root

            initial_weights_root = weights_root([w.sha256_bytes for w in p.initial_weights])
        return {
            "taskId": spec.task_id_bytes, "specHash": spec_hash(spec), "specCid": spec_cid,
            "initialWeightsRoot": b32(initial_weights_root), "trainerCount": spec.trainer_count,
            "quorum": spec.quorum, "fragmentCount": spec.architecture.fragment_count,
            "innerSteps": spec.inner_steps, "maxRounds": spec.max_rounds, "graceWindowMs": spec.grace_window_ms,
            "aggregation": spec.aggregation_rule_id, "tier": spec.registry_tier,
            "minStake": p.min_stake_atto, "rewardPool": spec.reward_pool_atto,
            "fragmentSizes": list(p.fragment_sizes), "enrollmentSeconds": spec.enrollment_seconds,
            "syncerFeeBps": spec.syncer_fee_bps, "syncerBond": spec.syncer_bond_atto,
            "normScreenSq": p.norm_screen_sq_bits, "challengeSeconds": spec.challenge_seconds,
        }

    def _struct(self, method: str, index: int, values: dict[str, Any]) -> tuple:
        """Order a dict by the ABI components of input ``index`` of ``method``."""
        fn_abi = next(i for i in self.registry.abi if i.get("type") == "function" and i["name"] == method)
        comps = fn_abi["inputs"][index]["components"]
        missing = [c["name"] for c in comps if c["name"] not in values]
        if missing:
            raise ChainError(f"{method}: missing struct fields {missing}")
        return tuple(values[c["name"]] for c in comps)

    def post_task_params(self, params: dict[str, Any], approve: bool = True) -> TxResult:
        """``postTask`` with explicit ``TaskParams``; with ``approve`` the reward pool is authorized
        by a permit in the same transaction (`spend`), or approved first for a token without one."""
        struct = self._struct("postTask", 0, params)
        if approve and params["rewardPool"] > 0:
            return self.spend(params["rewardPool"], "postTask", struct)
        return self.transact("postTask", struct)

    def post_task(self, spec, spec_cid: str, approve: bool = True,
                  initial_weights_root: bytes | None = None) -> TxResult:
        """Approve the reward pool and post the task (the caller becomes the sponsor); with the
        spec's ``enrollment_allowlist`` (a tier 1 run, which nobody can enroll in before) its
        addresses are allowed next (`allow_trainers`). Returns the post's result.

        Raises:
            SpecError: the spec has no ``metadata.protocol``.
            ChainRevert: e.g. ``Registry__TaskExists``, ``Registry__QuorumExceedsTrainers``.
        """
        res = self.post_task_params(self.task_params(spec, spec_cid, initial_weights_root), approve)
        if spec.enrollment_allowlist:
            self.allow_trainers(spec.task_id_bytes, spec.enrollment_allowlist)
        return res

    def allow_trainers(self, task_id: bytes, trainers: Sequence[str]) -> TxResult:
        """``allowTrainers``: the sponsor of a tier 1 (Allowlist) run allows ``trainers`` to enroll.

        Raises:
            ChainRevert: ``Registry__NotSponsor``, ``Registry__WrongStatus`` (enrollment is over),
                ``Registry__UnsupportedTier`` (an Open run has no list).
        """
        return self.transact("allowTrainers", b32(task_id), [to_checksum_address(t) for t in trainers])

    def enroll_trainer(self, task_id: bytes, stake: int, did: str, approve: bool = True) -> TxResult:
        """Stake ``stake`` atto-units and enroll; ``TrainerEnrolled`` carries index and shard.

        With ``approve`` the stake is authorized in the same transaction by an ERC-2612 permit
        when the token supports it (`spend`), else approved first; either way no allowance is left.
        """
        if approve:
            return self.spend(stake, "enrollTrainer", b32(task_id), stake, did)
        return self.transact("enrollTrainer", b32(task_id), stake, did)

    def close_enrollment(self, task_id: bytes) -> TxResult:
        """Open round 0 with the trainers enrolled so far (anyone, once the run's enrollment
        deadline has passed with >= K enrolled); ``RoundOpened`` carries the deadline.

        Raises:
            ChainRevert: ``Registry__EnrollmentStillOpen`` (before the deadline),
                ``Registry__NotEnoughEnrolled``, ``Registry__WrongStatus``.
        """
        return self.transact("closeEnrollment", b32(task_id))

    def cancel_task(self, task_id: bytes) -> TxResult:
        """Cancel an Enrolling run: the sponsor at any time, anyone once the enrollment deadline
        has passed with fewer than K enrolled. Pool and stakes are credited back (``TaskCancelled``).

        Raises:
            ChainRevert: ``Registry__NotSponsor`` (someone else before the deadline),
                ``Registry__RunCanTrain`` (someone else, >= K enrolled), ``Registry__WrongStatus``.
        """
        return self.transact("cancelTask", b32(task_id))

    def cancel_stalled_run(self, task_id: bytes) -> TxResult:
        """Anyone ends a Training run that cannot go on (PROTOCOL.md §4, "A run that cannot go on"):
        its syncer is replaceable and no other candidate could be elected. The silent syncer's bond
        is burned, stakes are refunded, the trainers' pot for the committed rounds is
        claimable with credit proofs, the rest of the pool goes to the sponsor (``StalledRunCancelled``).

        Raises:
            ChainRevert: ``Registry__WrongStatus`` (not Training), ``Registry__SyncerStillActive``,
                ``Registry__RunCanGoOn`` (a candidate could be elected: elect it instead),
                ``Registry__ChallengesPending``, ``Registry__ChallengeWindowOpen`` (root flow: the
                last committed round can still be proven wrong).
        """
        return self.transact("cancelStalledRun", b32(task_id))

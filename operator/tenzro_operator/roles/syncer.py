"""The syncer daemon: collect the round's outer gradients, validate, aggregate with the task's
rule, apply the outer Nesterov step, pin the new weights, momentum and transcript, commit the
round by root (``commitRound``, contracts/PROTOCOL.md §5); seal.

One round r (DiLoCo, Douillard et al. 2023, Algorithm 1, lines 10-12; DESIGN.md "Data flow"):

1. take in the trainers' signed commitments during the round's commit phase and the reveals
   that open them after it (pubsub and the JSON-RPC endpoint, `tenzro_operator.roles.root_syncer`),
   and the forced submissions on-chain (``GradientSubmitted`` events, read with a reorg-safe
   `EventCursor`); validate each: fetch the CID from IPFS (bounded retries; unavailable ->
   ``Unavailable``), sha256 of the bytes == payloadHash (else ``HashMismatch``), decodes as a
   ``pseudo_gradient`` payload of this task, round and fragment under the spec's codec (else
   ``Malformed``), names / shapes / dtype, finite (``NonFinite``), and the bytes decode to the
   vector of the signed chunk commitment. An off-chain submission found invalid is simply left
   out (the transcript says why). A forced one binds the syncer (PROTOCOL.md §4): a non-finite
   payload is proven with ``proveInvalid`` by opening the chunk that holds the value, a norm
   outlier with ``proveNormOutlier`` against the previous round's accepted sums; one it cannot
   fetch, decode or match with its commitment is challenged whole with ``challengeAvailability``
   (the trainer must publish the whole payload within the challenge window, or is slashed by an
   ``expireAvailability``); the registry refuses a commit that leaves out a live forced
   submission on any other ground;
2. commit once the commit phase has closed, the reveals and forced submissions have settled and
   no challenge is pending, when every fragment has >= K valid submissions and either every
   active trainer has submitted every fragment or ``straggler_wait_s`` more seconds passed; or,
   whatever arrived, once the round deadline (chain time) has passed. The norm screen
   (`tenzro_operator.evidence.norm_outliers`) and the spec's loss-improvement scoring
   (``score_min``) run first;
3. aggregate each fragment's accepted submissions with ``build_rule(spec.aggregation_name,
   spec.aggregation_params)``, keyed by trainer index (the rules order by key, so a replay is
   bit-identical), apply `OuterOptimizer` (lr / momentum / nesterov from the spec's
   ``metadata.outer``, else 0.7 / 0.9 / Nesterov); a fragment without accepted submissions keeps
   its weights and its momentum;
4. encode the new weights (`TaskRuntime.encode_weights`), pin them with the momentum and the
   `RoundTranscript`, call ``commitRound`` with the fragments root, one accepted bitmap per
   trainer index (``trainersOf`` order) and the cumulative credits before the round;
5. persist ``<data_dir>/syncer-<task>.pt`` (round, outer optimizer state dicts) atomically,
   append the timing split to ``<data_dir>/syncer-rounds.jsonl``; slash every on-chain forced
   commitment of the round that was never revealed (``slashUnrevealed``, burned); answer any
   ``challengeWeights`` of its committed rounds within their windows.

Restarts: the saved state continues when the chain's open round is the one after the saved
round. When the state file is missing or one committed round behind (a crash after the
``commitRound`` transaction), the missing rounds are rebuilt by replaying their transcripts
from IPFS (accepted payloads, same rule, same outer step) and the rebuilt weights are checked
against the committed root; a mismatch stops the daemon with a clear error.

Election (contracts/PROTOCOL.md §4): a syncer is elected only for a Training run, in two steps
(``requestSyncerElection``, then ``electSyncer`` from the next block, `ChainClient.run_syncer_election`).
While the run is Enrolling the syncer waits: round 0 opens with the M-th enrollment, or, once the
spec's enrollment deadline has passed, the syncer opens it itself with ``closeEnrollment`` (>= K
enrolled) or cancels a run short of K (``close_enrollment``, default on; anyone may do either).
Then it requests and resolves the election; if another candidate is drawn it leaves the run (or,
serving one configured run, waits as a stand-in, keeping the open round's delivered submissions
from the topic, `root_stand_by`, so that it can commit the round if the syncer goes silent after
the trainers delivered). A silent syncer is replaced the same way once
``syncerReplaceableAt`` has passed (its bond is burned). The elected syncer locks the run's
``syncerBond`` of its pool stake until the seal, so its unlocked stake must cover the bond to be
drawn at all.

After the last round's challenge window the syncer calls ``sealRootRun`` (anyone may), claims
the fees it accrued (one per round it committed: ``rewardPool * syncerFeeBps / 10000 /
maxRounds``) with ``claimSyncerFee``, and returns; ``summary`` counts rounds, seals and fees.

Fault injection (tests and demos only, off by default): ``fault: {wrong_aggregate_at: [round,
fragment], go_silent_at: round, drop_submission: [round, fragment, trainer_index], ...}`` in the config
(`SyncerFaultSettings`): the lies the watcher (`tenzro_operator.roles.watcher`) and the registry
must catch.

Many runs: with a ``task_id`` in the config the daemon serves that run only. Without one it
serves every run it is (or gets) elected for at once, one thread per run (`serve_elected`):
the registry may elect it for a second run while it serves a first, and a missed round deadline
there would make it replaceable and slashable.
"""

from __future__ import annotations

import contextvars
import copy
import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tenzro_operator.chain import ZERO_ADDRESS, ChunkOpening, RunStatus, RunView, SignedPayload, SlashReason
from tenzro_operator.chain.event_cursor import EventCursor
from tenzro_operator.config import SyncerConfig
from tenzro_operator.daemon import Daemon, StopRequested, append_jsonl, atomic_torch_save, load_state_file
from tenzro_operator.errors import (
    ChainRevert,
    InsufficientTokens,
    IpfsContentError,
    IpfsError,
    IpfsIntegrityError,
    IpfsNotFound,
    IpfsUnavailable,
    TenzroError,
)
from tenzro_operator.evidence import bits_to_f32, exceeds_reference, non_finite_opening, norm_outliers
from tenzro_operator.logs import log_context, set_log_context
from tenzro_operator.metrics import SyncerMetrics, task_label
from tenzro_operator.receipt import weights_root
from tenzro_operator.roles.root_syncer import NOT_YET, RootSyncerMixin
from tenzro_operator.root_flow import fragment_weights_roots
from tenzro_operator.spec import TaskSpec
from tenzro_operator.task_assets import fetch_spec, initial_weights, load_dataset
from tenzro_operator.task_runtime import TaskRuntime, outer_config
from tenzro_operator.transcript import (
    MAX_TRANSCRIPT_BYTES,
    BlobRef,
    FragmentRecord,
    Rejection,
    RoundTranscript,
    Submission,
)
from tenzro_operator.units import format_tokens
from tenzro_operator.whole_answer import answered_vector
from tenzro_trainer.aggregation import build_rule, trainer_key, validate_payload
from tenzro_trainer.commitment import ChunkTree, flatten_fragment
from tenzro_trainer.compression.wire import unflatten
from tenzro_trainer.errors import PayloadError, PayloadRejected
from tenzro_trainer.evaluate import HeldoutEvaluator
from tenzro_trainer.fragments import fragment_state
from tenzro_trainer.outer import OuterOptimizer

__all__ = ["SyncerDaemon", "SyncerDaemonConfig", "SyncerFaultSettings"]

log = logging.getLogger("tenzro.syncer")

_REASON_OF_REJECT = {"names": "Malformed", "shape": "Malformed", "dtype": "Malformed", "non_finite": "NonFinite",
                     "norm": "NormOutlier"}
# what the syncer does on-chain about an invalid submission: prove it (evidence the registry
# checks), or challenge its availability (anything it cannot fetch, decode or match)
_PROVE = {"NonFinite": SlashReason.NON_FINITE}  # a norm outlier: proveNormOutlier
_CHALLENGE = ("Unavailable", "HashMismatch", "Malformed")
# Reverts of a report or a new availability challenge that mean there is nothing (more) to do for
# the submission: another report or challenge came first (a stale read), or protocol v3's bounds
# closed it (PROTOCOL.md §4: challenges open until max(roundDeadline, the syncer's election) +
# challengeSeconds, at most MAX_AVAILABILITY_CHALLENGES per submission).
_STALE = ("Registry__NoSuchSubmission", "Registry__ChallengePending")
_CLOSED = ("Registry__DeadlinePassed", "Registry__ChallengeLimit")
_UNUSABLE = "unusable"  # answered, yet neither its CID nor a whole answer on-chain gives the payload


class SyncerFaultSettings(BaseModel):
    """Deliberate misbehaviour of the syncer, ONLY for tests and demos (off unless configured):
    the lies a watcher (`tenzro_operator.roles.watcher`) and the registry must catch. Each key is
    off when left out; every injected fault is logged at WARNING with ``FAULT INJECTION``.

    Attributes:
        wrong_aggregate_at: ``[round, fragment]``: after the honest aggregate and outer step of
            that round, add 1.0 to the first coordinate of that fragment's new weights before they
            are pinned and committed. The perturbed weights stay the syncer's own state (saved in
            its state file), so later rounds build on them, as a real liar's would. A restarted
            syncer without its state file cannot rebuild them from the transcripts and halts.
        go_silent_at: ``round``: from that round on, never commit: the daemon idles (polls,
            logs once) until the registry replaces it after ``syncerTimeout`` (its bond burned),
            then it stops serving the run as any replaced syncer does.
        drop_submission: ``[round, fragment, trainer_index]``: leave that trainer's submission of
            that fragment out of that round's commit. Off-chain, the omission is invisible on-chain:
            the trainer sees it in the commit and forces its next submissions (a forced one left
            out is proven by a watcher's ``proveOmission``).
        censor_trainer: ``trainer_index``: from round 0 on, leave every submission of that trainer
            out of each commit, off-chain and forced alike. An off-chain omission is invisible
            on-chain (the trainer sees it in the commit and turns to the forced path,
            `RootTrainerMixin.check_left_out`) and a forced one is convicted by a watcher's
            ``proveOmission``.
        false_invalid_report: ``[round, fragment, trainer_index]``: before committing that round,
            report that trainer's valid submission of that fragment invalid (``proveInvalid``,
            NonFinite, with no defective chunk to open). The registry checks the evidence and
            refuses (an off-chain delivery is no live on-chain submission,
            ``Registry__NoSuchSubmission``; a forced one has no such chunk): nobody is slashed;
            the syncer logs the refusal at ERROR once and commits the round honestly.
        false_loss_increase: ``trainer_index``: with ``score_min``: reject every
            off-chain submission of that trainer as ``LossIncrease`` whatever its score. Nothing
            on-chain can tell; the trainer scores its own payload, finds the verdict false and
            delivers on-chain from the next round on (`RootTrainerMixin.check_left_out`), where
            no score leaves a submission out.
    """

    model_config = ConfigDict(extra="forbid")

    wrong_aggregate_at: tuple[int, int] | None = None
    go_silent_at: int | None = Field(default=None, ge=0)
    drop_submission: tuple[int, int, int] | None = None
    censor_trainer: int | None = Field(default=None, ge=0)
    false_invalid_report: tuple[int, int, int] | None = None
    false_loss_increase: int | None = Field(default=None, ge=0)

    @field_validator("wrong_aggregate_at", "drop_submission", "false_invalid_report")
    @classmethod
    def _non_negative(cls, v):
        if v is not None and any(x < 0 for x in v):
            raise ValueError(f"must be non-negative, got {list(v)}")
        return v


class SyncerDaemonConfig(SyncerConfig):
    """``syncer.yaml`` as the daemon reads it: `SyncerConfig` plus daemon-only keys.

    Extra keys: ``straggler_wait_s`` (seconds to wait for the remaining trainers once every
    fragment has K valid submissions, default 2), ``fetch_retries`` (attempts per payload CID
    before it is rejected ``Unavailable``, default 3), ``fetch_timeout_s`` (per attempt, default
    10), ``evaluate`` (held-out loss of the new weights after each round, default true),
    ``dataset_path`` (local copy of the dataset for the evaluation), ``max_consecutive_failures``
    (default 5), ``discover_timeout_s`` (default 600), ``exit_after_rounds`` (testing: return
    after finalizing this many rounds in this process, as if stopped), ``fetch_workers`` (payloads
    fetched at once, default 8), ``confirmations`` (blocks a submission must be buried under
    before it is read, default 0), ``reorg_tail_blocks`` (how deep below the head blocks are read
    one by one with their hashes checked: the deepest reorg and the largest node lag survived,
    default 64; `tenzro_operator.chain.event_cursor.EventCursor`), ``fault`` (`SyncerFaultSettings`: deliberate
    lies for tests and demos only; default off).
    """

    fault: SyncerFaultSettings | None = None
    straggler_wait_s: float = Field(default=2.0, ge=0)
    fetch_retries: int = Field(default=3, ge=1)
    fetch_timeout_s: float = Field(default=10.0, gt=0)
    evaluate: bool = True
    dataset_path: str | None = None
    max_consecutive_failures: int = Field(default=5, ge=1)
    discover_timeout_s: float = Field(default=600.0, gt=0)
    exit_after_rounds: int | None = Field(default=None, ge=1)
    fetch_workers: int = Field(default=8, ge=1)
    confirmations: int = Field(default=0, ge=0)
    reorg_tail_blocks: int = Field(default=64, ge=2)


@dataclass
class _Sub:
    """One submission of the open round (a forced one on-chain, or an off-chain reveal) and what
    the syncer made of it."""

    fragment: int
    trainer: str  # checksummed
    signed: SignedPayload  # the trainer's signed commitment, from the event
    block: int = 0  # the block of its GradientSubmitted event (0: off-chain)
    reason: str | None = None  # None = structurally valid
    detail: str = ""
    tensors: dict[str, torch.Tensor] | None = None
    tree: ChunkTree | None = None  # commitment of the decoded vector (kept for a non-finite proof)
    flat: torch.Tensor | None = None
    reported: bool = False  # proven invalid or challenged on-chain (or found so already)
    offchain: bool = False  # delivered over pubsub or the endpoint, not on-chain (nothing to report)
    closed: str = ""  # the revert that ended its challenges (_CLOSED), or _UNUSABLE: not challenged again
    unprovable: bool = False  # a forced norm outlier the registry would not convict (accepted instead)
    unpaid: bool = False  # a challenge's bond this account could not pay (logged once; tried every poll)

    @property
    def owes_report(self) -> bool:
        """Found invalid and not acted on yet (`SyncerDaemon.report`; a norm outlier is reported
        at the commit, by `finalize`)."""
        return self.reason not in (None, "NormOutlier") and not self.reported

    @property
    def cid(self) -> str:
        return self.signed.cid

    @property
    def payload_hash(self) -> bytes:
        return self.signed.payload_hash

    @property
    def key(self) -> str:
        return self.trainer.lower()

    def submission(self, extra: dict | None = None) -> Submission:
        """The transcript's record; ``extra``: the root flow's signed-struct fields."""
        return Submission(trainer=self.key, cid=self.cid, sha256="0x" + self.payload_hash.hex(), **(extra or {}))


@dataclass
class _RoundState:
    round: int
    subs: dict[tuple[int, str], _Sub] = field(default_factory=dict)
    quorum_since: float | None = None
    closes: int = 0  # root flow: the commit phase's last second (chain time)
    settled: bool = False  # root flow: no forced submission can arrive any more (`_root_inputs_settled`)
    challenged: bool = False  # the last collect sent an availability challenge (`ready` waits a step)
    first_block: int = 0  # the first block that can hold an event of this round's opening
    commitments: set[tuple[int, str]] = field(default_factory=set)  # on-chain forced commitments (fragment, trainer)
    t_start: float = field(default_factory=time.perf_counter)
    split: dict[str, float] = field(default_factory=lambda: {"fetch_s": 0.0, "validate_s": 0.0})


class SyncerDaemon(RootSyncerMixin, Daemon):
    """The syncer of one run (see the module docstring).

    Args:
        config: `SyncerDaemonConfig` (a plain `SyncerConfig` works with the defaults).
        account: the syncer's unlocked account.
        chain: a `ChainClient` signing as ``account``.
        ipfs: an `IpfsClient`.
        metrics: `SyncerMetrics` (default: a fresh one).
        stop: event that stops the daemon between steps.
    """

    role = "syncer"
    _sub_class = _Sub
    # the run being served (reset_run clears them)
    spec: TaskSpec | None
    runtime: TaskRuntime | None
    outers: list[OuterOptimizer]  # one per fragment
    last_finalized: int  # round finalized last (-1: none)
    _run_start: int  # first block that can hold an event of the run (`ChainClient.run_start_block`)
    cursor: EventCursor | None  # GradientSubmitted, SubmissionCommitted of the run (from the open round's first block)
    _round: _RoundState | None
    _eval: HeldoutEvaluator | None
    _last_loss: float | None  # held-out loss of the weights finalized last

    def __init__(self, config: SyncerConfig, account, chain, ipfs, *, metrics: SyncerMetrics | None = None,
                 stop=None, leave_to_others: bool = False) -> None:
        super().__init__(config, account, chain, ipfs, metrics=metrics or SyncerMetrics(), stop=stop,
                         max_consecutive_failures=getattr(config, "max_consecutive_failures", 5))
        self.opt = lambda name, default: getattr(config, name, default)
        self.rounds_path = self.data_dir / "syncer-rounds.jsonl"
        self.leave_to_others = leave_to_others
        self.fault: SyncerFaultSettings | None = getattr(config, "fault", None)
        self._fault_false_reported = False  # false_invalid_report: made once
        self._fault_silent_logged = False
        self.reset_run()
        self.finalized_here = 0
        self.history: list[dict[str, Any]] = []
        # what this process did, over every run it served (shared with the per-run workers)
        self.summary: dict[str, int] = {"rounds_finalized": 0, "runs_sealed": 0, "fees_claimed_atto": 0,
                                        "weights_challenges_answered": 0, "unrevealed_slashed": 0}

    _tally_lock = threading.Lock()  # the per-run threads of `serve_elected` share one `summary`
    _split_lock = threading.Lock()  # the fetch threads of `validate_all` add to one timing split

    def _tally(self, key: str, n: int) -> None:
        with self._tally_lock:
            self.summary[key] += n

    @property
    def state_path(self):
        """``<data_dir>/syncer-<full task id hex>.pt`` (a poster chooses task ids: a prefix of one
        could name another run's file)."""
        return self.data_dir / f"syncer-{self.task_id.hex()}.pt"

    @property
    def _legacy_state_path(self):
        """Where versions before issue 14 saved the state (16 hex digits); read if it is this run's."""
        return self.data_dir / f"syncer-{self.task_id.hex()[:16]}.pt"

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:
        """Start-up checks, register, then serve: the config's ``task_id``, else every run this
        account is (or gets) elected for, each in a thread of its own (`serve_elected`). Returns
        the exit code (0 after the seal(s), a clean stop, or ``exit_after_rounds``).

        Raises:
            TenzroError: a failed start-up check (service named), `DaemonHalted`, or a state
                that cannot be rebuilt (in any run served).
        """
        with log_context(role="syncer"):
            self.startup_checks()
            try:
                self.ensure_registered()
                if self.config.task_id:
                    self.serve_riding_outages(self.find_task())
                else:
                    self.serve_elected()
            except StopRequested:
                log.info("stop requested: state saved, exiting")
            finally:
                self.close_peer_books()
        log.info("syncer done: %s", self.summary)
        return 0

    def ensure_registered(self) -> None:
        """Join the syncer pool (approve + registerSyncer) unless registered with enough stake.
        The stake must be at least the registry's ``minSyncerStake`` (a first registration below
        it reverts); each run it is elected for locks that run's ``syncerBond`` of it."""
        info = self.chain.syncer_info()
        need = self.chain.min_syncer_stake()
        leaving = info.registered and self.chain.syncer_weight()[0] == 0
        if info.registered and info.stake >= need and not leaving:
            log.info("syncer candidate with %d atto stake (%d locked as bonds)", info.stake, info.locked)
            return
        # a leaving candidate (its first unregisterSyncer) joins the draws again with a top-up
        amount = max(self.config.register_stake_atto or 0, need - info.stake, 1 if leaving else 0)
        self.chain.register_syncer(amount)
        log.info("registered as syncer candidate with %d atto stake", info.stake + amount)

    def find_task(self, patient: bool = False) -> bytes:
        """The config's ``task_id`` (waits until posted), else the first run `_candidates` lists.
        ``patient``: wait without a time limit."""
        return self.wait_for_task(lambda: next(iter(self._candidates()), None), "run to serve", patient)

    def reset_run(self) -> None:
        """Forget the previous run: spec, layout, outer optimizers, rounds, event cursor, evaluator."""
        self.task_id = self.spec = self.runtime = self._round = self._eval = self._last_loss = None
        self.cursor = None
        self.outers = []
        self.last_finalized = -1
        self._run_start = self.chain.deployment.deploy_block

    def _candidates(self) -> list[bytes]:
        """Unsealed runs this account should serve: its syncer is this account or unset, or the
        syncer is replaceable (missed a round deadline by the timeout), in posting order."""
        out, now = [], None
        for tid, run in self.live_runs():
            if run.syncer in (ZERO_ADDRESS, self.account.address):
                out.append(tid)
            elif run.status == RunStatus.TRAINING and run.syncer_replaceable_at:
                now = self.chain_now() if now is None else now
                if now > run.syncer_replaceable_at:
                    out.append(tid)
        return out

    # ------------------------------------------------------------------ every elected run

    def serve_elected(self) -> None:
        """Serve every run of `_candidates` at once, one thread per run, until ``max_runs`` runs
        are over (None: until stopped). Concurrent, not in turn: the registry may elect this
        account for a second run while it serves a first, and a round deadline missed there
        makes it replaceable and slashable.

        Each run gets a `SyncerDaemon` of its own (spec, outer optimizers, state file
        ``syncer-<task>.pt``) sharing this one's chain client (one nonce counter, thread-safe),
        IPFS client, metrics and stop event. A run left to another syncer does not count; it
        is served again if that syncer becomes replaceable.

        A run whose thread fails on its own (bad spec, unusable weights, `DaemonHalted`) is given
        up (`Daemon.quarantine`) and the others go on.

        Raises:
            TenzroError: no run within ``discover_timeout_s`` at start-up.
            ServiceUnavailable: the RPC endpoint or IPFS node is down (every run's thread is
                stopped first, its state saved). StopRequested: a stop was requested.
        """
        limit = getattr(self.config, "max_runs", 1)
        timeout_s = float(getattr(self.config, "discover_timeout_s", 600.0))
        deadline = time.monotonic() + timeout_s
        workers: dict[bytes, threading.Thread] = {}
        outcome: dict[bytes, bool | Exception] = {}
        over: set[bytes] = set()
        try:
            while True:
                for tid in [t for t, th in workers.items() if not th.is_alive()]:
                    del workers[tid]
                    res = outcome.pop(tid, None)
                    if isinstance(res, StopRequested):
                        continue
                    if isinstance(res, Exception):
                        self.quarantine(tid, res)  # raises when the RPC or IPFS node is down
                    elif res:
                        over.add(tid)
                if limit is not None and len(over) >= limit and not workers:
                    return
                self.check_stop()
                if limit is None or len(over) + len(workers) < limit:
                    # a failed poll (RPC hiccup) is counted and retried after a backoff, never fatal to the
                    # runs in flight; max_consecutive_failures in a row halt on purpose (`guarded`)
                    candidates = self.guarded("discovery poll", self._candidates)
                    if candidates is None:
                        self.sleep(self.backoff_s())
                        continue
                    for tid in candidates:
                        if tid in workers or tid in over:
                            continue
                        workers[tid] = self._start_worker(tid, outcome)
                        if limit is not None and len(over) + len(workers) >= limit:
                            break
                if not workers and not over and time.monotonic() > deadline:
                    raise TenzroError(f"syncer: no run to serve after {timeout_s:.0f} s")
                self.sleep(self.poll_s)
        finally:
            if workers:
                self.request_stop()
                for th in workers.values():
                    th.join()

    def _start_worker(self, tid: bytes, outcome: dict) -> threading.Thread:
        cfg = self.config.model_copy(update={"task_id": "0x" + tid.hex()})
        worker = SyncerDaemon(cfg, self.account, self.chain, self.ipfs, metrics=self.metrics, stop=self.stop,
                              leave_to_others=True)
        worker.history = self.history  # one record list (list.append is atomic)
        worker.summary = self.summary  # one tally (`_tally` updates it under a lock)

        def target() -> None:
            with log_context(role="syncer"):
                try:
                    outcome[tid] = worker.serve_riding_outages(tid)
                except Exception as exc:  # noqa: BLE001 - handed to serve_elected
                    outcome[tid] = exc

        th = threading.Thread(target=target, name=f"syncer-{tid.hex()[:8]}", daemon=True)
        log.info("serving run 0x%s in thread %s", tid.hex()[:16], th.name)
        th.start()
        return th

    def ensure_elected(self, run: RunView) -> bool:
        """For a Training run without a syncer, or whose syncer became replaceable
        (``syncerReplaceableAt`` passed): run the two-step election (anyone may). True iff this
        account is the run's syncer afterwards."""
        me = self.account.address
        if run.syncer == me:
            return True
        if run.status != RunStatus.TRAINING:
            return False  # no election while Enrolling (nor after the last round)
        replaceable = run.syncer != ZERO_ADDRESS and run.syncer_replaceable_at and \
            self.chain_now() > run.syncer_replaceable_at
        if run.syncer != ZERO_ADDRESS and not replaceable:
            return False
        info = self.chain.syncer_info()
        if info.free < run.syncer_bond:
            log.warning("this account cannot be drawn for this run: unlocked stake %d atto < the run's bond %d "
                        "(register more stake); running the election for the others", info.free, run.syncer_bond)
        if replaceable:
            self.nudge_devnet(run.syncer_replaceable_at)
        try:
            elected = self.chain.run_syncer_election(self.task_id)
        except ChainRevert as exc:  # refused at estimate or reverted when mined (a lost race): ask the chain
            elected = self.chain.get_run(self.task_id).syncer
            log.info("syncer election refused (%s); the run's syncer is now %s%s", exc, elected,
                     " (this account)" if elected == me else "")
            return elected == me
        log.info("syncer election chose %s%s%s", elected, " (this account)" if elected == me else "",
                 f", replacing {run.syncer} (its bond burned)" if replaceable else "")
        return elected == me

    # ------------------------------------------------------------------ one run

    def serve(self, task_id: bytes) -> bool:
        """Serve run ``task_id`` until it is sealed (or ``exit_after_rounds``); True then. While
        the run is Enrolling, wait (closing or cancelling it after its enrollment deadline,
        `maybe_close_enrollment`); once it is Training, get elected. With ``leave_to_others``, a run
        another syncer holds is left to it (False; `serve_elected` comes back to it if that
        syncer becomes replaceable); else this syncer waits as a stand-in, ready to replace it, and
        keeps the open round's submissions meanwhile (`root_stand_by`)."""
        self.open_task(task_id)
        while True:
            self.check_stop()
            run = self.chain.get_run(task_id)
            if run.status in (RunStatus.SEALED, RunStatus.CANCELLED):
                log.info("run is %s: nothing to do", run.status.name)
                self.claim_fee()  # fees of rounds finalized before a restart (also of a cancelled run)
                return True
            if run.status == RunStatus.ENROLLING:
                if self.guarded("close enrollment", lambda: self.maybe_close_enrollment(run)) is None:
                    self.sleep(self.backoff_s() if self.consecutive_failures else self.poll_s)
                continue
            if self.ensure_elected(run):
                break
            if self.leave_to_others and run.syncer != ZERO_ADDRESS:
                log.info("run is served by syncer %s: looking for another run", run.syncer)
                return False
            self.guarded("stand by", lambda: self.root_stand_by(run))
            self.sleep(self.poll_s)
        self.root_listen()  # trainers deliver while restore fetches and evaluates the weights
        # a block of a committed round nobody serves right now (a stand-in taking over from a
        # syncer whose host is cut) is retried by the steps, not fatal
        self.guarded("restore the committed rounds", self.restore)
        self.step_until_done("syncer round")
        return True

    def prepare(self, run: RunView) -> None:
        """Spec (checked against ``specHash``), model layout, rule, outer config; the dataset when
        evaluating."""
        self.spec = fetch_spec(self.ipfs, run.spec_cid, run.spec_hash)
        self.runtime = TaskRuntime.from_spec(self.spec, max_params=self.config.max_model_params)
        self._run_start = self.chain.run_start_block(run)
        self.cursor = EventCursor(self.chain, ["GradientSubmitted", "SubmissionCommitted"], task_id=self.task_id, start_block=self._run_start,
                                  confirmations=int(self.opt("confirmations", 0)),
                                  tail_blocks=int(self.opt("reorg_tail_blocks", 64)),
                                  path=self.data_dir / f"syncer-{self.task_id.hex()}.cursor.json")
        self.rule = build_rule(self.spec.aggregation_name, self.spec.aggregation_params)
        self.outer_cfg = outer_config(self.spec)
        cfg_lr, cfg_mom = self.config.outer_lr, self.config.outer_momentum
        if (cfg_lr is not None and cfg_lr != self.outer_cfg.lr) or \
                (cfg_mom is not None and cfg_mom != self.outer_cfg.momentum):
            log.warning("outer_lr/outer_momentum of the config (%s, %s) differ from the task's (%s, %s); the "
                        "task's are used so that a replay reproduces the run", cfg_lr, cfg_mom, self.outer_cfg.lr,
                        self.outer_cfg.momentum)
        proto = self.spec.require_protocol()
        self.norm_multiple = proto.norm_multiple
        self.norm_screen_sq = proto.norm_screen_sq_bits
        self._trainer_index: dict[str, int] = {}
        self.root_prepare()
        if self.opt("evaluate", True):
            df = load_dataset(self.ipfs, self.spec, self.opt("dataset_path", None),
                              max_bytes=self.config.max_dataset_bytes)
            self._eval = HeldoutEvaluator(self.runtime.model_cfg, self.runtime.split(df))
        log.info("task %s: rule %r, outer %s, K=%d of M=%d, F=%d, %d rounds", self.spec.task_id, self.rule,
                 self.outer_cfg, self.spec.quorum, self.spec.trainer_count, len(self.runtime.fragments),
                 self.spec.max_rounds)
        bond, have = self.chain.challenge_bond(self.task_id), self.chain.token_balance()
        if have < bond:
            log.warning("this account holds %s outside its pool stake; an availability challenge of this run costs "
                        "a bond of %s (back when answered or expired): fund it, or a forced payload this syncer "
                        "cannot fetch holds the round's commit until it can", format_tokens(have),
                        format_tokens(bond))

    def maybe_close_enrollment(self, run: RunView) -> str | None:
        """After the run's enrollment deadline, open round 0 or cancel a run short of K
        (`Daemon.settle_enrollment`, whose outcome it returns); off with ``close_enrollment: false``."""
        if self.config.close_enrollment:
            return self.settle_enrollment(run)
        return None

    # ------------------------------------------------------------------ state

    def persist(self) -> None:
        """Save the round finalized last and the outer optimizers (atomic, fsynced). The event
        cursor has a file of its own (`EventCursor.save`); a restarted syncer reads the open
        round's submissions again from the block the round opened in."""
        atomic_torch_save({"task": "0x" + self.task_id.hex(), "round": self.last_finalized,
                           "outers": [copy.deepcopy(o.state_dict()) for o in self.outers]}, self.state_path)

    def restore(self) -> None:
        """Bring the outer optimizers to the chain's open round (see the module docstring).

        A saved state ahead of the chain (a reorg dropped a commit this syncer saved, or the
        transaction never made it) is not trusted: the rounds are rebuilt from the transcripts the
        chain does hold, and the dropped round is committed again.

        Raises:
            TenzroError: a committed round without its event, or a rebuilt round that does not
                match its committed weights.
        """
        run = self.chain.get_run(self.task_id)
        done = run.current_round - 1 if run.status == RunStatus.TRAINING else run.max_rounds - 1
        saved = None
        for path in (self.state_path, self._legacy_state_path):
            if path.exists():
                saved = load_state_file(path)
                if saved.get("task") == "0x" + self.task_id.hex():
                    break
                saved = None
        if saved is not None and saved["round"] > done:
            self.chain.resync_nonce()  # the dropped commit's nonce is free again
            log.warning("syncer state %s is at round %d but the chain has committed only up to round %d (a reorg "
                        "dropped a commit, or it never landed): rebuilding from the chain's transcripts and "
                        "committing again", self.state_path, saved["round"], done)
            saved = None
        self._round = None  # the open round's submissions are read again from the chain
        if saved is not None:
            self.outers = [OuterOptimizer.from_state_dict(s) for s in saved["outers"]]
            self.last_finalized = int(saved["round"])
            log.info("restored outer state after round %d from %s", self.last_finalized, self.state_path)
        else:
            state, _ = initial_weights(self.ipfs, self.spec, self.runtime, run.initial_weights_root)
            self.outers = [OuterOptimizer(fragment_state(state, names), self.outer_cfg)
                           for names in self.runtime.fragments]
            self.last_finalized = -1
            if done >= 0:
                log.warning("no state file %s: rebuilding rounds 0..%d from their transcripts", self.state_path, done)
        if done > self.last_finalized:
            commits = self.root_commits()  # one event scan for every round to rebuild
            for r in range(self.last_finalized + 1, done + 1):
                if r not in commits:
                    raise TenzroError(f"no RoundCommitted event for round {r} of task 0x{self.task_id.hex()}")
                self.rebuild_round(r, commits[r])
                self.last_finalized = r
                self.persist()

    def rebuild_round(self, r: int, commit: dict) -> None:
        """Re-run round r's aggregation and outer step from its pinned transcript and payloads
        (``commit``: its transcript and ``weightsRoot``, `root_commits`); checks the result against
        the committed weights root (over the §2 roots of the rebuilt weights, PROTOCOL.md §5) and
        the transcript's blob SHA-256s (bound by its hash)."""
        tr = RoundTranscript.parse(self.ipfs.cat(commit["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                   bytes(commit["transcriptHash"]))
        index = {a.lower(): i for i, a in enumerate(self.chain.trainers_of(self.task_id))}
        for fr in sorted(tr.fragments, key=lambda x: x.fragment):
            updates = {}
            for s in fr.accepted:
                raw = self.ipfs.cat(s.cid, max_bytes=self.runtime.payload_cap(fr.fragment))
                if "0x" + hashlib.sha256(raw).hexdigest() != s.sha256.lower():
                    raise TenzroError(f"rebuilding round {r}: payload {s.cid} does not hash to {s.sha256}")
                updates[trainer_key(index[s.trainer.lower()])] = self.runtime.decode_payload(raw, fr.fragment)[0]
            outer = self.outers[fr.fragment]
            outer.step(self.rule(updates) if updates else outer.zero_aggregate())
        blobs = self.runtime.encode_weights(self._state(), r)
        got = [hashlib.sha256(b).digest() for b in blobs]
        want = tr.weights_refs()[1]
        if weights_root(fragment_weights_roots(self._state(), self.runtime.fragments)) != commit["weightsRoot"]:
            raise TenzroError(f"rebuilding round {r} from its transcript gives other weights than the "
                              "committed root; cannot continue this run safely")
        if got != want:
            bad = [f for f in range(len(got)) if got[f] != want[f]]
            raise TenzroError(f"rebuilding round {r} from its transcript gives other weights (fragments {bad}) "
                              "than the committed ones; cannot continue this run safely")
        log.info("rebuilt round %d from its transcript (weights match the chain)", r)

    def _state(self) -> dict[str, torch.Tensor]:
        state: dict[str, torch.Tensor] = {}
        for o in self.outers:
            state.update(o.weights())
        return state

    # ------------------------------------------------------------------ a round

    def step(self) -> str:
        """One poll: seal when Completed; else collect and validate new submissions of the open
        round and finalize it when it is time. Returns ``"done"`` after the seal."""
        self.check_stop()
        run = self.chain.get_run(self.task_id)
        if run.status in (RunStatus.TRAINING, RunStatus.COMPLETED):
            self.root_answer_weights()  # before the seal, which waits for every weights challenge
        if run.status == RunStatus.COMPLETED:
            if not self.root_seal():
                self.sleep(self.poll_s)
                return "next"
            self.claim_fee()
            self.root_close()
            return "done"
        if run.status in (RunStatus.SEALED, RunStatus.CANCELLED):
            if run.status == RunStatus.SEALED:  # sealed by another account (a trainer claiming) first
                log.info("sealed by another account: the run ended sealed")
                self._tally("runs_sealed", 1)
            self.claim_fee()  # cancelStalledRun leaves the fees of committed rounds claimable
            self.root_close()
            return "done"
        if run.syncer != self.account.address:
            log.warning("no longer the syncer of this run (now %s): stopping", run.syncer)
            self.root_close()
            return "done"
        r = run.current_round
        set_log_context(round=r)
        if self.fault is not None and self.fault.go_silent_at is not None and r >= self.fault.go_silent_at:
            if not self._fault_silent_logged:
                log.warning("FAULT INJECTION: going silent at round %d (go_silent_at=%d): no more finalizes; idling "
                            "until the registry replaces this syncer", r, self.fault.go_silent_at)
                self._fault_silent_logged = True
            self.sleep(self.poll_s)
            return "next"
        if r - 1 != self.last_finalized or not self.outers:  # finalized elsewhere, a previous life, or not restored
            self.restore()
        if self._round is None or self._round.round != r:
            self._open_round(run)
        self.collect(run)
        if self._round is None:  # a reorg: read the run again first
            return "next"
        self.expire_lapsed(run)
        if self.ready(run):
            if self.finalize(run):
                if self.opt("exit_after_rounds", None) and self.finalized_here >= self.opt("exit_after_rounds", None):
                    log.info("exit_after_rounds=%d reached: exiting", self.finalized_here)
                    self.request_stop()  # the process ends here, whatever max_runs says
                    return "done"
                return "next"
        self.sleep(self.poll_s)
        return "next"

    def _open_round(self, run: RunView) -> None:
        """Start the round state of the chain's open round, its submissions read from the block the
        round opened in (`ChainClient.first_block_at` its ``round_opened_at``: early, never late)."""
        self._round = _RoundState(run.current_round)
        self._round.closes = self.chain.commit_phase(self.task_id)[0]
        self.root_drop_rounds_before(run.current_round)
        self.metrics.round.labels(task=task_label(self.task_id)).set(run.current_round)
        start = max(self._run_start, self.chain.first_block_at(run.round_opened_at))
        self._round.first_block = start
        log.info("round %d: reading submissions from block %d", run.current_round, start)
        if self.cursor.next_block > start:
            self.cursor.rewind(start)
        else:  # nothing of this round lies before the block it opened in
            self.cursor.seek(start)

    def collect(self, run: RunView) -> None:
        """Read new ``GradientSubmitted`` events of the open round (`EventCursor`: verified against
        a lagging node, rewound on a reorg), validate each new one, and report the invalid ones
        (retried on the next poll if a report failed); a challenged one that its trainer answered is
        checked again (`_rechallenge_answered`). After a reorg the round's submissions are
        read again from the chain and every report redone where it is missing."""
        rs = self._round
        rs.challenged = False
        batch = self.cursor.poll()
        if batch.reorg_from is not None:  # the next step reads the run again and the round from its start
            log.warning("reorg from block %d: reading the open round and its submissions again from the chain",
                        batch.reorg_from)
            self._round = None
            self.chain.resync_nonce()  # transactions of ours may have gone with the replaced blocks
            self.cursor.save()
            return
        new: list[_Sub] = []
        for ev in batch.events:
            a = ev["args"]
            if int(a["round"]) != rs.round:
                continue
            if ev["event"] == "SubmissionCommitted":  # its reveal is a GradientSubmitted (`root_slash_unrevealed`)
                rs.commitments.add((int(a["fragment"]), a["trainer"].lower()))
                continue
            sub = _Sub(int(a["fragment"]), a["trainer"], SignedPayload.from_event(a), block=int(ev["block_number"]))
            held = rs.subs.get((sub.fragment, sub.key))
            if held is not None and held.offchain:
                # a forced submission replaces the off-chain copy read before it; the
                # registry requires the on-chain one accepted or proven invalid (left out, it is
                # an omission anyone proves), and no score may leave it out
                del rs.subs[(sub.fragment, sub.key)]
            elif held is not None or any((s.fragment, s.key) == (sub.fragment, sub.key) for s in new):
                continue
            new.append(sub)
        # off-chain submissions: the reveals that open a timely commitment
        new += [s for s in self.root_collect(run, rs.closes)
                if not any((o.fragment, o.key) == (s.fragment, s.key) for o in new)]
        try:
            self.validate_all(new, run)
        except BaseException:  # an IPFS outage, a stop: what was not recorded is read again next time
            pending = [s.block for s in new if not s.offchain and (s.fragment, s.key) not in rs.subs]
            if pending:
                self.cursor.rewind(min(pending))
            raise
        finally:
            self.cursor.save()
        for sub in rs.subs.values():
            if sub.owes_report:
                self.report(sub)
        self._rechallenge_answered()

    def validate_all(self, subs: list[_Sub], run: RunView) -> None:
        """Validate new submissions ``fetch_workers`` at a time, each within a fetch budget tied to
        the round's deadline (`_fetch_budget_s`), then record them in chain order; duplicate
        payload hashes of the round are rejected after (the first submitted keeps its place).

        Raises:
            IpfsUnavailable: this syncer's own IPFS node is down (the submissions validated so
                far are kept; the others are read again on the next poll).
        """
        rs = self._round
        if not subs:
            return
        deadline = time.monotonic() + self._fetch_budget_s(run)
        workers = min(int(self.opt("fetch_workers", 8)), len(subs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fetch") as pool:
            # each thread runs in a copy of this one's context: log lines keep role, task and round
            futures = [pool.submit(contextvars.copy_context().run, self.validate, sub, deadline) for sub in subs]
        outage = None
        for sub, fut in zip(subs, futures):
            exc = fut.exception()
            if exc is not None:
                if not isinstance(exc, IpfsUnavailable):
                    raise exc
                outage = outage or exc
                continue
            first = next((s for s in rs.subs.values() if s.payload_hash == sub.payload_hash and s.key != sub.key), None)
            if first is not None and sub.reason is None:
                self._reject(sub, "Malformed", f"payload 0x{sub.payload_hash.hex()} duplicates the one trainer "
                                               f"{first.trainer} submitted for fragment {first.fragment}")
            rs.subs[(sub.fragment, sub.key)] = sub
            self.metrics.submissions.labels(task=task_label(self.task_id)).inc()
        if outage is not None:
            raise outage

    def _fetch_budget_s(self, run: RunView) -> float:
        """Seconds the fetches of one batch may take: ``fetch_retries * fetch_timeout_s``, cut to
        the time left before the round's deadline (at least one ``fetch_timeout_s``), so that
        unavailable payloads never push the finalize past the deadline by more than that."""
        per = float(self.opt("fetch_timeout_s", 10.0))
        full = per * int(self.opt("fetch_retries", 3))
        left = float(run.round_deadline - self.chain_now())
        return max(per, min(full, left))

    def validate(self, sub: _Sub, deadline: float | None = None) -> None:
        """Fetch (bounded retries, byte cap `payload_cap`, everything before the monotonic
        ``deadline``) and check one submission; sets ``sub.reason`` when invalid. Every fault of
        the submission is its rejection, never an exception: a CID that is not one, that can not
        be verified, a directory or too many bytes is ``Malformed``; not found in time, bytes that
        do not match the CID, or a node refusal about this CID are ``Unavailable`` (not slashed).

        Raises:
            IpfsUnavailable: this syncer's own IPFS node does not answer.
        """
        rs = self._round
        t0 = time.perf_counter()
        retries = int(self.opt("fetch_retries", 3))
        per = float(self.opt("fetch_timeout_s", 10.0))
        if deadline is None:
            deadline = time.monotonic() + per * retries
        raw, why, fault = None, "", None
        cap = self.runtime.payload_cap(sub.fragment)
        for attempt in range(retries):
            left = deadline - time.monotonic()
            if left <= 0:
                why = why or "the round's fetch budget was spent"
                break
            try:
                raw = self.ipfs.cat(sub.cid, timeout_s=min(per, left), max_bytes=cap)
                break
            except IpfsUnavailable:
                raise
            except (IpfsNotFound, IpfsIntegrityError) as exc:
                why = str(exc)
                if attempt + 1 < retries:
                    time.sleep(min(0.2 * 2 ** attempt, 2.0, max(0.0, deadline - time.monotonic())))
            except IpfsContentError as exc:  # not a CID, unverifiable, a directory, oversize
                fault = str(exc)
                break
            except IpfsError as exc:  # the node refused this CID for a reason of its own
                why = str(exc)
                break
        with self._split_lock:
            rs.split["fetch_s"] += time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            if fault is not None:
                self._reject(sub, "Malformed", f"cid {sub.cid!r}: {fault}")
                return
            if raw is None:
                self._reject(sub, "Unavailable", f"payload not retrievable from IPFS: {why}")
                return
            self.metrics.ipfs_in(len(raw))
            got = hashlib.sha256(raw).digest()
            if got != sub.payload_hash:
                self._reject(sub, "HashMismatch", f"sha256 of the bytes at the CID is 0x{got.hex()}, "
                                                  f"payloadHash posted 0x{sub.payload_hash.hex()}")
                return
            try:
                tensors, meta = self.runtime.decode_payload(raw, sub.fragment)  # under the task's codec
            except PayloadError as exc:
                self._reject(sub, "Malformed", str(exc))
                return
            want = {"kind": "pseudo_gradient", "round": str(rs.round), "fragment": str(sub.fragment),
                    "task": self.runtime.task, "trainer": sub.key}
            bad = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
            if bad:
                self._reject(sub, "Malformed", f"payload metadata {bad} does not match {want}")
                return
            try:
                norm = validate_payload(tensors, self.runtime.layouts[sub.fragment])
            except PayloadRejected as exc:
                reason = _REASON_OF_REJECT.get(exc.reason, "Malformed")
                if reason == "NonFinite" and self._matches_commitment(sub, tensors):
                    sub.reason, sub.detail = reason, str(exc)  # keep the tree: the proof opens it
                    self.metrics.rejections.labels(task=task_label(self.task_id), reason=reason).inc()
                    log.warning("REJECTED submission trainer=%s fragment=%d cid=%s reason=NonFinite: %s",
                                sub.trainer, sub.fragment, sub.cid, exc)
                else:
                    self._reject(sub, "Malformed", str(exc))
                return
            if not self._matches_commitment(sub, tensors):
                self._reject(sub, "Unavailable", "the payload at the CID is not the vector of the signed commitment "
                                                 f"(payloadRoot 0x{sub.signed.payload_root.hex()})")
                return
            sub.tensors, sub.tree, sub.flat = tensors, None, None
            log.info("valid submission trainer=%s fragment=%d norm=%.4g", sub.trainer, sub.fragment, norm)
        finally:
            with self._split_lock:
                rs.split["validate_s"] += time.perf_counter() - t1

    def _matches_commitment(self, sub: _Sub, tensors: dict[str, torch.Tensor]) -> bool:
        """Whether the decoded tensors are the vector the trainer committed to (PROTOCOL.md §2);
        keeps the tree and flat vector on ``sub``."""
        sub.flat = flatten_fragment(tensors)
        sub.tree = ChunkTree(sub.flat)
        return sub.tree.root == (sub.signed.payload_root, sub.signed.payload_sumsq)

    def _reject(self, sub: _Sub, reason: str, detail: str) -> None:
        sub.reason, sub.detail, sub.tensors = reason, detail, None
        if reason != "NonFinite":
            sub.tree = sub.flat = None
        self.metrics.rejections.labels(task=task_label(self.task_id), reason=reason).inc()
        log.warning("REJECTED submission trainer=%s fragment=%d cid=%s reason=%s: %s", sub.trainer, sub.fragment,
                    sub.cid, reason, detail)

    def report(self, sub: _Sub) -> None:
        """Act on-chain on an invalid submission, with evidence (PROTOCOL.md §4): ``proveInvalid``
        for a non-finite value (the opened chunk) or a norm outlier (every signed sum of the
        fragment), else ``challengeAvailability`` of its first chunk. A submission the chain
        already shows rejected, or already challenged, counts as done; so does one the registry no
        longer lets anyone act on (`Registry__DeadlinePassed`: past max(roundDeadline, the syncer's
        election) + challengeSeconds;
        `Registry__ChallengeLimit`: its challenges are used up), logged.

        Raises:
            ChainRevert: any other refusal of the registry (reported again on the next poll).
        """
        if sub.reported or sub.offchain:  # nothing on-chain to act on: the submission is simply not accepted
            sub.reported = True
            return
        rs = self._round
        t0 = time.perf_counter()
        try:
            if sub.reason == "NormOutlier":
                ref = self._norm_reference(sub.fragment)
                res = self.chain.prove_norm_outlier(self.task_id, rs.round, sub.fragment, sub.trainer, sub.signed,
                                                    ref[0])
                ev = res.event("InvalidProven")
                log.warning("proved forced trainer=%s fragment=%d a norm outlier against round %d's accepted sums: "
                            "slashed %d atto (bounty %d)", sub.trainer, sub.fragment, rs.round - 1, ev["slashed"],
                            ev["bounty"])
            elif sub.reason in _PROVE:
                res = self.chain.prove_invalid(self.task_id, rs.round, sub.fragment, sub.trainer,
                                               _PROVE[sub.reason], sub.signed, non_finite_opening(sub.tree, sub.flat))
                ev = res.event("InvalidProven")
                log.warning("proved invalid trainer=%s fragment=%d reason=%s: slashed %d atto (bounty %d)",
                            sub.trainer, sub.fragment, sub.reason, ev["slashed"], ev["bounty"])
            else:
                # the whole payload (PROTOCOL.md §4 "Whole payload", issue #23 attack 5). A forced
                # payload counts against the syncer only once it is wholly public; after a one-chunk
                # challenge a trainer could answer that chunk alone, withhold the rest, and leave
                # this syncer to be convicted whether it aggregates the payload or omits it.
                ev = self._challenge(sub).event("AvailabilityChallenged")
                log.warning("challenged availability of the whole payload trainer=%s fragment=%d (%s) until %d",
                            sub.trainer, sub.fragment, sub.reason, ev["deadline"])
        except InsufficientTokens as exc:  # the bond: nothing sent; reported again on the next poll
            (log.debug if sub.unpaid else log.error)(
                "trainer=%s fragment=%d (%s): cannot pay the availability challenge's bond, the round's commit "
                "waits for it: %s", sub.trainer, sub.fragment, sub.reason, exc)
            sub.unpaid = True
            return
        except ChainRevert as exc:
            if sub.reason == "NormOutlier" and exc.error_name not in _STALE:
                # not convicted: the submission stays live, so it must be aggregated (finalize screens again)
                log.error("trainer=%s fragment=%d: the registry refuses the norm-outlier proof (%s): accepting it",
                          sub.trainer, sub.fragment, exc.error_name)
                sub.unprovable, sub.reason, sub.detail = True, None, ""
                return
            if exc.error_name in _CLOSED:
                sub.closed = exc.error_name
                log.warning("trainer=%s fragment=%d (%s): not reported, the registry refuses (%s)", sub.trainer,
                            sub.fragment, sub.reason, exc.error_name)
            elif exc.error_name not in _STALE:
                raise
        sub.tree = sub.flat = None
        sub.reported = True
        rs.split["chain_s"] = rs.split.get("chain_s", 0.0) + time.perf_counter() - t0

    def _rechallenge_answered(self) -> None:
        """A challenged forced submission whose trainer answered is live again, and the registry
        would refuse a commit that leaves it out: fetch and check it again (`_revalidate`), and if
        it is still not fetchable from IPFS read it from the whole-payload answer's on-chain bytes
        (`_use_whole_answer`: this syncer's challenge, or anyone's that took the submission's one
        whole-payload place). One that neither gives stays live, logged once (PROTOCOL.md §4,
        residual).

        Raises:
            ChainRevert: any other refusal of the registry.
        """
        rs = self._round
        for sub in rs.subs.values():
            if sub.offchain or not (sub.reported and sub.reason in _CHALLENGE) or sub.closed == _UNUSABLE:
                continue
            pending = self.chain.availability_challenge(self.task_id, rs.round, sub.fragment, sub.trainer)
            if str(pending["challenger"]).lower() != ZERO_ADDRESS:
                continue
            if self.chain.submissions_of(self.task_id, rs.round, sub.trainer)[1] >> sub.fragment & 1:
                continue  # expired: rejected and slashed
            if self._revalidate(sub) or self._use_whole_answer(sub):
                continue
            sub.closed = _UNUSABLE
            log.error("trainer=%s fragment=%d: its payload is not usable here (%s) and no whole-payload answer "
                      "on-chain holds it: it stays live", sub.trainer, sub.fragment, sub.reason)

    def _challenge(self, sub: _Sub):
        """``challengeAvailability`` of the whole payload of ``sub`` (its bond from this account's
        wallet); the round's commit then waits a step (`ready`). Returns the transaction result."""
        res = self.chain.challenge_availability(self.task_id, self._round.round, sub.fragment, sub.trainer,
                                                sub.signed, ChunkOpening.WHOLE_PAYLOAD)
        self._round.challenged = True
        return res

    def _revalidate(self, sub: _Sub) -> bool:
        """A challenged submission was answered, so its bytes exist: fetch and check it again (the
        first fetch may have met this syncer's own node restarting, or a slow network). True when
        it is valid now: it joins the round's inputs, and an honest trainer loses no credit to a
        fault of the syncer's side."""
        before = (sub.reason, sub.detail)
        sub.reason = sub.detail = None
        try:
            self.validate(sub)
        except BaseException:  # this syncer's own node is down: the rejection stands for now
            sub.reason, sub.detail = before
            raise
        dup = next((o for o in self._round.subs.values()
                    if o is not sub and o.reason is None and o.payload_hash == sub.payload_hash), None)
        if sub.reason is None and dup is None:
            log.info("trainer=%s fragment=%d: the payload is retrievable and valid now: accepted", sub.trainer,
                     sub.fragment)
            return True
        if sub.reason is None:
            sub.reason, sub.detail = before
        return False

    def _use_whole_answer(self, sub: _Sub) -> bool:
        """Use the bytes of a whole-payload answer on-chain (`whole_answer`) that commits to
        ``sub``'s signed payload root: accept the payload when it passes the payload checks; when
        it holds a NaN or infinity, prove that on-chain from the answered vector (`report`:
        ``proveInvalid`` NonFinite, opening the chunk), so the submission is rejected and leaving
        it out is no omission (issue #23: a trainer withholding a NaN payload and answering its
        whole challenge left it live, an omission to prove whether the syncer took it or not).
        True when either happened; False when no whole answer commits to it. Its CID may never
        answer: the answer made the payload public. The norm screen comes later, at the commit."""
        signed = sub.signed
        vec = answered_vector(self.chain, self.task_id, self._run_start, self._round.round, sub.fragment, sub.trainer,
                              self.runtime.sizes[sub.fragment], signed.payload_root, signed.payload_sumsq)
        if vec is None:
            return False
        layout = self.runtime.layouts[sub.fragment]
        tensors = unflatten(vec, {name: shape for name, (shape, _) in layout.items()})
        try:
            norm = validate_payload(tensors, layout)
        except PayloadRejected as exc:
            # the vector has the layout's sizes, so only its values can fail (NaN / inf)
            sub.reason, sub.detail = _REASON_OF_REJECT.get(exc.reason, "Malformed"), str(exc)
            sub.flat, sub.tree, sub.reported, sub.closed = vec, ChunkTree(vec), False, None
            log.error("trainer=%s fragment=%d: its whole-payload answer on-chain fails the payload checks (%s): "
                      "proving it %s", sub.trainer, sub.fragment, exc, sub.reason)
            self.report(sub)  # a refusal raises: the next poll reports it again
            return True
        sub.tensors, sub.tree, sub.flat, sub.reason, sub.detail = tensors, None, None, None, ""
        log.warning("trainer=%s fragment=%d: payload not fetchable from IPFS, read from its whole-payload answer "
                    "on-chain: accepted (norm %.4g)", sub.trainer, sub.fragment, norm)
        return True

    def _fragment_subs(self, f: int) -> list[_Sub]:
        return [s for s in self._round.subs.values() if s.fragment == f]

    def _index(self, sub: _Sub) -> int:
        """The trainer index of a submission (``trainersOf`` order)."""
        return self._trainer_indices(sub.key)[sub.key]

    def _trainer_indices(self, must_hold: str | None = None) -> dict[str, int]:
        """Lower-case trainer address -> index (``trainersOf``), read again when empty or missing
        ``must_hold`` (a trainer seen on-chain; never for an address from pubsub, anyone's to send)."""
        if not self._trainer_index or (must_hold is not None and must_hold not in self._trainer_index):
            self._trainer_index = {a.lower(): i for i, a in enumerate(self.chain.trainers_of(self.task_id))}
        return self._trainer_index

    def _norm_screen(self) -> dict[int, list[_Sub]]:
        """Accepted submissions per fragment: the structurally valid ones that are not norm
        outliers. The off-chain submissions are screened against their own median (`norm_outliers`);
        a forced one against the previous committed round's accepted sums of the fragment (the
        reference of ``proveNormOutlier``, which the round's forcing sybils cannot move, issue #23
        attack 6), unless the registry refused to convict it (`_Sub.unprovable`: left out, it
        would be proven omitted)."""
        out: dict[int, list[_Sub]] = {f: [] for f in range(len(self.runtime.fragments))}
        for f in out:
            subs = self._fragment_subs(f)
            screened = [s for s in subs if s.offchain]
            outliers = norm_outliers({self._index(s): s.signed.payload_sumsq for s in screened}, self.norm_screen_sq)
            if any(not s.offchain for s in subs):
                ref = self._norm_reference(f)
                outliers |= {self._index(s) for s in subs if not s.offchain and not s.unprovable and ref is not None
                             and exceeds_reference(s.signed.payload_sumsq, ref[1], self.norm_screen_sq)}
            out[f] = sorted((s for s in subs if s.reason is None and self._index(s) not in outliers),
                            key=lambda s: s.key)
        return out

    def ready(self, run: RunView) -> bool:
        """Time to commit? (quorum + all in or straggler wait passed; or the deadline passed).

        Never inside the commit phase, and only after a step whose collect began once
        no forced submission could arrive any more (`_root_inputs_settled`) and no availability
        challenge was pending: ``run``, read before the collect, shows none open and the collect
        sent none. An answer mined after the collect read the chain makes a submission left out as
        unavailable live again, and the registry, which then waits for no challenge, would take a
        commit that omits it (an omission anyone proves; issue #23, found by the CI's timing)."""
        rs = self._round
        if not self._root_inputs_settled(run):
            return False
        if (run.open_challenges or rs.challenged or any(s.owes_report for s in rs.subs.values())):
            return False  # a report still to make (a bond it could not pay, a refused transaction) holds it too
        if self.chain_now() > run.round_deadline:
            self.nudge_devnet(run.round_deadline)
            return True
        if not self.config.finalize_early:
            return False
        acc = self._norm_screen()
        if not all(len(v) >= run.quorum for v in acc.values()):
            rs.quorum_since = None
            return False
        if rs.quorum_since is None:
            rs.quorum_since = time.monotonic()
        per_fragment = [sum(1 for s in rs.subs.values() if s.fragment == f) for f in acc]
        if all(n >= run.enrolled_count for n in per_fragment):
            return True
        return time.monotonic() - rs.quorum_since >= float(self.opt("straggler_wait_s", 2.0))

    def _root_inputs_settled(self, run: RunView) -> bool:
        """Whether this step's collect saw every forced submission round r can get. A forced
        reveal is mined after the commit phase, perhaps between a collect and the commit; left out,
        it is an omission anyone proves. None can come once the phase has closed and every
        on-chain commitment is revealed (``commitPhase``'s count is 0), or once the deadline has
        passed: the first step that sees either only notes it, and the next one, whose collect
        read the chain after that, may commit."""
        rs = self._round
        now = self.chain_now()
        if now <= rs.closes:  # the registry refuses a commit in the commit phase
            return False
        self.nudge_devnet(rs.closes)  # a devnet's head may still be stamped inside the phase
        if rs.settled:
            return True
        rs.settled = now > run.round_deadline or self.chain.commit_phase(self.task_id)[1] == 0
        return False

    def finalize(self, run: RunView) -> bool:
        """Norm screen, prove forced outliers, scoring, aggregate + outer step, pin, ``commitRound``
        (`root_commit`), persist. Returns False (state untouched) when the chain refuses for a
        reason that a later poll can mend (not yet, stale credits, quorum, a late submission)."""
        rs, r, F = self._round, self._round.round, len(self.runtime.fragments)
        accepted = self._norm_screen()  # answered challenges were re-checked by collect, just before
        for s in rs.subs.values():
            if s.reason is None and s not in accepted[s.fragment]:
                median = "the fragment's median" if s.offchain else "the median of round %d's accepted sums" % (r - 1)
                self._reject(s, "NormOutlier", f"sum of squares {bits_to_f32(s.signed.payload_sumsq):.6g} exceeds "
                                               f"{self.norm_multiple:g}^2 x {median}")
            if s.reason == "NormOutlier":
                self.report(s)
        if any(s.unprovable and s.reason is None and s not in accepted[s.fragment] for s in rs.subs.values()):
            accepted = self._norm_screen()  # a refused proof: that submission is aggregated
        self.root_score(r, accepted)  # the spec's score_min, if any
        self._fault_false_report(r, accepted)
        self._fault_drop(r, accepted)
        snapshot = [copy.deepcopy(o.state_dict()) for o in self.outers]
        t0 = time.perf_counter()
        for f in range(F):  # PROTOCOL.md section 1: inputs in trainer-index order, +0 for a fragment without any
            outer = self.outers[f]
            outer.step(self.rule({trainer_key(self._index(s)): s.tensors for s in accepted[f]}) if accepted[f]
                       else outer.zero_aggregate())
        self._fault_wrong_aggregate(r)
        blobs = self.runtime.encode_weights(self._state(), r)
        t_agg = time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            cids = [self.ipfs.add(b) for b in blobs]
            shas = [hashlib.sha256(b).digest() for b in blobs]  # the blobs' (the transcript's transport check)
            # the committed fragment hashes: the §2 roots of the new weights (PROTOCOL.md §5, the
            # leaves' weightsRoot)
            hashes = fragment_weights_roots(self._state(), self.runtime.fragments)
            wroot = weights_root(hashes)
            momentum, signed = self.root_extras(r, accepted, run)
            transcript = RoundTranscript(
                task_id="0x" + self.task_id.hex(), round=r,
                rule={"name": self.spec.aggregation_name, "params": dict(self.spec.aggregation_params)},
                outer={"lr": self.outer_cfg.lr, "momentum": self.outer_cfg.momentum,
                       "nesterov": self.outer_cfg.nesterov},
                input_weights_root="0x" + run.weights_root.hex(), weights_root="0x" + wroot.hex(),
                accepted_count=sum(len(v) for v in accepted.values()),
                fragments=[FragmentRecord(
                    fragment=f, accepted=[s.submission(signed.get((f, s.key))) for s in accepted[f]],
                    rejected=[Rejection(**s.submission().model_dump(), reason=s.reason, detail=s.detail[:500])
                              for s in sorted(rs.subs.values(), key=lambda x: x.key)
                              if s.fragment == f and s.reason is not None],
                    weights=BlobRef(cid=cids[f], sha256="0x" + shas[f].hex()), aggregated=bool(accepted[f]),
                    momentum=BlobRef(**momentum[f]) if f in momentum else None)
                    for f in range(F)])
            tbytes = transcript.canonical_bytes()
            tcid = self.ipfs.add(tbytes)
            for b in blobs:
                self.metrics.ipfs_out(len(b))
            t_pin = time.perf_counter() - t1
            trainers = self.chain.trainers_of(self.task_id)
            bitmaps = [0] * len(trainers)
            index = {a.lower(): i for i, a in enumerate(trainers)}
            for f, subs in accepted.items():
                for s in subs:
                    bitmaps[index[s.key]] |= 1 << f
            t2 = time.perf_counter()
            res = self.root_commit(run, r, accepted, bitmaps, hashes, transcript, tcid)
            t_chain = time.perf_counter() - t2 + rs.split.get("chain_s", 0.0)
        except ChainRevert as exc:
            self.outers = [OuterOptimizer.from_state_dict(s) for s in snapshot]
            if exc.error_name in NOT_YET:
                log.info("round %d: not yet (%s): committing on a later poll", r, exc.error_name)
                return False
            if exc.error_name == "Registry__WrongPreviousCredits":
                log.warning("round %d: the credits read from the chain were stale (%s): reading them again", r, exc)
                self._credits = None
                return False
            if exc.error_name == "Registry__QuorumNotMet":
                log.info("round %d: the chain wants more accepted submissions before the deadline (%s)", r, exc)
                rs.quorum_since = None
                return False
            if exc.error_name in ("Registry__WrongRound", "Registry__WrongStatus"):
                log.warning("round %d was already finalized on-chain (%s): catching up", r, exc)
                self.restore()
                return True
            raise
        except BaseException:
            self.outers = [OuterOptimizer.from_state_dict(s) for s in snapshot]
            raise
        fin = res.event("RoundCommitted")
        self.last_finalized = r
        self.finalized_here += 1
        self._tally("rounds_finalized", 1)
        self.persist()
        self.root_slash_unrevealed(r, rs)
        wall = max(0.0, time.time() - run.round_opened_at)
        self.metrics.round_latency.labels(task=task_label(self.task_id)).observe(wall)
        n_acc = sum(len(v) for v in accepted.values())
        n_rej = sum(1 for s in rs.subs.values() if s.reason is not None)
        rec: dict[str, Any] = {
            "task": "0x" + self.task_id.hex(), "round": r, "wall_s": round(wall, 6),
            "process_s": round(time.perf_counter() - rs.t_start, 6), "fetch_s": round(rs.split["fetch_s"], 6),
            "validate_s": round(rs.split["validate_s"], 6), "aggregate_s": round(t_agg, 6),
            "pin_s": round(t_pin, 6), "chain_s": round(t_chain, 6), "submissions": len(rs.subs),
            "accepted": n_acc, "rejected": n_rej, "quorum_met": bool(fin.get("quorumMet", True)),
            "weights_root": "0x" + wroot.hex(), "tx": res.tx_hash}
        if self._eval is not None:
            t3 = time.perf_counter()
            if self._last_loss is None:  # round 0, or the first round after a restart
                snap_state = {}
                for s in snapshot:
                    snap_state.update(s["weights"])
                self._last_loss = self._eval(snap_state).loss
            rec["heldout_loss_before"] = self._last_loss
            rec["heldout_loss"] = self._last_loss = self._eval(self._state()).loss
            rec["eval_s"] = round(time.perf_counter() - t3, 6)
            self.metrics.heldout_loss.labels(task=rec["task"]).set(rec["heldout_loss"])
        append_jsonl(self.rounds_path, rec)
        self.history.append(rec)
        log.info("finalized round %d: %d accepted, %d rejected, quorum %s, wall %.2f s (fetch %.2f, validate %.2f, "
                 "aggregate %.2f, pin %.2f, chain %.2f)%s", r, n_acc, n_rej, rec["quorum_met"], wall,
                 rec["fetch_s"], rec["validate_s"], t_agg, t_pin, t_chain,
                 f", held-out loss {rec['heldout_loss']:.4f}" if "heldout_loss" in rec else "")
        self._round = None
        return True

    # ------------------------------------------------------------------ fault injection (tests, demos)

    def _fault_drop(self, r: int, accepted: dict[int, list[_Sub]]) -> None:
        """``drop_submission`` / ``censor_trainer``: take that trainer's submissions out of
        ``accepted`` (in place) for round r."""
        if self.fault is None:
            return
        targets = []  # (fragment, trainer index)
        spec = self.fault.drop_submission
        if spec is not None and spec[0] == r and spec[1] in accepted:
            targets.append((spec[1], spec[2]))
        if self.fault.censor_trainer is not None:
            targets += [(f, self.fault.censor_trainer) for f in accepted]
        for f, i in targets:
            keep = [s for s in accepted[f] if self._index(s) != i]
            if len(keep) == len(accepted[f]):
                log.warning("FAULT INJECTION: trainer %d has no accepted submission of fragment %d in round %d: "
                            "nothing to leave out", i, f, r)
                continue
            accepted[f] = keep
            log.warning("FAULT INJECTION: leaving trainer %d's live submission of fragment %d out of round %d's "
                        "commit", i, f, r)

    def _fault_false_report(self, r: int, accepted: dict[int, list[_Sub]]) -> None:
        """``false_invalid_report``: once, report that trainer's valid submission of round r
        invalid (NonFinite, no defective chunk to open); the registry refuses the evidence and the
        round goes on honestly."""
        spec = self.fault.false_invalid_report if self.fault is not None else None
        if spec is None or self._fault_false_reported or spec[0] != r or spec[1] not in accepted:
            return
        f, i = spec[1], spec[2]
        target = next((s for s in accepted[f] if self._index(s) == i), None)
        if target is None:
            return
        self._fault_false_reported = True
        log.warning("FAULT INJECTION: reporting trainer %d's valid submission of fragment %d in round %d as "
                    "non-finite", i, f, r)
        try:
            self.chain.prove_invalid(self.task_id, r, f, target.trainer, _PROVE["NonFinite"], target.signed)
        except ChainRevert as exc:
            log.error("FAULT INJECTION: the registry refused the false report (%s); finalizing the round honestly", exc)
            return
        log.error("FAULT INJECTION: the registry accepted a false report of trainer %d: this is a registry bug", i)

    def _fault_wrong_aggregate(self, r: int) -> None:
        """``wrong_aggregate_at``: add 1.0 to the first coordinate of the fragment's new weights
        (the outer optimizer's own parameters, so later rounds build on the wrong value)."""
        spec = self.fault.wrong_aggregate_at if self.fault is not None else None
        if spec is None or spec[0] != r or not 0 <= spec[1] < len(self.outers):
            return
        outer = self.outers[spec[1]]
        with torch.no_grad():
            flat = outer.params[0].view(-1)
            before = float(flat[0])
            flat[0] += 1.0
        log.warning("FAULT INJECTION: round %d fragment %d: weight %s[0] committed as %.6g instead of the aggregate's "
                    "%.6g", r, spec[1], outer.names[0], float(flat[0]), before)

    def expire_lapsed(self, run: RunView) -> None:
        """Root flow: expire each availability challenge of the open round whose answer window
        has passed (``expireAvailability``, anyone's to send: the submission is rejected, its
        trainer slashed, the bond and the bounty go to the challenger). The registry takes no commit
        while one is pending, so one left unanswered, this syncer's whole-payload demand of a
        withheld payload or a sybil's, would hold the round until this syncer is replaced; the
        commit waits a step after it (``run`` showed it open).

        Raises:
            ChainRevert: a refusal other than a challenge already closed.
        """
        if run.open_challenges:
            self._expire_challenges(self._round.first_block, self._round.round, wait=False)

    def _expire_challenges(self, from_block: int, round_: int | None, wait: bool) -> None:
        """Expire the availability challenges named by ``AvailabilityChallenged`` events from
        ``from_block`` on (of round ``round_`` only, unless None) that are still pending: each once
        its deadline has passed in chain time, waited out first when ``wait``, else skipped.

        Raises:
            ChainRevert: a refusal other than a challenge already closed.
        """
        for ev in self.chain.get_logs(from_block, self.chain.block_number(), ["AvailabilityChallenged"],
                                      task_id=self.task_id):
            a = ev["args"]
            r, f, trainer = int(a["round"]), int(a["fragment"]), a["trainer"]
            if (round_ is not None and r != round_) or (not wait and self.chain_now() <= int(a["deadline"])):
                continue
            pending = self.chain.availability_challenge(self.task_id, r, f, trainer)
            if str(pending["challenger"]).lower() == ZERO_ADDRESS:
                continue  # answered or expired already
            deadline = int(pending["deadline"])
            while wait and self.chain_now() <= deadline:
                self.check_stop()
                self.sleep(min(self.poll_s, max(0.1, deadline + 1 - self.chain_now())))
            if self.chain_now() <= deadline:
                continue  # a later challenge took its place: not lapsed yet
            self.nudge_devnet(deadline)
            try:
                res = self.chain.expire_availability(self.task_id, r, f, trainer)
            except ChainRevert as exc:
                if exc.error_name not in ("Registry__NoChallenge", "Registry__ChallengeDeadline"):
                    raise
                continue
            log.warning("availability challenge unanswered: trainer=%s round=%d fragment=%d expired, slashed %d atto",
                        trainer, r, f, res.event("InvalidProven")["slashed"])

    def claim_fee(self) -> int:
        """After the seal, or a cancel (`cancelStalledRun` keeps committed rounds' fees): ``claimSyncerFee``
        for the rounds this account finalized (their fees become withdrawable). Returns the atto-units
        claimed; 0 when nothing is owed (never elected, or claimed already, e.g. before a restart).

        Raises:
            ChainRevert: any refusal but ``Registry__NoSyncerFee``.
        """
        if self.chain.syncer_fee_of(self.task_id) == 0:
            return 0
        try:
            amount = self.chain.claim_syncer_fee(self.task_id)
        except ChainRevert as exc:
            if exc.error_name != "Registry__NoSyncerFee":
                raise
            return 0
        self._tally("fees_claimed_atto", amount)
        self.metrics.fees_claimed.labels(task=task_label(self.task_id)).inc(amount / 10**18)
        log.info("claimed %d atto of syncer fees (now withdrawable)", amount)
        return amount

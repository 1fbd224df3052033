"""The syncer daemon: collect the round's outer gradients, validate, aggregate with the task's
rule, apply the outer Nesterov step, pin the new weights, momentum and transcript, commit the
round by root (``commitRound``, contracts/PROTOCOL.md §5); seal.

One round r (DiLoCo, Douillard et al. 2023, Algorithm 1, lines 10-12; DESIGN.md "Data flow"):

1. take in the trainers' signed commitments during the round's commit phase and the reveals
   that open them after it (pubsub and the JSON-RPC endpoint, `tenzro_operator.roles.syncer_intake`),
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

Parts (one concern each, composed into `SyncerDaemon`): `syncer_election` (the runs it serves,
the election), `syncer_intake` (commitments, reveals and forced submissions in), `syncer_validation`
(the payload checks, the norm screen), `syncer_reports` (proofs, availability challenges and slashes
against invalid forced submissions), `syncer_commit` (scoring, aggregation, the outer step,
``commitRound``), `syncer_credit` (the run's credit gate, with the spec's ``credit``),
`syncer_committed` (its saved state, rebuilds, weights answers, the seal), and `syncer_round` (a
round's submissions as data).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tenzro_operator.chain import ZERO_ADDRESS, RunStatus, RunView
from tenzro_operator.chain.event_cursor import EventCursor
from tenzro_operator.config import SyncerConfig
from tenzro_operator.daemon import Daemon, StopRequested
from tenzro_operator.errors import ChainRevert
from tenzro_operator.logs import log_context, set_log_context
from tenzro_operator.metrics import SyncerMetrics, task_label
from tenzro_operator.roles.syncer_commit import RoundCommit
from tenzro_operator.roles.syncer_committed import CommittedRounds
from tenzro_operator.roles.syncer_credit import CreditForWork
from tenzro_operator.roles.syncer_election import SyncerElection
from tenzro_operator.roles.syncer_intake import SubmissionIntake
from tenzro_operator.roles.syncer_reports import SubmissionReports
from tenzro_operator.roles.syncer_round import _RoundState, _Sub
from tenzro_operator.roles.syncer_validation import PayloadValidation
from tenzro_operator.spec import TaskSpec
from tenzro_operator.task_assets import fetch_spec, load_dataset
from tenzro_operator.task_runtime import TaskRuntime, outer_config
from tenzro_operator.units import format_tokens
from tenzro_trainer.aggregation import build_rule
from tenzro_trainer.evaluate import HeldoutEvaluator
from tenzro_trainer.outer import OuterOptimizer

__all__ = ["SyncerDaemon", "SyncerDaemonConfig", "SyncerFaultSettings", "_Sub"]

log = logging.getLogger("tenzro.syncer")


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
            `ForcedPath.check_left_out`) and a forced one is convicted by a watcher's
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
            delivers on-chain from the next round on (`ForcedPath.check_left_out`), where
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


class SyncerDaemon(SyncerElection, SubmissionIntake, PayloadValidation, SubmissionReports, RoundCommit,
                   CreditForWork, CommittedRounds, Daemon):
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
        self._credits, self._score, self._norm_refs = None, None, {}
        self._gate, self._credit_saved, self._last_aggregate = None, None, {}
        self._weights_pending, self._weights_next, self._weights_checker = {}, None, None
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

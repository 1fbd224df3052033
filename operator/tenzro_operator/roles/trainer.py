"""The trainer daemon: discover a run, enroll, and for every round train H inner steps on the
assigned shard and deliver one signed outer gradient per fragment, until the run is sealed and
its reward claimed.

One round (DiLoCo, Douillard et al. 2023, Algorithm 1, lines 4-9; the delivery is
contracts/PROTOCOL.md §5, `tenzro_operator.roles.trainer_delivery`):

1. read the open round r from ``getRun``; skip it when this process already delivered it (a
   restart) or its commit phase has closed;
2. fetch round r's input weights: r == 0 the spec's initial weights (checked against the
   on-chain ``initialWeightsRoot``), r > 0 the weights the ``RoundCommitted`` transcript of
   round r-1 pins (checked against ``getRun.weightsRoot``, over their §2 chunk roots);
3. run H AdamW steps (`tenzro_trainer.inner.InnerTrainer`, or with ``devices: N > 1`` one torchrun
   job of N ranks, `tenzro_trainer.worker_group.TorchrunWorker`; its AdamW state and sampler are kept
   across rounds and saved to ``<data_dir>/trainer-state.pt`` after each round);
4. per fragment f: ``delta_f = global_f - local_f`` (`pseudo_gradient`), safetensors bytes
   under the spec's codec (`PayloadEncoder`: dense `encode_fragment`, kind ``pseudo_gradient``,
   unless ``metadata.protocol.compression`` names a codec; with error feedback its residuals are
   saved to ``<data_dir>/trainer-ef-<task>.safetensors`` before the round's submissions are sent,
   and loaded again on a restart), pinned to IPFS, signed (EIP-712) over the chunk commitment of
   the vector the payload decodes to, and delivered: a commitment in the commit phase, the
   reveal after it (pubsub, and the syncer's endpoint when it announces one; on-chain too once
   left out without a reason, the forced path);
5. wait for the syncer's ``commitRound`` of round r and count the accepted fragments; with the
   spec's ``overlap_steps`` the wait runs up to that many of round r+1's inner steps from this
   trainer's own weights, rebased on round r's committed weights when they come
   (`tenzro_operator.roles.overlap`).

Before round 0: a trainer enrolls only while the run's enrollment deadline has not passed. While
it waits for the run to fill, once the deadline passes with fewer than K enrolled it cancels the
run, as anyone may (its stake is refunded; `Daemon.settle_enrollment`); opening round 0 with K..M-1
trainers after the deadline is left to the syncer.

Fault injection (tests and the demo only, off by default): ``fault: {kind, rounds}`` in the
config; ``nan`` sends non-finite values, ``scale100`` / ``sign_flip`` scale the delta,
``wrong_hash`` posts a payloadHash that is not the sha256 of the pinned bytes.

Timings per round go to ``<data_dir>/trainer-rounds.jsonl`` (seconds): ``fetch_s`` (weights
from IPFS), ``inner_s`` (H inner steps), ``submit_s`` (encode + pin + sign + publish the
commitments), ``loss`` (mean inner training loss), ``payload_bytes`` (bytes of the
payloads pinned in the round, all fragments).

`TrainerDaemon` is made of one class per concern, each in a module of its own:

- `RunDiscovery` (`tenzro_operator.roles.trainer_discovery`): which run to join, and the wait for
  the sponsor's ``useRootFlow`` before enrolling;
- `SubmissionDelivery` (`tenzro_operator.roles.trainer_delivery`): signing the submissions and
  delivering them to the syncer, over pubsub and its JSON-RPC endpoint;
- `ForcedPath` (`tenzro_operator.roles.trainer_delivery`): on-chain delivery after a silent
  omission, kept across restarts, and the availability challenges against it;
- `RoundFollowing` (`tenzro_operator.roles.trainer_rounds`): a round's commit phase, the wait for
  its commit, its committed weights, the ``copycat`` fault;
- `RunEnding` (`tenzro_operator.roles.trainer_ending`): a silent syncer moved on, the seal, the
  reward claim.

This module keeps the configs, the faults, the lifecycle (run, serve, prepare, enroll), the inner
steps, the pseudo-gradients, their payloads and pins. None of those modules imports this one.
"""

from __future__ import annotations

import hashlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from tenzro_operator.chain import RunStatus, RunView, SignedPayload
from tenzro_operator.chain.event_cursor import EventCursor
from tenzro_operator.config import TrainerConfig
from tenzro_operator.daemon import Daemon, StopRequested, append_jsonl, atomic_torch_save, load_state_file
from tenzro_operator.errors import TenzroError, TxFailed
from tenzro_operator.ipfs import kubo_cid
from tenzro_operator.logs import log_context, set_log_context
from tenzro_operator.metrics import TrainerMetrics, task_label
from tenzro_operator.payload_encoder import PayloadEncoder
from tenzro_operator.progress import progress_bar
from tenzro_operator.roles.challenge_loop import ChallengeLoop
from tenzro_operator.roles.challenges import ChallengeAnswerer
from tenzro_operator.roles.overlap import EarlySteps
from tenzro_operator.roles.trainer_delivery import ForcedPath, SubmissionDelivery
from tenzro_operator.roles.trainer_discovery import RunDiscovery
from tenzro_operator.roles.trainer_ending import RunEnding
from tenzro_operator.roles.trainer_rounds import RoundFollowing
from tenzro_operator.spec import TaskSpec
from tenzro_operator.task_assets import fetch_spec, fetch_weights, initial_weights, load_dataset
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.codec import encode_fragment
from tenzro_trainer.commitment import ChunkTree, flatten_fragment
from tenzro_trainer.data.windows import WindowDataset
from tenzro_trainer.fragments import fragment_state
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.outer import pseudo_gradient
from tenzro_trainer.worker_group import TorchrunWorker

__all__ = ["FaultSettings", "TrainerDaemon", "TrainerDaemonConfig", "apply_fault"]

log = logging.getLogger("tenzro.trainer")
# Fragments encoded and pinned at once (IPFS adds are I/O-bound; they are signed in fragment order).
PIN_WORKERS = 4

FaultKind = Literal["nan", "wrong_hash", "scale100", "sign_flip", "noise", "zeros", "stale", "copycat", "withhold",
                    "challenge_loop"]


class FaultSettings(BaseModel):
    """Deliberate misbehaviour for tests and the demo (off unless configured).

    Attributes:
        kind: ``nan`` (every value NaN), ``wrong_hash`` (payloadHash of other bytes),
            ``scale100`` (delta x 100), ``sign_flip`` (-delta), ``noise`` (Gaussian noise at each
            tensor's RMS instead of the delta: a payload no work went into, issue #26's free rider
            that passes every payload check and the norm screen), ``zeros`` (an all-zero payload: the
            no-work payload of issue #26's sybil fill, forced in with ``force_onchain``), ``stale``
            (the fragment's pseudo-gradient of the first round it applies to, sent again in every
            later one: no work since); ``copycat`` (trains nothing, re-signs every other trainer's
            reveal as its own, `RoundFollowing.copy_round`);
            ``withhold`` (its payload's CID is computed, the bytes go to no IPFS node, and no
            availability challenge of it is answered: with ``force_onchain`` and ``publish_pubsub:
            false``, the withheld forced payload of issue #23 attack 5); ``challenge_loop`` (with
            ``force_onchain``: challenges its own submissions chunk after chunk and answers each at
            the last seconds, issue #23 attack 1, `tenzro_operator.roles.challenge_loop`).
        rounds: rounds to misbehave in (None = every round).
        fragments: fragments to misbehave on (None = every fragment).
    """

    model_config = ConfigDict(extra="forbid")

    kind: FaultKind
    rounds: list[int] | None = None
    fragments: list[int] | None = None

    def applies(self, round_: int, fragment: int) -> bool:
        return (self.rounds is None or round_ in self.rounds) and (self.fragments is None or fragment in self.fragments)


class TrainerDaemonConfig(TrainerConfig):
    """``trainer.yaml`` as the daemon reads it: `TrainerConfig` plus daemon-only keys.

    Extra keys: ``fault`` (`FaultSettings`, default off), ``family`` (only join discovered runs of
    this architecture family), ``max_consecutive_failures`` (failed steps in a row before the
    daemon halts, default 5), ``discover_timeout_s`` (without ``task_id``: how long to wait for an
    open run to appear, seconds, default 600), ``task_wait_s`` (with ``task_id``: how long to wait
    for that run to be posted, seconds; default 0, an unknown task id is refused at start-up),
    ``confirmations`` (blocks an event must be buried under before it is read, default 0) and
    ``reorg_tail_blocks`` (how deep below the head blocks are read one by one with their hashes
    checked, default 64; `tenzro_operator.chain.event_cursor.EventCursor`).
    """

    fault: FaultSettings | None = None
    confirmations: int = Field(default=0, ge=0)
    reorg_tail_blocks: int = Field(default=64, ge=2)
    family: str | None = None
    max_consecutive_failures: int = Field(default=5, ge=1)
    discover_timeout_s: float = Field(default=600.0, gt=0)
    task_wait_s: float = Field(default=0.0, ge=0)


def apply_fault(kind: str, delta: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensor side of a fault (``wrong_hash`` leaves the tensors alone)."""
    if kind == "nan":
        return {k: torch.full_like(v, float("nan")) for k, v in delta.items()}
    if kind == "scale100":
        return {k: 100.0 * v for k, v in delta.items()}
    if kind == "sign_flip":
        return {k: -v for k, v in delta.items()}
    if kind == "noise":
        return {k: torch.randn_like(v) * v.pow(2).mean().sqrt() for k, v in delta.items()}
    if kind == "zeros":
        return {k: torch.zeros_like(v) for k, v in delta.items()}
    return delta


class TrainerDaemon(RunDiscovery, SubmissionDelivery, ForcedPath, RoundFollowing, RunEnding, Daemon):
    """One trainer (see the module docstring).

    Args:
        config: `TrainerDaemonConfig` (a plain `TrainerConfig` works: no faults).
        account: the trainer's unlocked account.
        chain: a `ChainClient` signing as ``account``.
        ipfs: an `IpfsClient`.
        metrics: `TrainerMetrics` (default: a fresh one).
        stop: event that stops the daemon after the current inner pass.
    """

    role = "trainer"
    dials_trainers = False  # a trainer fetches from the syncer's node only (`Daemon.track_peers`)
    # the run being served (reset_run clears them)
    spec: TaskSpec | None
    runtime: TaskRuntime | None
    worker: InnerTrainer | TorchrunWorker | None  # TorchrunWorker with devices > 1
    index: int | None
    _global: dict[str, torch.Tensor] | None  # the round's input weights, cached by weights root
    _global_root: bytes | None
    events: EventCursor | None  # AvailabilityChallenged of the run (after prepare)
    _skipped: set[int]  # rounds whose commit phase closed before this trainer delivered
    challenges: ChallengeAnswerer  # answers availability challenges against this trainer (after prepare)
    encoder: PayloadEncoder | None  # the run's payload encoder, error feedback restored (after prepare)
    _payload_bytes = 0  # bytes pinned in the current round

    def __init__(self, config: TrainerConfig, account, chain, ipfs, *, metrics: TrainerMetrics | None = None,
                 stop=None) -> None:
        super().__init__(config, account, chain, ipfs, metrics=metrics or TrainerMetrics(), stop=stop,
                         max_consecutive_failures=getattr(config, "max_consecutive_failures", 5))
        self.fault: FaultSettings | None = getattr(config, "fault", None)
        self._loop: ChallengeLoop | None = None  # the challenge_loop fault, once the task is known
        self.state_path = self.data_dir / "trainer-state.pt"
        self.rounds_path = self.data_dir / "trainer-rounds.jsonl"
        self._specs: dict[bytes, TaskSpec] = {}  # task id -> its spec (the `family` and allowlist filters)
        self.reset_run()
        self.summary: dict[str, int] = {"rounds_trained": 0, "submitted": 0, "accepted": 0, "missed": 0}

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:
        """Start-up checks, then serve runs until ``max_runs`` are done or a stop is requested.
        Returns the exit code (0 on a clean finish or stop).

        Raises:
            TenzroError: a failed start-up check (service named), `DaemonHalted`.
        """
        with log_context(role="trainer"):
            self.startup_checks()
            log.info("trainer %s started (data_dir %s)", self.account.address, self.data_dir)
            try:
                self.serve_runs()
            except StopRequested:
                log.info("stop requested: state saved, exiting")
                return 0
            finally:
                self.close_worker()
                self.close_peer_books()
        log.info("trainer done: %s", self.summary)
        return 0

    def reset_run(self) -> None:
        """Forget the previous run: spec, model (its torchrun job ended), shard index, weights cache,
        skipped rounds, log cursor."""
        self.close_worker()
        self.task_id = self.spec = self.runtime = self.worker = self.index = None
        self.encoder = None
        self._global = self._global_root = None
        self.events = None
        self._skipped = set()
        self._early: EarlySteps | None = None  # the next round's early inner steps (spec overlap_steps)
        self._round_input = None  # (round, its input weights) of the last round trained (rescoring)
        self._scorer = None  # ShardScorer of the run (with score_min: checking a LossIncrease)
        self._stale: dict[int, dict] = {}  # fault "stale": fragment -> the pseudo-gradient it replays

    # ------------------------------------------------------------------ one run

    def serve(self, task_id: bytes) -> bool:
        """Join run ``task_id`` and train every round until it is over."""
        run = self.open_task(task_id)
        self.enroll(run)
        self.build_worker()
        self.step_until_done("trainer round")
        return True

    def prepare(self, run: RunView) -> None:
        """Fetch the spec (checked against ``specHash``) and the dataset (checked against the spec's
        ``dataset_hash``), build the model layout, and start event scans where the run was posted."""
        self.spec = fetch_spec(self.ipfs, run.spec_cid, run.spec_hash)
        self.runtime = TaskRuntime.from_spec(self.spec, max_params=self.config.max_model_params)
        start = self.chain.run_start_block(run)
        self.events = EventCursor(self.chain, ["AvailabilityChallenged"],
                                  task_id=self.task_id, start_block=start,
                                  confirmations=getattr(self.config, "confirmations", 0),
                                  tail_blocks=getattr(self.config, "reorg_tail_blocks", 64),
                                  path=self.data_dir / f"trainer-{self.task_id.hex()}.cursor.json")
        self.challenges = ChallengeAnswerer(self.chain, self.ipfs, self.task_id, start, self.runtime)
        self._loop = ChallengeLoop(self.chain, self.task_id, start, self.challenges, self.chain_now) \
            if self.fault is not None and self.fault.kind == "challenge_loop" else None
        self.encoder = PayloadEncoder(self.runtime, self.data_dir / f"trainer-ef-{self.task_id.hex()}.safetensors")
        for r, f in self.events.extra.get("challenges", []):  # open when the previous life ended
            self.challenges.note(int(r), int(f))
        self._completed_seen_at: int | None = None
        self.root_prepare()
        df = load_dataset(self.ipfs, self.spec, self.config.dataset_path, max_bytes=self.config.max_dataset_bytes)
        self.df: pd.DataFrame = df
        log.info("task %s: %s, F=%d, H=%d, %d rounds, %d series", self.spec.task_id, self.spec.architecture.family,
                 len(self.runtime.fragments), self.spec.inner_steps, self.spec.max_rounds, df["unique_id"].nunique())

    def enroll(self, run: RunView) -> None:
        """Stake and ``enrollTrainer`` (permit in the same transaction, else approve first) unless
        already enrolled (idempotent across restarts)."""
        stats = self.chain.trainer_stats(self.task_id)
        if not stats.enrolled:
            if not self._listed(self.spec):  # the registry would refuse it (Registry__NotAllowed)
                raise TenzroError(f"run {self.spec.task_id} enrolls only its sponsor's allowlist "
                                  f"({len(self.spec.enrollment_allowlist)} addresses), which does not name "
                                  f"{self.account.address}: nothing sent")
            self.wait_root_flow(run)
            stake = self.config.stake_atto or run.min_stake
            did = self.config.did
            if did == TrainerConfig.model_fields["did"].default:
                did = f"did:tenzro:machine:{self.account.address}"
            try:
                res = self.chain.enroll_trainer(self.task_id, stake, did)
            except TxFailed as exc:  # no receipt in time (or reverted): the chain says whether we are in
                stats = self.chain.trainer_stats(self.task_id)
                if not stats.enrolled:
                    raise
                log.warning("enrollTrainer's receipt did not come (%s) but the chain shows this trainer enrolled "
                            "as %d: going on", exc, stats.index)
            else:
                ev = res.event("TrainerEnrolled")
                log.info("enrolled as trainer %d (shard %d of %d), stake %d atto", ev["index"], ev["shard"],
                         ev["shardCount"], stake)
                stats = self.chain.trainer_stats(self.task_id)
        else:
            log.info("already enrolled as trainer %d", stats.index)
        self.index = stats.index

    def build_worker(self) -> None:
        """The inner trainer on shard ``index`` (restored from ``trainer-state.pt`` when it is this run's):
        `InnerTrainer` in this process with ``devices: 1``, else a `TorchrunWorker` (one torchrun job of
        ``devices`` ranks, kept until the run is over). A saved state of the other kind (``devices``
        changed across a restart: an ``fsdp2-full`` checkpoint for one, a plain one for the other) is
        not loaded: a warning, and the inner state (AdamW moments, sampler) starts fresh; the round's
        weights come from the chain either way."""
        self.close_worker()
        spec, rt = self.spec, self.runtime
        proto = spec.require_protocol()
        split = rt.split(self.df)
        ids = TaskRuntime.shard_ids(split, proto, self.index)
        seed = proto.seed * 1000 + self.index
        cfg = self.config.inner_config(spec.inner_steps, seed=proto.seed)
        n = self.config.device_count()
        if n > 1:
            self.worker = TorchrunWorker(rt.model_cfg, cfg, split, ids, data_seed=seed, init_seed=proto.seed, nproc=n)
            log.info("inner loop: a torchrun job of %d ranks on %s", n, self.worker.device)
        else:
            self.worker = InnerTrainer(rt.model_cfg, cfg, WindowDataset(split, ids, seed=seed), init_seed=proto.seed)
        if self.state_path.exists():
            saved = load_state_file(self.state_path)
            if saved.get("task") == "0x" + self.task_id.hex() and saved.get("index") == self.index:
                have, want = saved["inner"].get("format", "in-process"), "fsdp2-full" if n > 1 else "in-process"
                if have != want:
                    log.warning("%s holds an inner state of format %s but devices=%d wants %s: the inner state "
                                "(AdamW moments, sampler) starts fresh; the round's weights come from the chain",
                                self.state_path, have, n, want)
                else:
                    self.worker.load_state_dict(saved["inner"])
                    log.info("restored inner state after round %d from %s", saved["round"], self.state_path)
        log.info("shard %d: %d series", self.index, len(ids))

    def close_worker(self) -> None:
        """End the inner trainer's torchrun job, if it has one (`TorchrunWorker.close`)."""
        close = getattr(getattr(self, "worker", None), "close", None)
        if close is not None:
            close()

    def save_state(self, round_: int) -> None:
        atomic_torch_save({"task": "0x" + self.task_id.hex(), "index": self.index, "round": round_,
                           "inner": self.worker.state_dict()}, self.state_path)

    # ------------------------------------------------------------------ a round

    def step(self) -> str:
        """One unit of work: train + deliver the open round (if not done yet) and wait for it to be
        committed; after the last round, seal and claim (`root_finish`). Returns ``"done"`` when
        the run is over for this trainer, else ``"next"``."""
        self.check_stop()
        run = self.chain.get_run(self.task_id)
        if run.status in (RunStatus.COMPLETED, RunStatus.SEALED, RunStatus.CANCELLED):
            return self.root_finish(run)  # a cancelled stalled run pays its committed rounds by claims too
        if run.status == RunStatus.TRAINING and self.fault is not None and self.fault.kind == "copycat":
            return self.copy_round(run)
        if run.status == RunStatus.ENROLLING and self.settle_enrollment(run, open_round=False) == "cancelled":
            return "done"  # the deadline passed short of K: cancelled, this trainer's stake refunded
        if run.status != RunStatus.TRAINING:
            self.sleep(self.poll_s)
            return "next"
        if self.end_stalled_run(run):
            return "done"
        r = run.current_round
        set_log_context(round=r)
        if r not in self._outbox and r not in self._skipped:  # this process's outbox says what is delivered
            last = self.closes_of(r, run.round_opened_at)  # commitments end with the commit phase
            if self.chain_now() > last:
                log.warning("round %d: commit phase %d closed before delivery; skipping the round", r, last)
                self._skipped.add(r)
            else:
                self.train_and_submit(run, r)
        self.root_wait(r)
        return "next"

    def round_weights(self, run: RunView, r: int) -> tuple[dict[str, torch.Tensor], float]:
        """Round r's input weights, hash-checked; returns (state, seconds spent fetching)."""
        if self._global is not None and self._global_root == run.weights_root:
            return self._global, 0.0
        t0 = time.perf_counter()
        if r == 0:
            state, blobs = initial_weights(self.ipfs, self.spec, self.runtime, run.initial_weights_root)
        else:
            commit = self.root_commit_weights(r - 1)
            state, blobs = fetch_weights(self.ipfs, self.runtime, list(commit["fragmentCids"]),
                                         [bytes(h) for h in commit["fragmentHashes"]], run.weights_root,
                                         chunk_roots=True)  # §2 roots (PROTOCOL.md §5)
        self.metrics.ipfs_in(sum(len(b) for b in blobs))
        self._global, self._global_root = state, run.weights_root
        return state, time.perf_counter() - t0

    def _pin_and_sign(self, r: int, global_state, res, tick) -> None:
        """Encode and pin the outer gradient of every fragment (PIN_WORKERS at a time), then sign
        each for delivery in fragment order (`sign_for_delivery`). With error feedback every
        fragment is encoded and the residuals saved before the first is signed (a restart then
        finds the residuals of what it delivered)."""
        todo = list(enumerate(self.runtime.fragments))

        def pin(item):
            f, names = item
            delta = pseudo_gradient(fragment_state(global_state, names), fragment_state(res.state, names))
            fault = self.fault.kind if self.fault is not None and self.fault.applies(r, f) else None
            if fault == "stale":
                delta = self._stale.setdefault(f, delta)
            elif fault:
                delta = apply_fault(fault, delta)
            meta = dict(task=self.runtime.task, round=r, fragment=f, trainer=self.account.address.lower(),
                        dtype="float32", kind="pseudo_gradient")
            if fault == "nan" and not self.encoder.dense:  # no codec encodes NaN: sent dense (Malformed)
                blob, flat = encode_fragment(delta, meta), flatten_fragment(delta)
            else:
                blob, flat = self.encoder.encode(r, f, delta, meta)
            digest = hashlib.sha256(blob + b"\x00" if fault == "wrong_hash" else blob).digest()
            root, sumsq = ChunkTree(flat).root  # the commitment it signs (PROTOCOL.md §2): the decoded vector
            cid = kubo_cid(blob) if fault == "withhold" else self.ipfs.add(blob)
            return f, SignedPayload(root, sumsq, cid, digest), fault, len(blob)

        with ThreadPoolExecutor(max_workers=PIN_WORKERS, thread_name_prefix="pin") as pool:
            pinned = pool.map(pin, todo)
            if self.encoder.feedback:
                pinned = list(pinned)
                self.encoder.save()
            for k, (f, payload, fault, size) in enumerate(pinned):  # in fragment order
                tick(k + 1, len(todo))
                self.metrics.ipfs_out(size)
                self._payload_bytes += size
                if fault:
                    log.warning("FAULT INJECTION: fragment %d of round %d sent with fault %r", f, r, fault)
                self.sign_for_delivery(r, f, payload)

    def train_and_submit(self, run: RunView, r: int) -> None:
        """H inner steps from round r's weights, then one signed submission per fragment, whose
        commitments are published at once (a round trained past its commit phase is skipped)."""
        t_round = time.perf_counter()
        global_state, fetch_s = self.round_weights(run, r)
        self._round_input = (r, global_state)
        self.check_stop()
        self.metrics.round.labels(task=task_label(self.task_id)).set(r)
        early, self._early = (self._early if self._early is not None and self._early.round == r else None), None
        t0 = time.perf_counter()
        with progress_bar(f"round {r}: inner steps", self.spec.inner_steps) as tick:
            if early is not None and early.steps:  # overlap: rebase the steps taken while round r-1 settled
                res = early.finish(self.worker, global_state, on_step=tick)
                log.info("round %d: %d early inner step(s) rebased on the committed weights", r, early.steps)
            else:
                res = self.worker.run(global_state, on_step=tick)
        inner_s = time.perf_counter() - t0
        for st in res.step_times:
            self.metrics.inner_step_seconds.labels(task=task_label(self.task_id)).observe(st)
        self.metrics.loss.labels(task=task_label(self.task_id)).set(res.mean_loss)
        self.save_state(r)
        log.info("round %d: %d inner steps in %.2f s, loss %.4f", r, len(res.step_times), inner_s, res.mean_loss)

        t1 = time.perf_counter()
        self._payload_bytes = 0
        with progress_bar(f"round {r}: pin + sign", len(self.runtime.fragments)) as tick:
            self._pin_and_sign(r, global_state, res, tick)
        n_ok = 0
        if self.chain_now() > self.closes_of(r, run.round_opened_at):  # an honest syncer refuses a late commitment
            log.warning("round %d: training ended after the commit phase closed: the round is skipped", r)
            self._outbox.pop(r, None)
            self._skipped.add(r)
        else:
            n_ok = len(self._outbox.get(r, []))
            self.summary["submitted"] += n_ok
            self.metrics.submitted.labels(task=task_label(self.task_id)).inc(n_ok)
            self.publish(r, run.round_opened_at)  # the commitments, at once
        submit_s = time.perf_counter() - t1
        self.summary["rounds_trained"] += 1
        append_jsonl(self.rounds_path, {"task": "0x" + self.task_id.hex(), "trainer": self.account.address,
                                        "round": r, "fetch_s": round(fetch_s, 6), "inner_s": round(inner_s, 6),
                                        "submit_s": round(submit_s, 6),
                                        "loss": res.mean_loss, "payload_bytes": self._payload_bytes,
                                        "steps": len(res.step_times), "fragments_submitted": n_ok,
                                        "early_steps": early.steps if early else 0,
                                        "early_s": round(early.seconds, 6) if early else 0.0,
                                        "wall_s": round(time.perf_counter() - t_round, 6)})
        overlap = self.spec.require_protocol().overlap_steps
        if overlap and r + 1 < run.max_rounds and r not in self._skipped:
            self._early = EarlySteps(r + 1, res.state, overlap)

    def sleep(self, seconds: float) -> None:
        """`Daemon.sleep`, except while this trainer waits for a round it delivered to settle with
        overlap on (the spec's ``overlap_steps``): then the wait first runs the next round's early
        inner steps (`EarlySteps.run_for`, up to the budget), and sleeps what is left of it."""
        early = self._early
        if early is not None and early.steps < early.limit and seconds > 0 and self.worker is not None:
            t_end = time.monotonic() + seconds
            early.run_for(self.worker, seconds, self.check_stop)
            seconds = t_end - time.monotonic()
        super().sleep(seconds)

    def count_accepted(self, accepted: int) -> int:
        """Count a round's accepted bitmap of this trainer in the metrics and the summary (none
        accepted: a missed round); returns how many fragments were accepted."""
        n = bin(int(accepted)).count("1")
        self.metrics.accepted.labels(task=task_label(self.task_id)).inc(n)
        self.summary["accepted"] += n
        if n == 0:
            self.metrics.missed_rounds.labels(task=task_label(self.task_id)).inc()
            self.summary["missed"] += 1
        return n

"""The syncer's root-flow half (contracts/PROTOCOL.md §5; the wire and phases in
`tenzro_operator.root_flow`): submissions off-chain over pubsub and, when configured, the
syncer's JSON-RPC endpoint (`tenzro_operator.roles.delivery`), both into one intake
(`RootSyncerMixin.root_intake`); one ``commitRound`` per round, the seal after the last challenge
window.

`SyncerDaemon` mixes this in; the validation of payloads, the norm screen, the aggregation and
the outer step are `tenzro_operator.roles.syncer`'s.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time

from eth_utils import to_checksum_address

from tenzro_operator.chain import ChunkOpening, RunStatus
from tenzro_operator.errors import ChainRevert, IpfsError, IpfsUnavailable, ServiceUnavailable, TenzroError
from tenzro_operator.ipfs.pubsub import submission_topic, syncer_topic
from tenzro_operator.roles.delivery import (
    ANNOUNCE_EVERY_S,
    DELIVER,
    Announcement,
    SubmissionEndpoint,
    SubmissionRefused,
    announced_url,
)
from tenzro_operator.roles.intake_guard import Job, TokenBuckets, Verifier
from tenzro_operator.root_flow import (
    MAX_COMMITMENTS,
    MAX_MESSAGE_BYTES,
    CommitMessage,
    RevealMessage,
    RootFlowError,
    bitmap_credits,
    committed_round,
    committed_rounds,
    cumulative_credits,
    fragment_states,
    parse_message,
)
from tenzro_operator.task_assets import load_dataset
from tenzro_operator.transcript import RoundTranscript
from tenzro_trainer import round_commitment as rc

__all__ = ["NOT_YET", "RootSyncerMixin"]

log = logging.getLogger("tenzro.syncer")

MAX_MESSAGES_PER_POLL = 10_000  # pubsub messages read per poll: the rest wait for the next one
INTAKE_BUDGET_S = 0.25  # seconds a poll spends reading pubsub, and again at most waiting for signature checks
SUBSCRIPTION_QUEUE = 256  # pubsub messages a subscription holds for this process (the node drops the rest)
PEER_RATE_PER_S, PEER_BURST = 200.0, 400.0  # pubsub messages per second (and burst) read from one peer
CHAIN_TIME_MAX_AGE_S = 1.0  # seconds the intake's chain time may be cached (one head read a second at most)
MAX_PENDING_CHECKS = 4096  # signature checks queued at most (the oldest dropped)
# commitRound refusals that only mean "not yet": the round is committed on a later poll
NOT_YET = ("Registry__CommitPhaseOpen", "Registry__RevealsPending", "Registry__ChallengesPending")


class RootSyncerMixin:
    """Root-flow state and steps of `SyncerDaemon` (see the module docstring)."""

    _pubsub = None  # PubsubSubscription of the task's submission topic
    _commitments: dict  # (round, fragment, trainer lower) -> set of commitment words received in time
    _reveals: dict  # (round, fragment, trainer lower) -> the latest RevealMessage
    _credits: list[int] | None  # cumulative credits before the open round (trainer-index order)
    _score = None  # the run's ShardScorer (loss-improvement scoring), built at first use
    # the intake's view of the open round, (round, commit phase's last second), set by each
    # root_collect; the endpoint's threads read it (None: no round open for submissions yet)
    _open: tuple[int, int] | None = None
    _intake_lock: threading.Lock  # guards _commitments / _reveals against the endpoint's threads
    _endpoint: SubmissionEndpoint | None = None  # the JSON-RPC endpoint, while collecting
    _endpoint_failed = False  # it could not be bound: pubsub only for this run (logged once)
    _announced_at = 0.0  # time.monotonic() of the last announcement of the endpoint
    _verifier: Verifier | None = None  # signature checks off the main thread (`intake_guard.Verifier`)
    _peer_limits: TokenBuckets | None = None  # pubsub messages per peer
    # pending weights challenges of the run, (round, fragment, momentum, chunk) -> deadline (chain
    # seconds); the next block to read WeightsChallenged events from (None: the run's start); the
    # RootRoundChecker that rebuilds a committed round from its pins (built at the first challenge)
    _weights_pending: dict
    _weights_next: int | None = None
    _weights_checker = None
    _norm_refs: dict  # (round, fragment) -> `_norm_reference`'s answer, the open round's only
    _stand_by_phase: tuple  # (round, opened at, commit phase closes) a stand-in read last (`root_stand_by`)

    def root_prepare(self) -> None:
        """The run's intake state (its topic is subscribed to by `root_listen`, once elected or
        while standing in, `root_stand_by`, which drains it every poll; the JSON-RPC endpoint is
        served once this syncer collects)."""
        self._commitments, self._reveals, self._credits, self._score = {}, {}, None, None
        self._intake_lock, self._open, self._stand_by_phase = threading.Lock(), None, (None, None, None)
        self._weights_pending, self._weights_next, self._weights_checker = {}, None, None
        self._norm_refs = {}
        self.root_close()
        self._verifier = Verifier(MAX_PENDING_CHECKS)
        self._peer_limits = TokenBuckets(PEER_RATE_PER_S, PEER_BURST)

    def root_close(self) -> None:
        if self._pubsub is not None:
            self._pubsub.close()
            self._pubsub = None
        if self._endpoint is not None:
            self._endpoint.unregister(self.task_id, self.root_intake)
            self._endpoint.release()
            self._endpoint = None
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None
        self._endpoint_failed, self._announced_at = False, 0.0

    # ------------------------------------------------------------------ submissions

    def root_collect(self, run, closes: int) -> list:
        """Drain the submission topic into `root_intake` (the endpoint's threads feed it too, see
        `root_serve_endpoint`); after ``closes`` (chain seconds) turn every kept reveal that opens a
        timely commitment of its trainer into a `_Sub` (returned, for `validate_all`)."""
        now = self._take_in(run.current_round, closes, endpoint=True)
        if now <= closes:
            return []
        new = []
        rs = self._round
        with self._intake_lock:
            reveals = list(self._reveals.items())
        for key, m in reveals:
            r, f, trainer = key
            if r != rs.round or (f, trainer) in rs.subs:
                continue
            why = self._refuse_reveal(run, m)
            if why:
                log.debug("round %d: reveal of trainer %s fragment %d not used: %s", r, trainer, f, why)
                continue
            sub = self._sub_class(f, to_checksum_address(m.trainer), m.signed_payload())
            sub.offchain = True
            new.append(sub)
        return new

    def root_stand_by(self, run) -> None:
        """A stand-in's intake (issue 25): while another syncer serves Training run ``run``, keep
        the open round's timely commitments and the reveals that open them from the submission
        topic, through the same `root_intake` and bounds as the serving syncer. A syncer whose
        host is cut after the trainers delivered is replaceable only ``syncerTimeout`` after the
        round deadline, when the trainers have stopped publishing and a late commitment cannot
        be told from a copy of a revealed payload; a stand-in that listened all along commits the
        round with every delivered submission instead of an empty one. Pubsub only: the trainers
        post to the serving syncer's endpoint, and none is announced here. Kept: the open round
        only (older rounds are dropped each call)."""
        if run.status != RunStatus.TRAINING:
            return
        opening = (run.current_round, run.round_opened_at)
        if self._stand_by_phase[:2] != opening:  # the commit phase's end, read once per opening
            self._stand_by_phase = (*opening, self.chain.commit_phase(self.task_id)[0])
        self.root_drop_rounds_before(run.current_round)
        self._take_in(run.current_round, self._stand_by_phase[2])

    def root_drop_rounds_before(self, r: int) -> None:
        """Forget the commitments and reveals of rounds before ``r`` (a round that closed)."""
        with self._intake_lock:
            self._reveals = {k: m for k, m in self._reveals.items() if k[0] >= r}
            self._commitments = {k: c for k, c in self._commitments.items() if k[0] >= r}

    def _take_in(self, r: int, closes: int, endpoint: bool = False) -> int:
        """Open round ``r`` (its commit phase closing at ``closes``, chain seconds) for `root_intake`,
        subscribe once, (``endpoint``) serve the JSON-RPC endpoint, and drain the topic and the
        signature checks, each for at most `INTAKE_BUDGET_S` (what is left is kept on a later
        poll). Returns the chain time the messages were judged at."""
        with self._intake_lock:
            self._open = (r, closes)
        self.root_listen()
        if endpoint:
            self.root_serve_endpoint()
        now = self.chain_now()
        self._drain_pubsub(now)
        if self._verifier is not None:
            self._verifier.drain(INTAKE_BUDGET_S)
        return now

    def root_listen(self) -> None:
        """Subscribe to the run's submission topic, once: called by the elected syncer before it
        rebuilds its state (`restore`: weights fetched, evaluated), so that the commitments sent
        while it gets ready wait in the subscription, and by `root_collect`."""
        if self._pubsub is None:
            self._pubsub = self.ipfs.pubsub_subscribe(submission_topic(self.task_id), max_bytes=MAX_MESSAGE_BYTES,
                                                      queue_size=SUBSCRIPTION_QUEUE)
            log.info("submissions on pubsub topic %s", submission_topic(self.task_id))

    def _drain_pubsub(self, now: int) -> None:
        """Read the submission topic into `root_intake` for at most `INTAKE_BUDGET_S` seconds and
        `MAX_MESSAGES_PER_POLL` messages (the rest wait in the subscription's small queue; beyond it
        the node drops them), at most `PEER_RATE_PER_S` per sending peer. Each message is judged at
        the chain time it arrived (``now`` less the seconds it waited in the subscription), so a
        commitment that came in before the commit phase closed counts though it is read after.

        A subscription whose stream broke (the IPFS node restarted) is dropped and made again on the
        next poll (`root_listen`, which raises `IpfsUnavailable` while the node is still down); what
        was published meanwhile comes again, as trainers publish every poll until the round is
        committed. Before, the dead stream failed every later poll until the daemon halted."""
        end = time.monotonic() + INTAKE_BUDGET_S
        for _ in range(MAX_MESSAGES_PER_POLL):
            if time.monotonic() > end:
                break
            try:
                msg = self._pubsub.get(timeout_s=0)
            except IpfsUnavailable as exc:
                self._pubsub.close()
                self._pubsub = None
                log.warning("the submission topic's subscription broke (%s): subscribing again on the next poll", exc)
                return
            if msg is None:
                break
            if self._peer_limits is not None and not self._peer_limits.take(msg.from_peer):
                continue  # over its rate: dropped unread
            waited = int(time.monotonic() - msg.received_at) if msg.received_at else 0
            try:
                self.root_intake(parse_message(msg.data), now - max(0, waited))
            except RootFlowError as exc:  # malformed, or refused (SubmissionRefused): pubsub is open to anyone
                log.debug("dropped a pubsub message from %s: %s", msg.from_peer, exc)

    def root_intake(self, m: CommitMessage | RevealMessage, now: int | None = None) -> Job | None:
        """The one intake of root-flow messages, pubsub's and the JSON-RPC endpoint's alike: keep a
        commitment that arrives before the commit phase closes (chain seconds ``now``; when None,
        the chain time cached for at most `CHAIN_TIME_MAX_AGE_S`) signed by the enrolled trainer it
        names, and a reveal signed by that trainer that opens one of its kept commitments (the
        latest replaces the previous).

        Cheap checks first, in this order, each refusing without a signature recovery: the task,
        a round open for submissions (the one the last `root_collect` saw), the round, the
        fragment, the trainer enrolled (the cached index), the commit phase (commitments), kept
        already (returns None), the bound of `MAX_COMMITMENTS` signed commitments (commitments),
        a kept commitment it opens and no kept reveal of the same struct (reveals; keccak only).
        Only then is the signature checked, on the verifier's thread (`intake_guard.Verifier`: a
        pair that failed before is refused from memory), and the message kept there once it
        recovers to the trainer. What is kept is bounded by M x F x `MAX_COMMITMENTS` commitments
        and M x F reveals, whatever anyone sends. Thread-safe (the endpoint calls it from its
        worker threads; the dicts are replaced, never changed in place, so a reader holds a
        stable copy).

        Returns:
            The queued signature check (`Job`: ``wait`` for its verdict), or None (kept already).
        Raises:
            SubmissionRefused: the message is not kept (``reason``: wrong_task, no_open_round,
                wrong_round, bad_fragment, not_enrolled, commit_phase_closed,
                too_many_commitments, no_commitment, duplicate, bad_signature (a pair known to
                fail)).
        """
        if bytes.fromhex(m.task[2:]) != self.task_id:
            raise SubmissionRefused("wrong_task", f"task {m.task} is not this run's (0x{self.task_id.hex()})",
                                    {"task": m.task})
        opened = self._open
        if opened is None:
            raise SubmissionRefused("no_open_round", "no round is open for submissions at this syncer yet")
        r, closes = opened
        if m.round != r:
            raise SubmissionRefused("wrong_round", f"round {m.round} is not the round open for submissions ({r})",
                                    {"round": m.round, "open": r})
        if m.fragment >= len(self.runtime.fragments):
            raise SubmissionRefused("bad_fragment", f"fragment {m.fragment} of a run with "
                                                    f"{len(self.runtime.fragments)}", {"fragment": m.fragment})
        key = (m.round, m.fragment, m.trainer.lower())
        if key[2] not in self._trainer_indices():
            raise SubmissionRefused("not_enrolled", f"{m.trainer} is not an enrolled trainer of the run",
                                    {"trainer": m.trainer})
        if isinstance(m, CommitMessage):
            return self._intake_commitment(m, key, closes, now)
        return self._intake_reveal(m, key)

    def _intake_commitment(self, m: CommitMessage, key: tuple, closes: int, now: int | None) -> Job | None:
        if now is None:
            now = self.chain_now(max_age_s=CHAIN_TIME_MAX_AGE_S)
        if now > closes:
            raise SubmissionRefused("commit_phase_closed", f"the commit phase of round {key[0]} closed at {closes} "
                                                           f"(chain time now {now})", {"closes": closes, "now": now})
        word = m.word()
        seen = self._commitments.get(key, frozenset())
        if word in seen:
            return None  # kept already (pubsub repeats every poll)
        if len(seen) >= MAX_COMMITMENTS:
            raise SubmissionRefused("too_many_commitments", f"{MAX_COMMITMENTS} signed commitments of this trainer "
                                                            "and fragment kept already", {"limit": MAX_COMMITMENTS})

        def keep() -> None:
            with self._intake_lock:
                held = self._commitments.get(key, frozenset())
                if word not in held and len(held) < MAX_COMMITMENTS:
                    self._commitments = {**self._commitments, key: frozenset(held | {word})}

        return self._check_signature(m.digest(self.chain.chain_id, self.chain.registry.address), m, key, keep)

    def _intake_reveal(self, m: RevealMessage, key: tuple) -> Job | None:
        kept = self._reveals.get(key)
        if kept == m:
            return None  # kept already (pubsub repeats every poll)
        word = m.commitment()
        if word not in self._commitments.get(key, ()):
            raise SubmissionRefused("no_commitment", "no signed commitment to this reveal was kept in the commit phase",
                                    {"commitment": "0x" + word.hex()})
        if kept is not None and kept.commitment() == word:
            raise SubmissionRefused("duplicate", "a reveal of this submission, signed by its trainer, is kept already")

        def keep() -> None:
            with self._intake_lock:
                self._reveals = {**self._reveals, key: m}

        return self._check_signature(m.digest(self.chain.chain_id, self.chain.registry.address), m, key, keep)

    def _check_signature(self, digest: bytes, m, key: tuple, keep) -> Job:
        """Queue the check that ``m``'s signature over ``digest`` recovers to its trainer (``keep``
        runs once it does); a closed verifier (the run ended) refuses it as ``no_open_round``."""
        verifier = self._verifier
        if verifier is None:  # closed meanwhile (the run ended)
            raise SubmissionRefused("no_open_round", "this syncer no longer collects submissions of the run")
        job = verifier.submit(digest, bytes.fromhex(m.signature[2:]), key[2], keep)
        if job is None:
            raise SubmissionRefused("bad_signature", f"the signature was checked before and does not recover to "
                                                     f"trainer {key[2]}", {"recovered": None, "trainer": key[2]})
        return job

    def root_serve_endpoint(self) -> None:
        """With ``submission_rpc_port`` configured: serve `DELIVER` for this run (once, while this
        syncer collects) and announce its URL on the run's syncer topic, signed, every
        `ANNOUNCE_EVERY_S` seconds. A port that cannot be bound is logged once: pubsub only."""
        port = getattr(self.config, "submission_rpc_port", None)
        if port is None or self._endpoint_failed:
            return
        host = self.config.submission_rpc_host
        if self._endpoint is None:
            try:
                ep = SubmissionEndpoint.acquire(host, port, self.config.submission_rpc_max_request_bytes)
            except OSError as exc:
                self._endpoint_failed = True
                log.warning("root flow: cannot serve the submission endpoint on %s:%d (%s): submissions over "
                            "pubsub only", host, port, exc)
                return
            ep.register(self.task_id, self.root_intake)
            self._endpoint = ep
            log.info("root flow: submissions also over JSON-RPC (%s) at %s", DELIVER, ep.url)
        if time.monotonic() - self._announced_at < ANNOUNCE_EVERY_S:
            return
        self._announced_at = time.monotonic()
        url = announced_url(host, self._endpoint.url, self.config.submission_rpc_url)
        if url is None:
            return
        ann = Announcement.signed(self.account, self.task_id, url, int(time.time()))
        try:
            self.ipfs.pubsub_publish(syncer_topic(self.task_id), ann.encode())
        except IpfsError as exc:
            log.debug("announcing the submission endpoint failed (%s): retrying later", exc)

    def _refuse_reveal(self, run, m: RevealMessage) -> str:
        """Why reveal ``m`` cannot be accepted ("" when it can)."""
        if bytes.fromhex(m.base_root[2:]) != run.weights_root:
            return "signed over other input weights than the round's"
        if m.commitment() not in self._commitments.get((m.round, m.fragment, m.trainer.lower()), ()):
            return "no signed commitment to it arrived in the commit phase"
        return ""

    # ------------------------------------------------------------------ scoring

    def root_score(self, r: int, accepted: dict) -> None:
        """Loss-improvement scoring (the spec's ``score_min``, `tenzro_trainer.scoring`): each
        accepted off-chain payload of round r is scored, against the weights the round started
        from, on a fixed batch of training windows from its trainer's own shard (seeded by the
        task id, the trainer index and the round, so a watcher draws the same): an honest update
        lowers the loss on the data it was trained on, a sign-flipped one raises it, whatever the
        other shards say. One at or below ``score_min`` is rejected (``LossIncrease``) and left
        out of ``accepted`` (in place). A forced on-chain submission is never scored out: the
        registry requires it accepted or proven invalid."""
        from tenzro_operator.shard_score import shard_scorer

        floor = self.spec.require_protocol().score_min
        if floor is None:
            return
        if self._score is None:
            df = load_dataset(self.ipfs, self.spec, self.opt("dataset_path", None),
                              max_bytes=self.config.max_dataset_bytes)
            self._score = shard_scorer(self.runtime, self.spec, df)
        state = self._state()
        liar = self.fault.false_loss_increase if self.fault is not None else None
        for f, subs in accepted.items():
            for s in subs:
                if not s.offchain:
                    continue
                i = self._index(s)
                score = self._score.score(r, i, state, self.runtime.fragments[f], s.tensors)
                if i == liar:
                    log.warning("FAULT INJECTION: trainer %d's fragment %d (score %.6g) rejected as LossIncrease", i,
                                f, score)
                    score = floor
                if score <= floor:
                    self._reject(s, "LossIncrease", f"loss-improvement score {score:.6g} on its shard <= score_min "
                                                    f"{floor:g}")
            accepted[f] = [s for s in subs if s.reason is None]

    # ------------------------------------------------------------------ the commit

    def previous_credits(self, run) -> list[int]:
        """Every trainer's cumulative credits before the open round, summed from the run's
        ``RoundCommitted`` events (cached until the next commit)."""
        if self._credits is None:
            rounds = committed_rounds(self.chain, self.task_id, self._run_start, run.current_round)
            self._credits = cumulative_credits(rounds, self.runtime.sizes, run.enrolled_count)
        return self._credits

    def root_extras(self, r: int, accepted: dict, run) -> tuple[dict, dict]:
        """What a root-flow transcript adds: per fragment the pinned momentum (``BlobRef`` fields)
        and, per accepted submission, the signed struct's fields (keyed by (fragment, trainer))."""
        blobs = self.runtime.encode_weights({n: m for o in self.outers for n, m in zip(o.names, o.momentum)}, r,
                                            kind="momentum")
        momentum = {f: {"cid": self.ipfs.add(b), "sha256": "0x" + hashlib.sha256(b).hexdigest()}
                    for f, b in enumerate(blobs)}
        fields = {}
        for f, subs in accepted.items():
            for s in subs:
                p = s.signed
                fields[(f, s.key)] = {"base_root": "0x" + run.weights_root.hex(),
                                      "payload_root": "0x" + p.payload_root.hex(), "payload_sumsq": p.payload_sumsq,
                                      "signature": "0x" + p.signature.hex()}
        return momentum, fields

    def root_commit(self, run, r: int, accepted: dict, bitmaps: list[int], hashes: list[bytes],
                    transcript: RoundTranscript, tcid: str):
        """``commitRound`` of round r: the fragments root of the outer optimizers' state and the
        accepted sets (struct hashes over the round's input weights root), the bitmaps and the
        credits before the round. Returns the `TxResult`; a refusal that means "not yet" raises
        `ChainRevert` for `finalize` to retry on a later poll."""
        index = self._trainer_indices()
        sets = {f: {index[s.key]: rc.struct_hash(self.task_id, r, f, run.weights_root, s.signed.payload_root,
                                                s.signed.payload_sumsq, s.cid, s.payload_hash) for s in subs}
                for f, subs in accepted.items()}
        states = fragment_states(self.outers, sets, run.enrolled_count)
        previous = self.previous_credits(run)
        res = self.chain.commit_round(self.task_id, r, rc.fragments_root([s.leaf for s in states]), bitmaps,
                                      previous, hashes, transcript.hash(), tcid)
        self._credits = [c + bitmap_credits(b, self.runtime.sizes) for c, b in zip(previous, bitmaps)]
        return res

    # ------------------------------------------------------------------ committed rounds

    def _root_checker(self):
        """This run's `RootRoundChecker` (committed rounds rebuilt from their transcripts)."""
        from tenzro_operator.root_check import RootRoundChecker

        if self._weights_checker is None:
            self._weights_checker = RootRoundChecker(self.chain, self.ipfs, self.task_id, self.spec, self.runtime,
                                                     self._run_start)
        return self._weights_checker

    def _norm_reference(self, f: int) -> tuple[tuple, list[int]] | None:
        """The open round's norm-screen reference for fragment f (`RootRoundChecker.norm_reference`:
        the ``NormReference`` tuple and the previous round's accepted sums), read once per round
        and fragment. None when there is none (round 0, nothing accepted) or it cannot be read now
        (logged): forced submissions are then accepted, as the registry could not convict them."""
        r = self._round.round
        if (r, f) not in self._norm_refs:
            try:
                ref = self._root_checker().norm_reference(r, f)
            except (TenzroError, IpfsError) as exc:
                log.warning("round %d fragment %d: no norm-screen reference for forced submissions (%s)", r, f, exc)
                return None
            self._norm_refs = {k: v for k, v in self._norm_refs.items() if k[0] == r}
            self._norm_refs[(r, f)] = ref
        return self._norm_refs[(r, f)]

    # ------------------------------------------------------------------ weights challenges

    def root_answer_weights(self) -> int:
        """Answer every pending ``challengeWeights`` of this run (PROTOCOL.md §5 "Weights
        availability"): read the ``WeightsChallenged`` events since the last poll, and for each
        one whose deadline has not passed send ``answerWeights`` with the round's roots (its
        ``RoundCommitted`` event), the fragment leaf and its path, the round's fragment hashes (the
        leaves' §2 weights roots) and the chunk's opening. The round's state is rebuilt from what
        this syncer pinned when it committed it (the transcript names the weights and momentum
        blobs, `RootRoundChecker.committed`), so the answer survives a restart. A challenge the
        registry no longer holds (answered by someone else, voided, expired) is dropped; one that
        cannot be answered yet (a lagging node, IPFS) is retried on the next poll until its
        deadline. Returns the number answered by this call."""
        if self._weights_next is None:
            self._weights_next = self._run_start
        head = self.chain.block_number()
        if head >= self._weights_next:
            for ev in self.chain.get_logs(self._weights_next, head, ["WeightsChallenged"], task_id=self.task_id):
                a = ev["args"]
                key = (int(a["round"]), int(a["fragment"]), bool(a["momentum"]), int(a["chunkIndex"]))
                self._weights_pending[key] = int(a["deadline"])
                log.warning("round %d: %s challenged chunk %d of fragment %d's %s: answering", key[0],
                            a["challenger"], key[3], key[1], "momentum" if key[2] else "weights")
            self._weights_next = head + 1
        if not self._weights_pending:
            return 0
        now, answered = self.chain_now(), 0
        for key, deadline in sorted(self._weights_pending.items()):
            r, f, momentum, chunk = key
            if now > deadline:
                log.error("round %d: the weights challenge of fragment %d chunk %d passed its deadline unanswered",
                          r, f, chunk)
                del self._weights_pending[key]
                continue
            try:
                event = committed_round(self.chain, self.task_id, self._run_start, r, wait_s=30.0, sleep=self.sleep,
                                        poll_s=self.poll_s)
                c = self._root_checker().committed(r, event)
                tree = c.states[f].momentum if momentum else c.states[f].weights
                opening = (c.states[f].leaf.as_tuple(), rc.fragments_tree(c.leaves).path(f),
                           [s.leaf.weights_root for s in c.states], ChunkOpening.of(tree, chunk).to_abi())
                self.chain.answer_weights(self.task_id, r, f, momentum, c.roots, opening)
            except ChainRevert as exc:
                if exc.error_name in ("Registry__NoChallenge", "Registry__ChallengeDeadline"):
                    log.info("round %d: the weights challenge of fragment %d chunk %d is settled already (%s)", r, f,
                             chunk, exc.error_name)
                    del self._weights_pending[key]
                    continue
                log.error("round %d: answering the weights challenge of fragment %d chunk %d failed: %s", r, f,
                          chunk, exc)
                continue
            except (TenzroError, IpfsError) as exc:  # not readable yet: retried on the next poll
                log.warning("round %d: cannot answer the weights challenge of fragment %d chunk %d yet: %s", r, f,
                            chunk, exc)
                continue
            del self._weights_pending[key]
            answered += 1
            self._tally("weights_challenges_answered", 1)
            log.info("round %d: answered the weights challenge of fragment %d chunk %d (the bond is this syncer's)",
                     r, f, chunk)
        return answered

    def root_slash_unrevealed(self, r: int, rs) -> int:
        """After this syncer committed round r: ``slashUnrevealed`` every on-chain forced
        commitment of the round's opening that was never revealed (``rs.commitments`` less the
        round's ``GradientSubmitted``; PROTOCOL.md §5, "Commit never reveal"). The registry burns
        the slash: a duty, not a gain. A refusal (revealed after all, slashed by another first, a
        commitment of an opening a rewind cut) or an outage is logged and left. Returns the
        commitments slashed."""
        revealed = {(s.fragment, s.key) for s in rs.subs.values() if not s.offchain}
        slashed = 0
        for f, trainer in sorted(rs.commitments - revealed):
            try:
                res = self.chain.slash_unrevealed(self.task_id, r, f, trainer)
            except (ChainRevert, ServiceUnavailable) as exc:
                log.info("round %d: trainer %s's forced commitment of fragment %d was not slashed: %s", r, trainer,
                         f, exc)
                continue
            slashed += 1
            self._tally("unrevealed_slashed", 1)
            log.warning("round %d: trainer %s committed fragment %d on-chain and never revealed it: slashed %d atto "
                        "(burned; tx %s)", r, trainer, f, int(res.event("TrainerSlashed")["amount"]), res.tx_hash)
        return slashed

    # ------------------------------------------------------------------ restarts, the seal

    def root_commits(self) -> dict[int, dict]:
        """``round -> commit`` of the run's committed rounds in the shape `rebuild_round` reads
        (``transcriptCid``, ``transcriptHash``, ``weightsRoot``)."""
        run = self.chain.get_run(self.task_id)
        upto = run.current_round if run.status == RunStatus.TRAINING else run.max_rounds  # not a discarded round
        return {r: {"transcriptCid": a["transcriptCid"], "transcriptHash": bytes(a["transcriptHash"]),
                    "weightsRoot": bytes(a["weightsRoot"])}
                for r, a in committed_rounds(self.chain, self.task_id, self._run_start, upto).items()}

    def root_seal(self) -> bool:
        """``sealRootRun`` once the last round's challenge window has passed; True when the run is
        sealed (by this call or someone else's), False to try again on a later poll."""
        try:
            self.chain.seal_root_run(self.task_id)
        except ChainRevert as exc:
            if exc.error_name in ("Registry__ChallengeWindowOpen", "Registry__ChallengesPending"):
                if getattr(self, "_seal_wait_said", None) != self.task_id:  # once per run, not once per poll
                    self._seal_wait_said = self.task_id
                    log.info("every round is committed: the run stays COMPLETED until %s, then this syncer seals it",
                             "the last round's challenge window closes" if exc.error_name.endswith("WindowOpen")
                             else "its pending challenges are settled")
                self.nudge_devnet(self.chain_now())
                return False
            if exc.error_name != "Registry__WrongStatus":
                raise
            if self.chain.get_run(self.task_id).status == RunStatus.SEALED:  # not cancelled
                log.info("already sealed (by another account): the run ended sealed")
                self._tally("runs_sealed", 1)
            return True
        self._tally("runs_sealed", 1)
        log.info("sealed the root-flow run: claims are open")
        return True

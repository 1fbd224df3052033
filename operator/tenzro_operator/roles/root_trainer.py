"""The trainer's root-flow half (contracts/PROTOCOL.md §5; the wire and phases in
`tenzro_operator.root_flow`): deliver signed submissions over pubsub in two phases, and to the
syncer's JSON-RPC endpoint too when one is known (`tenzro_operator.roles.delivery`), wait for
``commitRound``, and after the seal claim the reward with a Merkle proof.

A trainer the syncer leaves out without a reason (`RootTrainerMixin.check_left_out`) delivers
on-chain too from the next round on (the forced path, `RootTrainerMixin.force`): the registry
then holds the syncer to each such submission (accepted, proven invalid, or ``proveOmission``
by any watcher). The switch, and the on-chain step of each fragment, are kept for the rest of the
run in ``<data_dir>/trainer-<task>.forced.json`` (written atomically at each change, read back by
`RootTrainerMixin.root_prepare`), so a restart loses no round to the omission again.

`TrainerDaemon` mixes this in; the inner steps, the pseudo-gradients, their payloads and pins
are `tenzro_operator.roles.trainer`'s.
"""

from __future__ import annotations

import json
import logging
import random

from tenzro_operator.chain import RunStatus, RunView, SignedPayload
from tenzro_operator.chain.event_cursor import atomic_write_bytes
from tenzro_operator.errors import ChainRevert, IpfsError, TenzroError
from tenzro_operator.ipfs.pubsub import submission_topic, syncer_topic
from tenzro_operator.roles.delivery import (
    ANNOUNCEMENT_CHECKS_PER_POLL,
    ANNOUNCEMENT_FUTURE_S,
    ANNOUNCER_BURST,
    ANNOUNCER_RATE_PER_S,
    MAX_ANNOUNCEMENTS_PER_POLL,
    Announcement,
    DeliveryWorker,
    post_messages,
)
from tenzro_operator.roles.endpoint_policy import EndpointRefused
from tenzro_operator.roles.intake_guard import BoundedSet, FailedSignatures, TokenBuckets
from tenzro_operator.root_flow import (
    MAX_MESSAGE_BYTES,
    CommitMessage,
    RevealMessage,
    RootFlowError,
    committed_round,
    committed_rounds,
    committed_weights,
    credits_proof,
    cumulative_credits,
    parse_message,
)
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript
from tenzro_trainer.errors import TrainerError

__all__ = ["RootTrainerMixin"]

log = logging.getLogger("tenzro.trainer")


class RootTrainerMixin:
    """Root-flow state and steps of `TrainerDaemon` (see the module docstring)."""

    _outbox: dict  # round -> [(fragment, RevealMessage)]: what this trainer delivers for the round
    _closes: dict  # round -> (its opening's roundOpenedAt, the commit phase's last second), chain time
    _copy_sub = None  # fault copycat: the subscription it copies from
    _committed: dict  # {round: its RoundCommitted args}, the last round root_wait saw committed
    forced: bool = False  # left out once without a reason: deliver on-chain too (`force`)
    _onchain: dict  # round -> {fragment: "committed" | "revealed" | "refused"} on the forced path
    _onchain_at: dict  # round -> the commit phase end (chain s) of the opening its _onchain steps belong to
    # delivery to the syncer's JSON-RPC endpoint (`deliver_rpc`)
    _ann_sub = None  # subscription to the run's syncer topic (the endpoint's announcements)
    _ann: Announcement | None = None  # the latest announcement signed by the run's syncer
    _rpc_logged: tuple | None = None  # (round, what): the last problem logged (once per round)
    _delivery: DeliveryWorker | None = None  # posts the batches off the main loop (made at the first one)
    # checking a LossIncrease verdict (`false_loss_increase`); the daemon's reset_run clears them
    _round_input: tuple | None = None  # (round, its input weights) of the last round trained
    _scorer = None  # the run's ShardScorer

    def root_prepare(self) -> None:
        self._outbox, self._closes, self._committed, self._onchain, self._onchain_at = {}, {}, {}, {}, {}
        self.forced = bool(getattr(self.config, "force_onchain", False))
        self.load_forced()

    # -- the forced path's state, kept across restarts (``<data_dir>/trainer-<task>.forced.json``)

    @property
    def forced_path(self):
        return self.data_dir / f"trainer-{self.task_id.hex()}.forced.json"

    def save_forced(self) -> None:
        """Write `forced` and `_onchain` (round -> the opening's commit phase end, chain s, and
        fragment -> step) atomically to `forced_path`."""
        state = {"task": "0x" + self.task_id.hex(), "forced": bool(self.forced),
                 "onchain": {str(r): {"closes": self._onchain_at.get(r), "steps": {str(f): v for f, v in steps.items()}}
                             for r, steps in self._onchain.items()}}
        atomic_write_bytes(self.forced_path, json.dumps(state, sort_keys=True).encode())

    def load_forced(self) -> None:
        """Restore the forced path from `forced_path` (a previous life of this trainer in this run):
        a saved ``forced`` switch stays on, the on-chain steps are kept. No file: nothing to restore;
        an unreadable or foreign one is logged and ignored (the switch comes back after the next
        omission)."""
        path = self.forced_path
        if not path.exists():
            return
        try:
            state = json.loads(path.read_bytes())
            if state.get("task") != "0x" + self.task_id.hex() or not isinstance(state.get("forced"), bool):
                raise ValueError("not this run's forced-path state")
            rounds = {int(r): (v["closes"], {int(f): str(step) for f, step in v["steps"].items()})
                      for r, v in state.get("onchain", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
            log.warning("the forced-path state %s cannot be read (%s): ignored; it is rebuilt after the next omission",
                        path, exc)
            return
        self.forced = self.forced or state["forced"]
        self._onchain = {r: steps for r, (_, steps) in rounds.items()}
        self._onchain_at = {r: closes for r, (closes, _) in rounds.items() if closes is not None}
        if state["forced"]:
            log.info("the forced path is on (restored from %s): delivering on-chain too", path)

    def wait_root_flow(self, run: RunView) -> None:
        """Before enrolling: wait until the sponsor's ``useRootFlow`` has landed (the transaction
        after ``postTask`` that gives the run its initial fragments root and outer rule; it must
        come before any enrollment), at most until the enrollment deadline.

        Raises:
            TenzroError: the enrollment deadline passed and the sponsor never called useRootFlow.
        """
        while not self.chain.is_root_flow(self.task_id):
            if self.chain_now() >= run.enrollment_deadline:
                raise TenzroError(f"run 0x{self.task_id.hex()}'s sponsor never called useRootFlow (the run has "
                                  "no initial fragments root): not enrolling")
            log.info("waiting for the sponsor to put the run in the root flow before enrolling")
            self.sleep(self.poll_s)

    def closes_of(self, r: int, opened_at: int) -> int:
        """The commit phase end (chain seconds) of round r's opening at ``opened_at`` (the run's
        ``round_opened_at``; a rewind reopens a round later, with a phase of its own)."""
        if self._closes.get(r, (None,))[0] != opened_at:
            self._closes[r] = (opened_at, self.chain.commit_phase(self.task_id)[0])
        return self._closes[r][1]

    def sign_for_delivery(self, r: int, f: int, payload: SignedPayload) -> None:
        """Sign fragment f's submission of round r (EIP-712, over the round's input weights root)
        and queue it for delivery (`publish`)."""
        signed = self.chain.sign_outer_gradient(self.task_id, r, f, payload, base_root=self._global_root)
        msg = RevealMessage.of(self.task_id, r, f, self.account.address, self._global_root, signed)
        self._outbox.setdefault(r, []).append((f, msg))

    def _commit_message(self, m: RevealMessage) -> CommitMessage:
        """The signed commitment to reveal ``m`` (EIP-712 ``SubmissionCommitment``, so that only
        this trainer fills its slots at the syncer), signed once and reused every poll."""
        held = self.__dict__.setdefault("_commit_msgs", {})
        word = "0x" + m.commitment().hex()
        c = held.get((m.round, m.fragment))
        if c is None or c.commitment != word:
            c = CommitMessage.signed(self.account, self.chain.chain_id, self.chain.registry.address, m)
            for k in [k for k in held if k[0] < m.round]:
                del held[k]
            held[(m.round, m.fragment)] = c
        return c

    def publish(self, r: int, opened_at: int) -> None:
        """Publish round r's messages (its opening at ``opened_at``) on the task's submission
        topic: the commitments (signed, `_commit_message`) until the commit phase closes, the
        reveals after. Pubsub is best
        effort, so this runs every poll until the round is committed. An IPFS error is logged and
        retried on the next poll."""
        closes = self.closes_of(r, opened_at)
        reveal = self.chain_now() > closes
        topic = submission_topic(self.task_id)
        out = [(m if reveal else self._commit_message(m)).encode() for f, m in self._outbox.get(r, [])]
        if getattr(self.config, "publish_pubsub", True):
            try:
                for data in out:
                    self.ipfs.pubsub_publish(topic, data)
            except IpfsError as exc:
                log.warning("round %d: publishing on %s failed (%s): retrying on the next poll", r, topic, exc)
        self.deliver_rpc(r, out)
        if self.forced:
            self.force(r, reveal, closes)

    def deliver_rpc(self, r: int, messages: list[bytes]) -> None:
        """Queue round r's messages (encoded) for the syncer's endpoint too: the configured
        ``syncer_rpc`` (taken as written), else the URL the run's syncer announced
        (`syncer_rpc_url`), which must pass the URL policy (`endpoint_policy`: public hosts only
        unless ``syncer_rpc_allow_private``; no query string; never this trainer's own IPFS API or
        chain node). Never blocks: a `DeliveryWorker` posts the batch with a total deadline
        (``syncer_rpc_deadline_s``) and a cap on the answer (``syncer_rpc_max_response_bytes``).
        Best effort: a dead or refused endpoint is logged once per round and retried on the next
        poll; pubsub still carries the messages. A refusal of a message (a round not open yet, a
        commitment after the phase) is logged at DEBUG."""
        url = getattr(self.config, "syncer_rpc", None) or self.syncer_rpc_url()
        if url is None:
            if not getattr(self.config, "publish_pubsub", True):
                self._log_rpc_once(r, "none", "round %d: pubsub publishing is off and no syncer endpoint is known "
                                              "yet (none configured, none announced): nothing delivered yet", r)
            return
        if self._delivery is None:
            self._delivery = DeliveryWorker(self._post_batch, self._delivered)
        self._delivery.submit(r, url, messages)

    def _post_batch(self, url: str, messages) -> list:
        """`post_messages` with this trainer's policy and limits (runs on the delivery worker)."""
        cfg = self.config
        return post_messages(url, messages, float(getattr(cfg, "syncer_rpc_deadline_s", 3.0)),
                             max_response_bytes=int(getattr(cfg, "syncer_rpc_max_response_bytes", 1 << 20)),
                             allow_private=bool(getattr(cfg, "syncer_rpc_allow_private", False)),
                             trusted=url == getattr(cfg, "syncer_rpc", None),
                             own=[u for u in (getattr(cfg, "ipfs_api", None), getattr(cfg, "node_rpc", None)) if u])

    def _delivered(self, r: int, url: str, outcome) -> None:
        """What the delivery worker got for round r's batch: the answers, or the error that stopped it."""
        if isinstance(outcome, EndpointRefused):
            self._log_rpc_once(r, "refused", "round %d: not posting to the announced syncer endpoint (%s); pubsub "
                                             "still carries the messages", r, outcome)
        elif isinstance(outcome, TenzroError):
            self._log_rpc_once(r, "dead", "round %d: the syncer endpoint %s does not answer (%s): retrying each "
                                          "poll; pubsub still carries the messages", r, url, outcome)
        else:
            for a in outcome:
                if a is not None:
                    log.debug("round %d: the syncer endpoint refused a message: %s", r, a.get("message"))

    def _log_rpc_once(self, r: int, what: str, fmt: str, *args) -> None:
        if self._rpc_logged != (r, what):
            self._rpc_logged = (r, what)
            log.warning(fmt, *args)

    def syncer_rpc_url(self) -> str | None:
        """The endpoint URL of the latest announcement on the run's syncer topic signed by the
        run's syncer (the topic is subscribed to at the first call of a run); None until one came.

        An outsider may flood the topic, so per poll at most `MAX_ANNOUNCEMENTS_PER_POLL` are read
        (the subscription holds as many; the node drops the rest), at most `ANNOUNCER_RATE_PER_S`
        a second from one peer, and cheap fields are checked before any signature: this task, the
        run's syncer, newer than the one kept, issued at most `ANNOUNCEMENT_FUTURE_S` ahead of the
        chain. Then at most `ANNOUNCEMENT_CHECKS_PER_POLL` signatures are recovered, one per peer
        (its newest; the peer of the last good one first, the others in random order, so an
        outsider's many peers cannot keep the syncer's from being checked), a pair that failed
        once is remembered (`intake_guard.FailedSignatures`), and the newest that recovers to the
        syncer wins."""
        topic = syncer_topic(self.task_id)
        try:
            if self._ann_sub is None or self._ann_sub.topic != topic:
                if self._ann_sub is not None:
                    self._ann_sub.close()
                self._ann_sub, self._ann = None, None
                self._ann_sub = self.ipfs.pubsub_subscribe(topic, max_bytes=MAX_MESSAGE_BYTES,
                                                           queue_size=MAX_ANNOUNCEMENTS_PER_POLL)
            fresh = []
            peers = self.__dict__.setdefault("_ann_peers", TokenBuckets(ANNOUNCER_RATE_PER_S, ANNOUNCER_BURST))
            for _ in range(MAX_ANNOUNCEMENTS_PER_POLL):
                msg = self._ann_sub.get(timeout_s=0)
                if msg is None:
                    break
                if not peers.take(msg.from_peer):
                    continue
                try:
                    a = Announcement.parse(msg.data)
                except RootFlowError:
                    continue
                if a.task == "0x" + self.task_id.hex() and self._newer(a):
                    fresh.append((msg.from_peer, a))
        except IpfsError as exc:
            log.debug("reading the syncer's announcements failed (%s): retrying on the next poll", exc)
            self._ann_sub = None
            return self._ann.url if self._ann is not None else None
        if fresh:
            syncer = self.chain.get_run(self.task_id).syncer.lower()
            latest = self.chain_now() + ANNOUNCEMENT_FUTURE_S
            newest: dict[str, Announcement] = {}  # per peer, its newest candidate
            for peer, a in fresh:
                if a.syncer == syncer and a.issued <= latest and (peer not in newest or a.issued > newest[peer].issued):
                    newest[peer] = a
            # one check per peer: the peer of the last good one first, then peers never caught
            # forging, in random order, then the others: however many peers an outsider runs,
            # the syncer's own is checked within a few polls
            failed = self.__dict__.setdefault("_ann_failed", FailedSignatures(4096))
            liars = self.__dict__.setdefault("_ann_liars", BoundedSet(4096))  # peers caught forging
            peers = list(newest)
            random.shuffle(peers)
            peers.sort(key=lambda p: (p != self.__dict__.get("_ann_peer"), p in liars))
            for peer in peers[:ANNOUNCEMENT_CHECKS_PER_POLL]:
                a = newest[peer]
                triple = (a.digest(), bytes.fromhex(a.signature[2:]), syncer)
                if not self._newer(a) or triple in failed:
                    continue
                if a.signer() != syncer:
                    failed.add(*triple)
                    liars.add(peer)
                    continue
                if self._ann is None or self._ann.url != a.url:
                    log.info("the syncer's submission endpoint: %s (announced)", a.url)
                self._ann, self._ann_peer = a, peer
        return self._ann.url if self._ann is not None else None

    def _newer(self, a: Announcement) -> bool:
        """Whether announcement ``a`` replaces the one kept: none kept, another syncer's, or older."""
        return self._ann is None or a.syncer != self._ann.syncer or a.issued > self._ann.issued

    def force(self, r: int, reveal: bool, closes: int) -> None:
        """The forced path (PROTOCOL.md §5 "Forced inclusion", commit-reveal): each fragment of
        round r also goes on-chain, its commitment (``commitSubmission``, 64,595 gas at M = 3,
        F = 2) in the commit phase and its reveal (``submitOuterGradient``, 79,624 gas) after it,
        both paid by this trainer. A refusal (the phase ended, the round moved on) is logged and
        that fragment stays off-chain only; a reveal refused as early (the node's head not yet past
        ``closes``, chain seconds) is retried on the next poll, after a block is mined on a devnet.
        Each step is saved (`save_forced`) for a restart; steps of an earlier opening of round r
        (another ``closes``: a rewind) are void. A commitment whose transaction failed without an
        answer (a dead RPC, a receipt that never came) may still be mined, and one never revealed
        costs 5 % of the stake (``slashUnrevealed``): it is marked ``sent`` before it goes, sent
        again while the phase lasts and revealed after it like a confirmed one (a reveal of a
        commitment that never landed is refused: ``Registry__NotCommitted``)."""
        fresh = self._onchain_at.get(r) != closes
        if fresh:  # the first call of this opening of round r: steps of an earlier one (a rewind) are void
            if r in self._onchain_at:
                self._onchain.pop(r, None)
            self._onchain_at[r] = closes
        done = self._onchain.setdefault(r, {})
        before = None if fresh else dict(done)
        try:
            for f, m in self._outbox.get(r, []):
                step = done.get(f)
                try:
                    if step in (None, "sent") and not reveal:
                        done[f] = "sent"
                        self.save_forced()
                        self.chain.commit_submission(self.task_id, r, f, m.commitment())
                        done[f] = "committed"
                        log.info("round %d: fragment %d committed on-chain (forced path)", r, f)
                    elif step in ("committed", "sent") and reveal:
                        self.chain.submit_outer_gradient(self.task_id, r, f, m.signed_payload())
                        done[f] = "revealed"
                        self.summary["forced"] = self.summary.get("forced", 0) + 1
                        log.info("round %d: fragment %d revealed on-chain (forced path)", r, f)
                except ChainRevert as exc:
                    if exc.error_name == "Registry__CommitPhaseOpen":
                        self.nudge_devnet(closes)
                        continue
                    done[f] = "revealed" if exc.error_name == "Registry__DuplicateSubmission" else "refused"
                    if done[f] == "refused":
                        log.warning("round %d: the forced path of fragment %d was refused (%s): it stays off-chain "
                                    "only", r, f, exc)
        finally:
            if before is None or done != before:  # kept across a restart (`load_forced`)
                self.save_forced()

    def check_left_out(self, r: int, delivered: dict[int, RevealMessage], bitmap: int) -> None:
        """After round r's commit (``bitmap``: this trainer's accepted fragments): a fragment it
        delivered (``delivered``: fragment -> its reveal) that the commit neither credits nor
        rejects with a reason in its transcript was left out silently (a censoring syncer, or one
        that never got the gossip; a transcript nobody serves counts as silence): from the next
        round on, deliver on-chain too (`forced`). A rejection for a defect changes nothing; a
        ``LossIncrease`` is checked: this trainer scores its own payload as the syncer must have
        (`shard_score.shard_scorer`), and a score above the spec's ``score_min`` makes the verdict false, which
        counts as silence."""
        missing = [f for f in delivered if not bitmap >> f & 1]
        if not missing or self.forced or r not in self._committed:
            return
        ev, me = self._committed[r], self.account.address.lower()
        try:
            tr = RoundTranscript.parse(self.ipfs.cat(ev["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                       bytes(ev["transcriptHash"]))
            rejected = {fr.fragment: x.reason for fr in tr.fragments for x in fr.rejected if x.trainer.lower() == me}
        except (IpfsError, TenzroError) as exc:
            log.warning("round %d: the commit's transcript cannot be read (%s)", r, exc)
            rejected = {}
        silent = [f for f in missing if f not in rejected
                  or rejected[f] == "LossIncrease" and self.false_loss_increase(r, f, delivered[f])]
        if silent:
            self.forced = True
            self.save_forced()
            log.warning("round %d: the syncer left fragment(s) %s of this trainer out without a (true) reason: "
                        "delivering on-chain too (the forced path) from round %d on", r, silent, r + 1)

    def false_loss_increase(self, r: int, f: int, reveal: RevealMessage) -> bool:
        """Whether a ``LossIncrease`` verdict on this trainer's fragment f of round r is false: its
        pinned payload (``reveal.cid``), decoded as the syncer decodes, scores above ``score_min``
        against round r's input weights. Unknown (the weights or the payload are gone): False."""
        from tenzro_operator.shard_score import shard_scorer

        floor = self.spec.require_protocol().score_min
        held = self._round_input
        if floor is None or held is None or held[0] != r:
            return False
        try:
            tensors, _ = self.runtime.decode_payload(self.ipfs.cat(reveal.cid, max_bytes=self.runtime.payload_cap(f)),
                                                     f)
        except (IpfsError, TenzroError, TrainerError) as exc:
            log.warning("round %d: cannot re-read this trainer's fragment %d payload to check the syncer's "
                        "LossIncrease (%s)", r, f, exc)
            return False
        if self._scorer is None:
            self._scorer = shard_scorer(self.runtime, self.spec, self.df)
        score = self._scorer.score(r, self.index, held[1], self.runtime.fragments[f], tensors)
        if score > floor:
            log.warning("round %d: the syncer rejected fragment %d as LossIncrease, but it scores %.6g > score_min "
                        "%g on this trainer's shard", r, f, score, floor)
        return score > floor

    def root_wait(self, r: int) -> bool:
        """Deliver round r's submissions until the syncer commits the round (or the run leaves
        Training), answering the availability challenges of its forced submissions meanwhile (a
        whole-payload one included: an unanswered one loses the submission and 5 % of the stake);
        count the fragments its bitmap accepted. A run sent back by a fraud proof
        below round r, or to round r itself (a new opening), forgets what it delivered (the
        rounds are trained again). Returns True."""
        while True:
            run = self.chain.get_run(self.task_id)
            opening = self._closes.get(r, (run.round_opened_at,))[0]  # the opening delivered to
            reopened = run.current_round == r and opening != run.round_opened_at
            if run.status == RunStatus.TRAINING and (run.current_round < r or reopened):
                # a fraud proof discarded rounds: train the open round again from its (reverted) weights
                log.warning("the run went back to round %d (a round was proven wrong): training it again",
                            run.current_round)
                self._outbox.clear()
                self._closes.clear()
                self._onchain.clear()  # the reopened rounds start with no on-chain submission
                self.save_forced()
                self._skipped = {x for x in self._skipped if x < run.current_round}
                return True
            if run.status != RunStatus.TRAINING or run.current_round > r:
                break
            if r in self._outbox and self.chain_now() <= run.round_deadline:
                self.publish(r, run.round_opened_at)
            if self._onchain.get(r):  # a forced submission can be challenged until the commit: answer it
                self.answer_challenges()
            self.sleep(self.poll_s)
        delivered = dict(self._outbox.pop(r, []))
        if self._onchain.pop(r, None) is not None:
            self.save_forced()
        try:  # a cancelled run may not have committed round r; any other run past it did
            self._committed = {} if run.status == RunStatus.CANCELLED else {r: self._committed_event(r)}
        except RootFlowError:  # the run left Training without committing round r
            self._committed = {}
        bitmap = int(self._committed[r]["acceptedBitmaps"][self.index]) if self._committed else 0
        log.info("round %d committed: %d fragment(s) of this trainer accepted", r, self.count_accepted(bitmap))
        self.check_left_out(r, delivered, bitmap)
        return True

    def root_commit_weights(self, r: int) -> dict:
        """Round r's committed weights (``fragmentCids`` / ``fragmentHashes``) from its transcript
        (`committed_weights`; the caller checks them against the run's weights root), from the
        event `root_wait` read, else read now.

        Raises:
            RootFlowError: round r has no ``RoundCommitted`` event yet (the step is retried).
        """
        ev = self._committed.get(r) or self._committed_event(r)
        cids, hashes = committed_weights(self.ipfs, ev)
        return {"fragmentCids": cids, "fragmentHashes": hashes}

    def _committed_event(self, r: int, wait_s: float = 30.0) -> dict:
        """Round r's ``RoundCommitted`` args once the registry shows the round committed, read again
        for up to ``wait_s`` seconds while the node lags (`committed_round`): a lagging node is no
        failure of this trainer's.

        Raises:
            RootFlowError: still no event after ``wait_s`` (the step fails and is retried).
        """
        return committed_round(self.chain, self.task_id, self.events.start_block, r, wait_s=wait_s,
                               sleep=self.sleep, poll_s=self.poll_s)

    def copy_round(self, run: RunView) -> str:
        """FAULT INJECTION (``fault: {kind: copycat}``; tests and demos only): the copying attack of
        the Protocol v2 issue. Trains nothing; for every reveal of another trainer in the open round
        it publishes a commitment to the same payload signed as its own, then that reveal. Its
        commitments come after the commit phase (a payload is first public in a reveal), so an
        honest syncer never credits it. Returns ``"next"``."""
        if self._copy_sub is None:
            self._copy_sub = self.ipfs.pubsub_subscribe(submission_topic(self.task_id))
            self._copied = set()
        topic, me = submission_topic(self.task_id), self.account.address.lower()
        while (msg := self._copy_sub.get(timeout_s=0)) is not None:
            try:
                m = parse_message(msg.data)
            except RootFlowError:
                continue
            if not isinstance(m, RevealMessage) or m.trainer == me or m.round != run.current_round \
                    or (m.round, m.fragment, m.trainer) in self._copied:
                continue
            base = bytes.fromhex(m.base_root[2:])
            signed = self.chain.sign_outer_gradient(self.task_id, m.round, m.fragment, m.signed_payload(),
                                                    base_root=base)
            mine = RevealMessage.of(self.task_id, m.round, m.fragment, me, base, signed)
            self.ipfs.pubsub_publish(topic, CommitMessage.signed(self.account, self.chain.chain_id,
                                                                 self.chain.registry.address, mine).encode())
            self.ipfs.pubsub_publish(topic, mine.encode())
            self._copied.add((m.round, m.fragment, m.trainer))
            log.warning("FAULT INJECTION: copied trainer %s's fragment %d of round %d as this trainer's", m.trainer,
                        m.fragment, m.round)
        self.sleep(self.poll_s)
        return "next"

    def root_finish(self, run: RunView) -> str:
        """After the last round: seal once the last challenge window has passed (anyone may), then
        claim this trainer's reward; after a stalled run's cancel (`end_stalled_run`), claim its share
        of the committed rounds' pot. Returns ``"done"`` once claimed (or nothing is owed)."""
        if run.status == RunStatus.COMPLETED:
            try:
                self.chain.seal_root_run(self.task_id)
                log.info("sealed the run")
            except ChainRevert as exc:
                if exc.error_name not in ("Registry__ChallengeWindowOpen", "Registry__ChallengesPending",
                                          "Registry__WrongStatus"):
                    raise
                self.nudge_devnet(self.chain_now())
                self.sleep(self.poll_s)
                return "next"
        if run.status not in (RunStatus.COMPLETED, RunStatus.SEALED, RunStatus.CANCELLED):
            return "done"
        if self.chain.claimed(self.task_id, self.index):
            log.info("reward already claimed")
            return "done"
        rounds = committed_rounds(self.chain, self.task_id, self.events.start_block, run.max_rounds)
        credits = cumulative_credits(rounds, self.runtime.sizes, run.enrolled_count)
        if credits[self.index] == 0:
            log.info("no credits in this run: nothing to claim")
            return "done"
        proof = credits_proof(credits, self.index, self.chain.root_state(self.task_id)[2])
        try:
            ev = self.chain.claim_reward(self.task_id, self.index, credits[self.index], proof).event("RewardClaimed")
        except ChainRevert as exc:
            if exc.error_name != "Registry__AlreadyClaimed":
                raise
            return "done"
        log.info("claimed %d atto for %d credits (withdrawable)", ev["reward"], ev["credits"])
        self.summary["claimed_atto"] = self.summary.get("claimed_atto", 0) + int(ev["reward"])
        return "done"

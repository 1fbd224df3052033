"""How a trainer's signed submissions reach the syncer (contracts/PROTOCOL.md §5; the wire and
phases in `tenzro_operator.root_flow`): each fragment's submission signed and queued for its round
(`sign_for_delivery`), then delivered over pubsub in two phases, the commitments in the commit
phase and the reveals after it, every poll until the round is committed, and to the syncer's
JSON-RPC endpoint too when one is known (configured, or announced on the run's syncer topic and
signed by the run's syncer; `tenzro_operator.roles.delivery`), posted off the main loop. A trainer
on the forced path delivers on-chain too (`publish` hands the round to `ForcedPath.force`).

The trainer's forced path (contracts/PROTOCOL.md §5 "Forced inclusion"). A trainer the syncer
leaves out without a reason (`ForcedPath.check_left_out`) delivers on-chain too from the next
round on (the forced path, `ForcedPath.force`): the registry then holds the syncer to each such
submission (accepted, proven invalid, or ``proveOmission`` by any watcher). The switch, and the
on-chain step of each fragment, are kept for the rest of the run in
``<data_dir>/trainer-<task>.forced.json`` (written atomically at each change, read back by
`RoundFollowing.root_prepare`), so a restart loses no round to the omission again. Until its
round is committed a forced submission can be challenged for availability: the trainer reads the
run's events and answers each challenge against it (`answer_challenges`).

Two parts of `TrainerDaemon` (`tenzro_operator.roles.trainer`: the inner steps, the
pseudo-gradients, their payloads and pins are its own; it makes the run's event cursor and
challenge answerer in `prepare`): `SubmissionDelivery` (off-chain) and `ForcedPath` (on-chain).
Must not import `tenzro_operator.roles.trainer` (it imports this module), the syncer's modules
(``roles.syncer*``) or anything of `tenzro_operator.cli`.
"""

from __future__ import annotations

import json
import logging
import random

from tenzro_operator.chain import SignedPayload
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
)
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript
from tenzro_trainer.errors import TrainerError

__all__ = ["ForcedPath", "SubmissionDelivery"]

log = logging.getLogger("tenzro.trainer")


class SubmissionDelivery:
    """The delivery of `TrainerDaemon`'s signed submissions (see the module docstring)."""

    _outbox: dict  # round -> [(fragment, RevealMessage)]: what this trainer delivers for the round
    # delivery to the syncer's JSON-RPC endpoint (`deliver_rpc`)
    _ann_sub = None  # subscription to the run's syncer topic (the endpoint's announcements)
    _ann: Announcement | None = None  # the latest announcement signed by the run's syncer
    _rpc_logged: tuple | None = None  # (round, what): the last problem logged (once per round)
    _delivery: DeliveryWorker | None = None  # posts the batches off the main loop (made at the first one)

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


class ForcedPath:
    """The forced path of `TrainerDaemon`, and the availability challenges against it (see the
    module docstring)."""

    forced: bool = False  # left out once without a reason: deliver on-chain too (`force`)
    _onchain: dict  # round -> {fragment: "committed" | "revealed" | "refused"} on the forced path
    _onchain_at: dict  # round -> the commit phase end (chain s) of the opening its _onchain steps belong to
    # checking a LossIncrease verdict (`false_loss_increase`); the daemon's reset_run clears them
    _round_input: tuple | None = None  # (round, its input weights) of the last round trained
    _scorer = None  # the run's ShardScorer

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

    # -- the availability challenges against this trainer's forced submissions

    def poll_events(self) -> None:
        """Read the run's new events (`EventCursor`: verified against a lagging node, rewound on a
        reorg): the open availability challenges against this trainer's forced submissions; then
        save the cursor with them (a restarted trainer answers a challenge read by its previous life).

        Raises:
            RpcUnavailable: the RPC endpoint is down.
        """
        batch = self.events.poll()
        if batch.reorg_from is not None:  # transactions of ours may have gone with the replaced blocks
            self.chain.resync_nonce()
        me = self.account.address
        for ev in batch.events:
            a = ev["args"]
            if ev["event"] == "AvailabilityChallenged" and a["trainer"] == me:
                self.challenges.note(int(a["round"]), int(a["fragment"]))
        self.events.extra["challenges"] = sorted(self.challenges.open)
        self.events.save()

    def answer_challenges(self) -> None:
        """Read new events, answer every availability challenge against this trainer still open
        (a ``withhold`` fault answers none of its withheld payloads'; ``challenge_loop``: see
        `ChallengeLoop`)."""
        self.poll_events()
        if self.fault is not None and self.fault.kind == "withhold":
            for r, f in self.challenges.open:
                if self.fault.applies(r, f):
                    log.warning("FAULT INJECTION: not answering the availability challenge of round %d fragment %d "
                                "(payload withheld)", r, f)
                    self.challenges.forget(r, f)
        try:
            if self._loop is not None:  # the fault answers late, and challenges itself again
                self._loop.step(self.chain.get_run(self.task_id).current_round)
            else:
                self.challenges.poll()
        finally:
            self.events.extra["challenges"] = sorted(self.challenges.open)
            self.events.save()

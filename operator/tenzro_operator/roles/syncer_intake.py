"""What reaches the syncer in a round (contracts/PROTOCOL.md §5; the wire and phases in
`tenzro_operator.root_flow`): signed commitments in the commit phase and the reveals that open
them, over pubsub and, when configured, the syncer's JSON-RPC endpoint
(`tenzro_operator.roles.delivery`), both into one bounded intake (`SubmissionIntake.root_intake`),
and the forced submissions on-chain (``GradientSubmitted`` / ``SubmissionCommitted`` events, read
with the run's reorg-safe `EventCursor`); a stand-in syncer's intake while another serves the run.

Part of `tenzro_operator.roles.syncer.SyncerDaemon`; imports nothing of the other roles, nor the
syncer's module.
"""

from __future__ import annotations

import logging
import threading
import time

from eth_utils import to_checksum_address

from tenzro_operator.chain import RunStatus, RunView, SignedPayload
from tenzro_operator.errors import IpfsError, IpfsUnavailable
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
from tenzro_operator.roles.syncer_round import _Sub
from tenzro_operator.root_flow import (
    MAX_COMMITMENTS,
    MAX_MESSAGE_BYTES,
    CommitMessage,
    RevealMessage,
    RootFlowError,
    parse_message,
)

MAX_MESSAGES_PER_POLL = 10_000  # pubsub messages read per poll: the rest wait for the next one
INTAKE_BUDGET_S = 0.25  # seconds a poll spends reading pubsub, and again at most waiting for signature checks
SUBSCRIPTION_QUEUE = 256  # pubsub messages a subscription holds for this process (the node drops the rest)
PEER_RATE_PER_S, PEER_BURST = 200.0, 400.0  # pubsub messages per second (and burst) read from one peer
CHAIN_TIME_MAX_AGE_S = 1.0  # seconds the intake's chain time may be cached (one head read a second at most)
MAX_PENDING_CHECKS = 4096  # signature checks queued at most (the oldest dropped)

log = logging.getLogger("tenzro.syncer")


class SubmissionIntake:
    """The round's intake of submissions (see the module docstring)."""

    _pubsub = None  # PubsubSubscription of the task's submission topic
    _commitments: dict  # (round, fragment, trainer lower) -> set of commitment words received in time
    _reveals: dict  # (round, fragment, trainer lower) -> the latest RevealMessage
    # the intake's view of the open round, (round, commit phase's last second), set by each
    # root_collect; the endpoint's threads read it (None: no round open for submissions yet)
    _open: tuple[int, int] | None = None
    _intake_lock: threading.Lock  # guards _commitments / _reveals against the endpoint's threads
    _endpoint: SubmissionEndpoint | None = None  # the JSON-RPC endpoint, while collecting
    _endpoint_failed = False  # it could not be bound: pubsub only for this run (logged once)
    _announced_at = 0.0  # time.monotonic() of the last announcement of the endpoint
    _verifier: Verifier | None = None  # signature checks off the main thread (`intake_guard.Verifier`)
    _peer_limits: TokenBuckets | None = None  # pubsub messages per peer
    _stand_by_phase: tuple  # (round, opened at, commit phase closes) a stand-in read last (`root_stand_by`)

    def root_prepare(self) -> None:
        """The run's intake state (its topic is subscribed to by `root_listen`, once elected or
        while standing in, `root_stand_by`, which drains it every poll; the JSON-RPC endpoint is
        served once this syncer collects)."""
        self._commitments, self._reveals = {}, {}
        self._intake_lock, self._open, self._stand_by_phase = threading.Lock(), None, (None, None, None)
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
            sub = _Sub(f, to_checksum_address(m.trainer), m.signed_payload())
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

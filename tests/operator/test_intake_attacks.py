"""The syncer's off-chain intake under a keyless outsider's attack (issue #24): a real
`SubmissionEndpoint` on 127.0.0.1 and the real intake (`SubmissionIntake.root_intake`), on a
stand-in syncer whose chain is a counter (the chain is not the point here; the devnet version of
the squatting attack is tests/roles/test_intake_squatting.py).

Each test is an attack that worked against cb6ae44 and the behaviour that now stops it:
squatting a trainer's commitment slots with unsigned words; forged reveals and announcements
that each cost a signature recovery, again and again; a chain-head read per delivered commitment;
a flood from one client or peer crowding out the others; a fast wall clock closing the commit
phase early."""

from __future__ import annotations

import secrets
import threading
import time
from types import SimpleNamespace

import httpx
import pytest
from eth_account import Account

import tenzro_operator.roles.intake_guard as guard
from tenzro_operator.chain import SignedPayload, sign_outer_gradient
from tenzro_operator.daemon import Daemon
from tenzro_operator.ipfs.pubsub import PubsubMessage
from tenzro_operator.roles.delivery import (
    ANNOUNCEMENT_CHECKS_PER_POLL,
    CLIENT_BURST,
    CLIENT_RATE_PER_S,
    DELIVER,
    RATE_LIMITED,
    Announcement,
    SubmissionEndpoint,
    encode_message,
    post_messages,
)
from tenzro_operator.roles.intake_guard import TokenBuckets, Verifier
from tenzro_operator.roles.syncer_intake import CHAIN_TIME_MAX_AGE_S, PEER_BURST, PEER_RATE_PER_S, SubmissionIntake
from tenzro_operator.roles.trainer_delivery import SubmissionDelivery
from tenzro_operator.root_flow import MAX_COMMITMENTS, CommitMessage, RevealMessage

TASK = bytes.fromhex("a1" * 32)
REGISTRY = "0x" + "5f" * 20
CHAIN_ID = 31337
BASE = bytes.fromhex("b2" * 32)
NOW = 1_800_000_000  # the stand-in chain's time (unix seconds)
CLOSES = NOW + 30  # the commit phase's last second


class CountingChain:
    """A chain that only tells time: every ``block_timestamp`` is counted."""

    def __init__(self, ts: int = NOW, chain_id: int = CHAIN_ID) -> None:
        self.ts, self.chain_id, self.reads = ts, chain_id, 0
        self.registry = SimpleNamespace(address=REGISTRY)

    def block_timestamp(self, block="latest") -> int:
        self.reads += 1
        return self.ts


class IntakeSyncer(SubmissionIntake):
    """The root-flow intake of a syncer collecting round 0 of `TASK` (F fragments, these trainers)."""

    chain_now = Daemon.chain_now

    def __init__(self, trainers: list, fragments: int = 2) -> None:
        self.task_id, self.chain = TASK, CountingChain()
        self.runtime = SimpleNamespace(fragments=[["w"]] * fragments)
        self.index = {t.address.lower(): i for i, t in enumerate(trainers)}
        self._commitments, self._reveals = {}, {}
        self._intake_lock, self._open = threading.Lock(), (0, CLOSES)
        self._verifier = Verifier()
        self._peer_limits = TokenBuckets(PEER_RATE_PER_S, PEER_BURST)

    def _trainer_indices(self, must_hold=None) -> dict:
        return self.index


def reveal_of(account, f: int = 0, r: int = 0, cid: str = "bafkreal", trainer: str | None = None) -> RevealMessage:
    """``account``'s signed submission of fragment f (payload fields made up), naming ``trainer``."""
    payload = SignedPayload(bytes([f + 1]) * 32, 0x3F800000, cid, bytes([f + 2]) * 32)
    signed = sign_outer_gradient(account, CHAIN_ID, REGISTRY, TASK, r, f, BASE, payload)
    return RevealMessage.of(TASK, r, f, trainer or account.address, BASE, signed)


def commit_of(account, reveal: RevealMessage) -> CommitMessage:
    return CommitMessage.signed(account, CHAIN_ID, REGISTRY, reveal)


def forged_commit(trainer: str, f: int = 0) -> CommitMessage:
    """What a keyless outsider can send: a made-up word and a made-up signature naming ``trainer``."""
    return CommitMessage(task="0x" + TASK.hex(), round=0, fragment=f, trainer=trainer.lower(),
                         commitment="0x" + secrets.token_hex(32), signature="0x" + secrets.token_hex(65))


def forged_reveal(trainer: str, f: int = 0) -> RevealMessage:
    return RevealMessage(task="0x" + TASK.hex(), round=0, fragment=f, trainer=trainer.lower(),
                         base_root="0x" + secrets.token_hex(32), payload_root="0x" + secrets.token_hex(32),
                         payload_sumsq=secrets.randbelow(2**31), cid="bafk" + secrets.token_hex(20),
                         payload_hash="0x" + secrets.token_hex(32), signature="0x" + secrets.token_hex(65))


@pytest.fixture
def trainers():
    return [Account.create() for _ in range(2)]


@pytest.fixture
def syncer(trainers):
    s = IntakeSyncer(trainers)
    yield s
    s._verifier.close()


@pytest.fixture
def endpoint(syncer):
    """The endpoint serving ``syncer``'s intake, without its per-client limit (every client here is
    127.0.0.1; the limit's own test puts it back)."""
    ep = SubmissionEndpoint.acquire("127.0.0.1", 0, 1 << 18)
    ep.register(TASK, syncer.root_intake)
    ep.clients = TokenBuckets(1e9, 1e9)
    yield ep
    ep.release()


@pytest.fixture
def recoveries(monkeypatch):
    """Every signature recovery the intake makes (on which thread)."""
    made: list[str] = []
    real = guard.recover_signer

    def counted(digest, signature):
        made.append(threading.current_thread().name)
        return real(digest, signature)

    monkeypatch.setattr(guard, "recover_signer", counted)
    return made


def _calls(messages) -> list[dict]:
    return [{"jsonrpc": "2.0", "id": i, "method": DELIVER, "params": {"message": encode_message(m.encode())}}
            for i, m in enumerate(messages)]


# ----------------------------------------------------------------------------- squatting


def test_an_outsider_cannot_squat_a_trainers_commitment_slots(syncer, endpoint, trainers):
    """cb6ae44 kept the first 8 words per (round, fragment, trainer), signed by nobody: an outsider's
    8 made-up words refused the trainer's own (``too_many_commitments``) and its reveal opened
    nothing. Now a commitment is kept only when signed by the trainer it names."""
    t0, outsider = trainers[0], Account.create()
    squat = [forged_commit(t0.address, f) for f in (0, 1) for _ in range(MAX_COMMITMENTS)]
    squat += [commit_of(outsider, reveal_of(outsider, f, cid=f"bafkx{f}", trainer=t0.address)) for f in (0, 1)]
    answers = post_messages(endpoint.url, [m.encode() for m in squat])
    assert all(a is not None and a["data"]["reason"] == "bad_signature" for a in answers)
    assert syncer._commitments == {}
    # the trainer's own commitments are kept, and after the phase its reveals open them
    real = [reveal_of(t0, f) for f in (0, 1)]
    assert post_messages(endpoint.url, [commit_of(t0, m).encode() for m in real]) == [None, None]
    syncer._open = (0, NOW - 1)  # the commit phase has closed
    assert post_messages(endpoint.url, [m.encode() for m in real]) == [None, None]
    assert {k: v for k, v in syncer._reveals.items()} == {(0, f, t0.address.lower()): real[f] for f in (0, 1)}
    assert all(syncer._refuse_reveal(SimpleNamespace(weights_root=BASE), m) == "" for m in real)


def test_a_trainer_fills_its_own_slots_and_no_one_elses(syncer, trainers):
    """The bound of `MAX_COMMITMENTS` counts signed commitments only: the trainer's own."""
    t0, t1 = trainers
    for i in range(MAX_COMMITMENTS):
        assert syncer.root_intake(commit_of(t0, reveal_of(t0, cid=f"bafk{i}")), NOW).wait(5) is True
    with pytest.raises(Exception, match="too_many_commitments"):
        syncer.root_intake(commit_of(t0, reveal_of(t0, cid="bafkmore")), NOW)
    assert syncer.root_intake(commit_of(t1, reveal_of(t1)), NOW).wait(5) is True  # t1's slots are its own
    assert len(syncer._commitments[(0, 0, t0.address.lower())]) == MAX_COMMITMENTS


# ----------------------------------------------------------------------------- signature work


def test_forged_reveals_cost_no_signature_recovery(syncer, endpoint, trainers, recoveries):
    """cb6ae44 recovered the signature of every reveal naming an enrolled trainer before anything
    else (4.6 ms each, on the main thread for pubsub): 2,000 forged reveals held it 22.8 s. A
    reveal must now open a kept signed commitment (keccak only) before any recovery, and a copy of
    a kept reveal with another signature is refused as a duplicate."""
    t0 = trainers[0]
    real = reveal_of(t0)
    assert syncer.root_intake(commit_of(t0, real), NOW).wait(5) is True
    syncer._open = (0, NOW - 1)
    assert syncer.root_intake(real, NOW).wait(5) is True
    before = len(recoveries)
    forged = [forged_reveal(trainers[i % 2].address, i % 2) for i in range(2000)]
    copies = [real.model_copy(update={"signature": "0x" + secrets.token_hex(65)}) for _ in range(100)]
    for start in range(0, len(forged), 100):
        answers = post_messages(endpoint.url, [m.encode() for m in forged[start:start + 100]])
        assert {a["data"]["reason"] for a in answers} == {"no_commitment"}
    for m in copies:  # over pubsub's path (the main thread)
        with pytest.raises(Exception, match="duplicate"):
            syncer.root_intake(m, NOW)
    assert len(recoveries) == before  # not one recovery
    assert syncer._reveals == {(0, 0, t0.address.lower()): real}


def test_a_replayed_forgery_costs_one_recovery(syncer, trainers, recoveries):
    """A failed (digest, signature) pair is remembered: sent 500 times, recovered once."""
    m = forged_commit(trainers[0].address)
    assert syncer.root_intake(m, NOW).wait(5) is False
    for _ in range(500):
        with pytest.raises(Exception, match="bad_signature"):
            syncer.root_intake(m, NOW)
    assert len(recoveries) == 1 and syncer._verifier.known_bad == 500


def test_signature_checks_run_off_the_main_thread_in_a_bounded_queue(syncer, trainers, monkeypatch, recoveries):
    """The pubsub path no longer recovers on the thread that commits rounds: its messages wait in
    a bounded queue (the oldest dropped) for the verifier's thread, and a poll waits for them at
    most its budget (`Verifier.drain`), however slow the checks are."""
    gate, started, real = threading.Event(), threading.Event(), guard.recover_signer

    def held(digest, signature):  # a recovery that takes as long as the test wants
        started.set()
        gate.wait(10)
        return real(digest, signature)

    monkeypatch.setattr(guard, "recover_signer", held)
    v = syncer._verifier = Verifier(max_pending=100)
    first = syncer.root_intake(forged_commit(trainers[0].address), NOW)
    assert started.wait(10)  # the verifier's thread holds it
    jobs = [syncer.root_intake(forged_commit(trainers[0].address), NOW) for _ in range(150)]
    assert v.dropped == 50 and all(j.done.is_set() and j.ok is None for j in jobs[:50])
    left = v.drain(0.05)  # the poll's budget ran out: it goes back to committing
    assert left == 101 and not first.done.is_set()
    honest = reveal_of(trainers[1])
    job = syncer.root_intake(commit_of(trainers[1], honest), NOW)  # the newest: dropped last
    gate.set()
    assert v.drain(10) == 0 and job.ok is True
    assert honest.commitment() in syncer._commitments[(0, 0, trainers[1].address.lower())]
    assert v.failed == 100 and v.recovered == 1
    assert set(recoveries) <= {"intake-verifier"}


# ----------------------------------------------------------------------------- chain reads, clocks


def test_delivered_commitments_read_the_chain_head_at_most_once_a_second(syncer, endpoint, trainers):
    """cb6ae44 read the chain head for each delivered commitment, duplicates included: 1,000
    commitments -> 1,000 RPC calls of the syncer's provider quota. Now the intake's chain time is
    cached for `CHAIN_TIME_MAX_AGE_S`."""
    t0 = trainers[0]
    m = commit_of(t0, reveal_of(t0))
    started = time.monotonic()
    for _ in range(10):
        assert post_messages(endpoint.url, [m.encode()] * 100) == [None] * 100
    elapsed = time.monotonic() - started
    assert syncer.chain.reads <= 1 + elapsed / CHAIN_TIME_MAX_AGE_S


def test_a_fast_wall_clock_does_not_close_the_commit_phase_early(monkeypatch):
    """cb6ae44's chain time was the later of the head and the wall clock: a syncer whose clock runs
    an hour fast refused every commitment as ``commit_phase_closed``. Chain time now comes from the
    chain (the head; on a devnet the pending block) plus monotonic seconds since it was read."""
    for chain_id in (1, CHAIN_ID):
        d = SimpleNamespace(chain=CountingChain(NOW, chain_id))
        monkeypatch.setattr(time, "time", lambda: NOW + 3600.0)
        assert Daemon.chain_now(d) <= NOW + 1
        d.chain.ts = NOW + 40  # the chain moved on (increaseTime, new blocks): followed at once
        assert Daemon.chain_now(d) >= NOW + 40
        d.chain.ts = NOW  # never back
        assert Daemon.chain_now(d) >= NOW + 40


# ----------------------------------------------------------------------------- rate limits


def test_one_client_over_its_rate_is_refused_and_another_is_not(syncer, endpoint, trainers):
    """Calls per client IP are limited (`CLIENT_RATE_PER_S`, burst `CLIENT_BURST`): a flood from one
    address is refused ``rate_limited`` before any call runs; a client at another address is served."""
    endpoint.clients = TokenBuckets(CLIENT_RATE_PER_S, CLIENT_BURST)  # the default
    flood = [forged_commit(trainers[0].address) for _ in range(100)]
    refused = 0
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.1")) as http:
        for _ in range(int(CLIENT_BURST) // 100 + 3):
            res = http.post(endpoint.url, json=_calls(flood))
            if res.status_code == 429:  # refused unread, whole (the next test)
                refused += len(flood) * (res.json()["error"]["code"] == RATE_LIMITED)
                continue
            refused += sum(1 for a in res.json() if a.get("error", {}).get("code") == RATE_LIMITED)
    assert refused >= 100 and endpoint.clients.refused >= 1
    t1 = trainers[1]
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as http:
        out = http.post(endpoint.url, json=_calls([commit_of(t1, reveal_of(t1))])).json()
    assert out[0]["result"] == {"accepted": True}


def test_a_client_over_its_rate_is_refused_before_its_body_is_read(syncer, endpoint, trainers, monkeypatch):
    """A client whose bucket is empty is answered 429 ``rate_limited`` and its connection closed
    before its body is read or parsed (a refused flood was parsed on the loop the trainers' posts
    share, and made them time out); a client at another address is still served."""
    endpoint.clients = TokenBuckets(CLIENT_RATE_PER_S, CLIENT_BURST)
    parsed = []
    parse = endpoint.server.dispatcher.parse
    monkeypatch.setattr(endpoint.server.dispatcher, "parse", lambda body: parsed.append(len(body)) or parse(body))
    flood = _calls([forged_commit(trainers[0].address) for _ in range(100)])
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.1")) as http:
        answers = [http.post(endpoint.url, json=flood) for _ in range(int(CLIENT_BURST) // 100 + 3)]
    unread = [a for a in answers if a.status_code == 429]
    assert unread and all(a.json()["error"]["code"] == RATE_LIMITED and a.json()["id"] is None for a in unread)
    assert all(a.headers.get("connection", "").lower() == "close" for a in unread)
    assert len(parsed) == len(answers) - len(unread)  # the refused-unread bodies were never parsed
    t1 = trainers[1]
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as http:
        out = http.post(endpoint.url, json=_calls([commit_of(t1, reveal_of(t1))])).json()
    assert out[0]["result"] == {"accepted": True}


def test_one_flooding_peer_does_not_crowd_out_the_others_on_pubsub(syncer, trainers):
    """Pubsub messages per sending peer are limited before they are parsed: a peer flooding 5,000
    forged commitments is cut at its burst; an honest peer's commitment in the same poll is kept."""
    t1 = trainers[1]
    honest = commit_of(t1, reveal_of(t1))
    queue = [PubsubMessage("flooder", forged_commit(trainers[0].address).encode(), b"", ("t",))
             for _ in range(5000)]
    queue.insert(4000, PubsubMessage("honest", honest.encode(), b"", ("t",)))
    syncer._pubsub = SimpleNamespace(get=lambda timeout_s=0: queue.pop(0) if queue else None)
    started = time.monotonic()
    while queue:  # one poll each, within its budget
        syncer._drain_pubsub(NOW)
    let_in = PEER_BURST + PEER_RATE_PER_S * (time.monotonic() - started)  # the burst, and the refill meanwhile
    assert syncer._verifier.drain(10) == 0
    assert syncer._peer_limits.refused >= 5000 - let_in
    assert syncer._verifier.failed <= let_in
    assert honest.word() in syncer._commitments[(0, 0, t1.address.lower())]


def test_a_broken_subscription_is_made_again_not_a_halt(syncer, trainers):
    """The IPFS node restarted under the syncer (found by the chaos test once the syncer took its
    submissions from pubsub): the dead stream raised on every later poll until the daemon halted.
    Now the poll drops it and the next one subscribes again, and a trainer's commitment published
    again (trainers publish every poll until the round is committed) is taken in."""
    from tenzro_operator.errors import IpfsUnavailable

    def broken(timeout_s=0):
        raise IpfsUnavailable("http://127.0.0.1:1", "pubsub/sub ended")

    closed, subscribed = [], []
    syncer._pubsub = SimpleNamespace(get=broken, close=lambda: closed.append(1))
    syncer._drain_pubsub(NOW)  # no exception: the poll goes on
    assert closed == [1] and syncer._pubsub is None
    t1 = trainers[1]
    honest = commit_of(t1, reveal_of(t1))
    queue = [PubsubMessage("peer", honest.encode(), b"", ("t",))]
    fresh = SimpleNamespace(get=lambda timeout_s=0: queue.pop(0) if queue else None, close=lambda: None)
    syncer.ipfs = SimpleNamespace(pubsub_subscribe=lambda topic, **kw: subscribed.append(topic) or fresh)
    syncer.root_listen()
    syncer._drain_pubsub(NOW)
    assert len(subscribed) == 1 and syncer._pubsub is fresh
    assert syncer._verifier.drain(10) == 0
    assert honest.word() in syncer._commitments[(0, 0, t1.address.lower())]


# ----------------------------------------------------------------------------- the trainer's side


class AnnouncementReader(SubmissionDelivery):
    """A trainer reading the run's syncer topic (`SubmissionDelivery.syncer_rpc_url`)."""

    chain_now = Daemon.chain_now

    def __init__(self, syncer_address: str, messages: list) -> None:
        self.task_id, self.chain = TASK, CountingChain()
        self.chain.get_run = lambda task_id: SimpleNamespace(syncer=syncer_address)
        sub = SimpleNamespace(topic=None, get=lambda timeout_s=0: messages.pop(0) if messages else None,
                              close=lambda: None)
        self.ipfs = SimpleNamespace(pubsub_subscribe=lambda topic, **kw: (setattr(sub, "topic", topic), sub)[1])
        self._ann_sub, self._ann = None, None


def test_forged_announcements_cost_a_trainer_a_bounded_number_of_recoveries(monkeypatch):
    """cb6ae44 recovered every announcement naming the run's syncer (1,000 forged ones: 9.5 s per
    poll of the trainer). Now per poll: at most `MAX_ANNOUNCEMENTS_PER_POLL` read, a few per peer,
    cheap fields first, at most `ANNOUNCEMENT_CHECKS_PER_POLL` recoveries, failures remembered;
    the syncer's own announcement, from its own peer, still wins."""
    import tenzro_operator.signed_notice as notice

    made, real = [], notice.recover_signer
    monkeypatch.setattr(notice, "recover_signer", lambda d, s: made.append(1) or real(d, s))
    syncer = Account.create()
    forged = [Announcement(task="0x" + TASK.hex(), syncer=syncer.address.lower(), url="http://127.0.0.1:9/",
                           issued=NOW + 1 + i % 60, signature="0x" + secrets.token_hex(65)) for i in range(1000)]
    good = Announcement.signed(syncer, TASK, "http://10.0.0.1:8/", NOW)
    messages = [PubsubMessage(f"peer{i % 200}", a.encode(), b"", ("t",)) for i, a in enumerate(forged)]
    for at in range(100, 1000, 200):  # the syncer announces again and again (`ANNOUNCE_EVERY_S`)
        messages.insert(at, PubsubMessage("syncer-node", good.encode(), b"", ("t",)))
    t = AnnouncementReader(syncer.address, messages)
    polls = 0
    while messages:
        t.syncer_rpc_url()
        polls += 1
    assert len(made) <= polls * ANNOUNCEMENT_CHECKS_PER_POLL < len(forged)
    assert t._ann == good

"""Root-flow submissions over the syncer's JSON-RPC endpoint, beside pubsub (contracts/PROTOCOL.md §5;
the messages in `tenzro_operator.root_flow`; the method in ``operator/RPC.md``).

Pubsub is best effort: a message published before the syncer's node has joined the mesh is lost.
So a syncer may also serve ``tenzro_training_deliver`` (JSON-RPC 2.0 over HTTP, the gateway's
envelope and server, `tenzro_operator.gateway.jsonrpc` / `.server`) and trainers post every
message they publish there too. Both paths end in the same intake (`SubmissionIntake.root_intake`:
the round, the fragment, the enrolled trainer, the commit phase, the bound on commitments, the
signatures); the endpoint only limits each client (`CLIENT_RATE_PER_S` calls a second by IP,
refused ``rate_limited`` beyond), decodes, routes by task and answers with the intake's verdict,
waiting at most `CHECK_WAIT_S` for a signature check (``{"accepted": false, "pending": true}``
after: the check goes on; send the message again on the next poll).

- Syncer side: `SubmissionEndpoint` (one HTTP server per host and port in a process, shared by the
  runs it collects for, each registering its intake under its task id). The syncer announces the
  endpoint's URL on the task's syncer topic (`pubsub.syncer_topic`) as an `Announcement` signed
  with its own key, every `ANNOUNCE_EVERY_S` seconds while it collects.
- Trainer side: `post_messages` (one batch request, a total deadline, a cap on the answer, no
  redirects), run by a `DeliveryWorker` off the trainer's main loop. A trainer takes its configured
  ``syncer_rpc`` URL as written, else the URL of the latest announcement signed by the run's
  syncer once it passes the trainer's URL policy (`tenzro_operator.roles.endpoint_policy`).

Wire: ``{"message": <the encoded message bytes as multibase base64url ("u...", pubsub's
encoding, `pubsub.multibase_encode`) or base64 ("m..."), or 0x-hex>}`` -> ``{"accepted": true}``;
``{"accepted": false, "pending": true}`` while its signature check is still queued; a refusal is an
error object whose ``data.reason`` names it (`REASONS`)::

    ep = SubmissionEndpoint.acquire("127.0.0.1", 0, 1 << 18); ep.register(task_id, intake)
    post_messages(ep.url, [reveal.encode()])   # -> [None] (accepted) or [error object]
    ep.release()
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, ClassVar, Literal, Sequence

import httpx
from pydantic import Field

from tenzro_operator.errors import IpfsPubsubError, ServiceUnavailable, TenzroError
from tenzro_operator.gateway.jsonrpc import BAD_SIGNATURE, INVALID_PARAMS, UNAVAILABLE, Dispatcher, RpcError
from tenzro_operator.gateway.server import GatewayServer
from tenzro_operator.ipfs.pubsub import multibase_decode, multibase_encode
from tenzro_operator.roles.endpoint_policy import EndpointRefused, PinnedTransport, resolve_endpoint
from tenzro_operator.roles.intake_guard import TokenBuckets
from tenzro_operator.root_flow import (
    MAX_MESSAGE_BYTES,
    Address,
    Hex32,
    RootFlowError,
    Signature,
    parse_message,
)
from tenzro_operator.signed_notice import SignedNotice

__all__ = ["ANNOUNCE_EVERY_S", "DEADLINE_S", "DELIVER", "MAX_BATCH", "MAX_RESPONSE_BYTES", "NOT_ACCEPTED", "REASONS",
           "Announcement", "DeliveryError", "DeliveryWorker", "EndpointRefused", "SubmissionEndpoint",
           "SubmissionRefused", "decode_message", "encode_message", "post_messages"]

log = logging.getLogger("tenzro.delivery")

DELIVER = "tenzro_training_deliver"
MAX_BATCH = 100  # calls in one batch request
ANNOUNCE_EVERY_S = 2.0  # seconds between two announcements of the endpoint on the syncer topic
NOT_ACCEPTED = -32010  # a well-formed message the intake refuses (data.reason says why)
RATE_LIMITED = -32011  # a client over its rate (data.reason "rate_limited"): nothing of the request was read
CLIENT_RATE_PER_S, CLIENT_BURST = 200.0, 400.0  # deliver calls per second (and burst) from one client IP
CHECK_WAIT_S = 2.0  # seconds a call waits for its message's signature check before answering "pending"
# a trainer's reading of the syncer topic (`SubmissionDelivery.syncer_rpc_url`), open to anyone's flood:
MAX_ANNOUNCEMENTS_PER_POLL = 256  # messages read per poll (the subscription holds as many; the node drops beyond)
ANNOUNCEMENT_CHECKS_PER_POLL = 64  # signature recoveries per poll at most (newest first)
ANNOUNCER_RATE_PER_S, ANNOUNCER_BURST = 1.0, 8.0  # messages per second (and burst) read from one peer
ANNOUNCEMENT_FUTURE_S = 120  # seconds an announcement's issued time may be ahead of the chain's
# data.reason of a refusal -> its JSON-RPC error code
REASONS = {
    "malformed": INVALID_PARAMS,  # not multibase / hex, not JSON, an unknown type, a bad field
    "too_large": INVALID_PARAMS,  # over root_flow.MAX_MESSAGE_BYTES once decoded
    "wrong_task": NOT_ACCEPTED,  # a task this syncer collects no submissions of (now)
    "no_open_round": NOT_ACCEPTED,  # the syncer has not opened a round for submissions yet
    "wrong_round": NOT_ACCEPTED,  # not the round open for submissions
    "bad_fragment": NOT_ACCEPTED,  # a fragment index the run does not have
    "not_enrolled": NOT_ACCEPTED,  # the named trainer is not enrolled in the run
    "commit_phase_closed": NOT_ACCEPTED,  # a commitment after the commit phase (chain time)
    "too_many_commitments": NOT_ACCEPTED,  # root_flow.MAX_COMMITMENTS signed ones for this trainer and fragment
    "no_commitment": NOT_ACCEPTED,  # a reveal that opens no signed commitment kept in the commit phase
    "duplicate": NOT_ACCEPTED,  # a reveal of a submission whose signed reveal is kept already (another signature)
    "bad_signature": BAD_SIGNATURE,  # a commitment or reveal that does not recover to the trainer it names
    "rate_limited": RATE_LIMITED,  # the client sent more than CLIENT_RATE_PER_S calls a second
}
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


class SubmissionRefused(RootFlowError):
    """A root-flow message the syncer does not keep: ``reason`` (a key of `REASONS`), a one-line
    message, and JSON-ready ``data`` (the numbers behind it)."""

    def __init__(self, reason: str, detail: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail, self.data = reason, detail, dict(data or {})

    def rpc_error(self) -> RpcError:
        code = REASONS.get(self.reason, NOT_ACCEPTED)
        head = "invalid params: message" if code == INVALID_PARAMS else "not accepted"
        extra = {"param": "message"} if code == INVALID_PARAMS else {}
        return RpcError(code, f"{head}: {self.detail}", {"reason": self.reason, **extra, **self.data})


class DeliveryError(TenzroError):
    """The syncer's endpoint did not answer a batch (unreachable, HTTP error, not JSON-RPC)."""


# ----------------------------------------------------------------------------- encoding


def encode_message(data: bytes) -> str:
    """The ``message`` param of an encoded message (multibase base64url, as pubsub carries it)."""
    return multibase_encode(data)


def decode_message(text: Any) -> bytes:
    """The bytes of a ``message`` param: multibase base64url (``u``) or base64 (``m``), or ``0x``-hex.

    Raises:
        SubmissionRefused: not a string in one of those encodings (``malformed``), or more than
            `MAX_MESSAGE_BYTES` bytes (``too_large``, checked before decoding).
    """
    if not isinstance(text, str) or not text:
        raise SubmissionRefused("malformed", f"expected a multibase or 0x-hex string, got {type(text).__name__}")
    if len(text) > 2 * MAX_MESSAGE_BYTES + 2:  # longer than any encoding of MAX_MESSAGE_BYTES bytes
        raise SubmissionRefused("too_large", f"a message string of {len(text)} characters is over the limit of "
                                             f"{MAX_MESSAGE_BYTES} bytes", {"limit_bytes": MAX_MESSAGE_BYTES})
    if text[:2] in ("0x", "0X"):
        try:
            data = bytes.fromhex(text[2:])
        except ValueError:
            raise SubmissionRefused("malformed", "not valid 0x-hex") from None
    else:
        try:
            data = multibase_decode(text)
        except IpfsPubsubError as exc:
            raise SubmissionRefused("malformed", str(exc)) from None
    if len(data) > MAX_MESSAGE_BYTES:
        raise SubmissionRefused("too_large", f"a message of {len(data)} bytes is over the limit of "
                                             f"{MAX_MESSAGE_BYTES}", {"limit_bytes": MAX_MESSAGE_BYTES})
    return data


# ----------------------------------------------------------------------------- the announcement


class Announcement(SignedNotice):
    """The syncer's endpoint of a task, published on the task's syncer topic and signed by the
    syncer (`SignedNotice`: EIP-191 ``personal_sign`` of `body`): a trainer uses it only when it
    recovers to the run's syncer, so nobody else can point trainers at a URL of their choosing."""

    what: ClassVar[str] = "an announcement"

    type: Literal["syncer_rpc"] = "syncer_rpc"
    task: Hex32
    syncer: Address
    url: str = Field(min_length=8, max_length=512, pattern=r"^https?://\S+$")
    issued: int = Field(ge=0, lt=2**63)  # unix seconds: the latest one of a syncer wins
    signature: Signature

    @classmethod
    def signed(cls, account, task_id: bytes, url: str, issued: int) -> "Announcement":
        return cls.sign_fields(account, task="0x" + task_id.hex(), syncer=account.address.lower(), url=url,
                               issued=issued)


def announced_url(host: str, bound_url: str, configured: str | None) -> str | None:
    """The URL to announce: the configured one, else the bound one (None for a wildcard host,
    which names no address a trainer could reach)."""
    if configured:
        return configured
    return None if host in _WILDCARD_HOSTS else bound_url


# ----------------------------------------------------------------------------- the endpoint

_shared: dict[tuple[str, int], "SubmissionEndpoint"] = {}
_shared_lock = threading.Lock()


def _map_error(exc: BaseException) -> RpcError | None:
    if isinstance(exc, SubmissionRefused):
        return exc.rpc_error()
    if isinstance(exc, ServiceUnavailable):
        return RpcError(UNAVAILABLE, "the syncer's chain or IPFS node is not answering: retry later")
    return None  # logged with its traceback by the dispatcher, answered -32603 without detail


class SubmissionEndpoint:
    """``tenzro_training_deliver`` over HTTP for the runs a syncer process collects.

    Made by `acquire` (one server per (host, port) in a process; port 0: a server of its own),
    given back by `release` (the last user stops the server). Each run `register`s its intake, a
    callable that keeps a parsed message or raises `SubmissionRefused`.
    """

    def __init__(self, host: str, port: int, max_request_bytes: int) -> None:
        self.host, self._key = host, (host, port)
        self._intakes: dict[bytes, Callable[[Any], None]] = {}
        self._lock = threading.Lock()
        self._users = 0
        self.dispatcher = Dispatcher({DELIVER: self.deliver}, MAX_BATCH, _map_error)
        self.clients = TokenBuckets(CLIENT_RATE_PER_S, CLIENT_BURST)
        self.server = GatewayServer(self.dispatcher, host, port, max_request_bytes, {"methods": [DELIVER]},
                                    admit=self.admit, admit_unread=self.admit_unread)

    def admit(self, client: str, doc: Any) -> RpcError | None:
        """The per-client limit, before any call of a request runs: each call takes a token of
        ``client``'s bucket (its IP); a request that finds too few is refused whole."""
        calls = len(doc) if isinstance(doc, list) else 1
        return None if self.clients.take(client, calls) else self._rate_limited(client)

    def admit_unread(self, client: str) -> RpcError | None:
        """Before a request is read: a client whose bucket is empty is refused unread (issue #24's
        flood: refused batches were still read and parsed on the loop the trainers' posts share)."""
        return self._rate_limited(client) if self.clients.exhausted(client) else None

    @staticmethod
    def _rate_limited(client: str) -> RpcError:
        return RpcError(RATE_LIMITED, f"rate limited: more than {CLIENT_RATE_PER_S:g} calls a second from {client}; "
                                      "retry later", {"reason": "rate_limited", "rate_per_s": CLIENT_RATE_PER_S})

    @classmethod
    def acquire(cls, host: str, port: int, max_request_bytes: int) -> "SubmissionEndpoint":
        """The process's endpoint on (host, port), started if need be.

        Raises:
            OSError: the address cannot be bound (port taken, bad host).
        """
        with _shared_lock:
            ep = _shared.get((host, port)) if port else None
            if ep is None:
                ep = cls(host, port, max_request_bytes)
                ep.server.start()
                if port:
                    _shared[(host, port)] = ep
            ep._users += 1
            return ep

    def release(self) -> None:
        with _shared_lock:
            self._users -= 1
            if self._users > 0:
                return
            if _shared.get(self._key) is self:
                del _shared[self._key]
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

    def register(self, task_id: bytes, intake: Callable[[Any], None]) -> None:
        with self._lock:
            self._intakes[bytes(task_id)] = intake

    def unregister(self, task_id: bytes, intake: Callable[[Any], None]) -> None:
        """Forget ``task_id``'s intake if it is still ``intake`` (a later run's stays)."""
        with self._lock:
            if self._intakes.get(bytes(task_id)) == intake:
                del self._intakes[bytes(task_id)]

    def deliver(self, message: Any) -> dict[str, bool]:
        """The method: decode, parse (`parse_message`), route by task, hand to the task's intake."""
        data = decode_message(message)
        try:
            m = parse_message(data)
        except RootFlowError as exc:
            raise SubmissionRefused("malformed", str(exc)) from None
        with self._lock:
            intake = self._intakes.get(bytes.fromhex(m.task[2:]))
            served = sorted("0x" + t.hex() for t in self._intakes)
        if intake is None:
            raise SubmissionRefused("wrong_task", f"this syncer collects no submissions of task {m.task}",
                                    {"task": m.task, "tasks": served})
        job = intake(m)
        if job is None:
            return {"accepted": True}  # kept already
        ok = job.wait(CHECK_WAIT_S)
        if ok is None:
            return {"accepted": False, "pending": True}
        if not ok:
            raise SubmissionRefused("bad_signature", f"the signature recovers to {job.signer or 'no address'}, not "
                                                     f"to trainer {job.expected}", {"recovered": job.signer or None})
        return {"accepted": True}


# ----------------------------------------------------------------------------- the trainer's client


DEADLINE_S = 3.0  # default total deadline of one post_messages call, seconds (connect, send, answer)
MAX_RESPONSE_BYTES = 1 << 20  # default cap on one batch answer, bytes (100 refusals with their data: ~100 KB)


def post_messages(url: str, messages: Sequence[bytes], timeout_s: float = DEADLINE_S, *,
                  max_response_bytes: int = MAX_RESPONSE_BYTES, allow_private: bool = True, trusted: bool = True,
                  own: Sequence[str] = ()) -> list[dict | None]:
    """Post encoded messages to a syncer's endpoint, `MAX_BATCH` per batch request. Returns one
    entry per message: None (accepted) or its JSON-RPC error object.

    The URL is checked and resolved once (`endpoint_policy.resolve_endpoint` with ``allow_private``,
    ``trusted`` and ``own``; the defaults take it as the caller wrote it) and the connection goes to
    that address only. ``timeout_s`` bounds the whole call (every connect, write and read, all
    batches; seconds); an answer over ``max_response_bytes`` bytes (or compressed, or a redirect)
    is refused unread.

    Raises:
        EndpointRefused: the URL breaks the policy (before anything is sent).
        DeliveryError: the endpoint did not answer in time, or not with JSON-RPC within the cap.
    """
    ep = resolve_endpoint(url, allow_private=allow_private, trusted=trusted, own=own)
    deadline = time.monotonic() + timeout_s
    out: list[dict | None] = []
    with httpx.Client(transport=PinnedTransport(ep, deadline), timeout=timeout_s, follow_redirects=False,
                      trust_env=False, headers={"Accept-Encoding": "identity"}) as http:
        for start in range(0, len(messages), MAX_BATCH):
            chunk = messages[start:start + MAX_BATCH]
            body = [{"jsonrpc": "2.0", "id": i, "method": DELIVER, "params": {"message": encode_message(m)}}
                    for i, m in enumerate(chunk)]
            try:
                raw = _post_capped(http, url, body, max_response_bytes)
            except httpx.HTTPError as exc:
                raise DeliveryError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None
            try:
                answers = {a["id"]: a for a in json.loads(raw)
                           if isinstance(a, dict) and isinstance(a.get("id"), int)}
            except (ValueError, TypeError, RecursionError) as exc:
                raise DeliveryError(f"the answer is not a JSON-RPC batch response ({type(exc).__name__})") from None
            for i in range(len(chunk)):
                a = answers.get(i)
                if a is None:
                    out.append({"code": None, "message": "no answer to this call"})
                else:
                    out.append(None if "result" in a else a.get("error") or {"code": None, "message": "no result"})
    return out


def _post_capped(http: httpx.Client, url: str, body: list, cap: int) -> bytes:
    """POST ``body`` and read the answer's bytes, at most ``cap`` of them.

    Raises:
        DeliveryError: not HTTP 200 (a redirect included), compressed, or over ``cap`` bytes.
        httpx.HTTPError: the transport failed or the deadline passed.
    """
    with http.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            raise DeliveryError(f"HTTP {resp.status_code}")
        if resp.headers.get("content-encoding", "identity").lower() not in ("", "identity"):
            raise DeliveryError(f"a {resp.headers['content-encoding']}-encoded answer (identity was asked for)")
        length = resp.headers.get("content-length", "")
        if length.isdigit() and int(length) > cap:
            raise DeliveryError(f"an answer of {int(length)} bytes is over the cap of {cap}")
        data = bytearray()
        for piece in resp.iter_raw():
            data += piece
            if len(data) > cap:
                raise DeliveryError(f"the answer is over the cap of {cap} bytes: not read further")
        return bytes(data)


class DeliveryWorker:
    """One background thread per trainer that posts its batches (`post_messages`), so the loop that
    trains, forces and claims only queues them (`submit`). The queue keeps the latest batch of each
    round (a newer one replaces it) and at most `MAX_ROUNDS` rounds (the oldest dropped); the thread
    ends after `IDLE_S` seconds without work and starts again on the next `submit`.

    ``send(url, messages)`` posts one batch and returns its answers or raises; ``report(round, url,
    answers_or_error)`` is called on the worker with each outcome (a `TenzroError` on failure).
    """

    MAX_ROUNDS = 4
    IDLE_S = 30.0

    def __init__(self, send: Callable[[str, Sequence[bytes]], list], report: Callable[[int, str, Any], None]) -> None:
        self._send, self._report = send, report
        self._pending: dict[int, tuple[str, list[bytes]]] = {}
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = False
        self.posted = 0  # batches posted (answered or failed), for tests and metrics

    def submit(self, r: int, url: str, messages: Sequence[bytes]) -> None:
        """Queue round r's batch for ``url`` (replacing round r's batch not yet sent). Never blocks."""
        with self._cv:
            self._pending[r] = (url, list(messages))
            while len(self._pending) > self.MAX_ROUNDS:
                del self._pending[min(self._pending)]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="tenzro-delivery", daemon=True)
                self._thread.start()
            self._cv.notify()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or being posted (tests); True unless ``timeout_s`` passed."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._pending and not self._busy, timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cv:
                if not self._pending and not self._cv.wait_for(lambda: self._pending, self.IDLE_S):
                    if self._thread is threading.current_thread():
                        self._thread = None
                    return
                r = min(self._pending)
                url, messages = self._pending.pop(r)
                self._busy = True
            try:
                try:
                    outcome: Any = self._send(url, messages)
                except TenzroError as exc:
                    outcome = exc
                self._report(r, url, outcome)
            except Exception:  # noqa: BLE001 - a bug in a report must not end delivery for good
                log.exception("round %d: delivering to %s failed unexpectedly", r, url)
            finally:
                with self._cv:
                    self._busy = False
                    self.posted += 1
                    self._cv.notify_all()

"""Root-flow submissions over the syncer's JSON-RPC endpoint, beside pubsub (contracts/PROTOCOL.md §5;
the messages in `tenzro_operator.root_flow`; the method in ``operator/RPC.md``).

Pubsub is best effort: a message published before the syncer's node has joined the mesh is lost.
So a syncer may also serve ``tenzro_training_deliver`` (JSON-RPC 2.0 over HTTP, the gateway's
envelope and server, `tenzro_operator.gateway.jsonrpc` / `.server`) and trainers post every
message they publish there too. Both paths end in the same intake (`RootSyncerMixin.root_intake`:
the round, the fragment, the enrolled trainer, the commit phase, the bound on commitments, the
reveal's signature); the endpoint only decodes, routes by task and answers with the intake's
verdict.

- Syncer side: `SubmissionEndpoint` (one HTTP server per host and port in a process, shared by the
  runs it collects for, each registering its intake under its task id). The syncer announces the
  endpoint's URL on the task's syncer topic (`pubsub.syncer_topic`) as an `Announcement` signed
  with its own key, every `ANNOUNCE_EVERY_S` seconds while it collects.
- Trainer side: `post_messages` (one batch request). A trainer takes its configured
  ``syncer_rpc`` URL, else the URL of the latest announcement signed by the run's syncer.

Wire: ``{"message": <the encoded message bytes as multibase base64url ("u...", pubsub's
encoding, `pubsub.multibase_encode`) or base64 ("m..."), or 0x-hex>}`` -> ``{"accepted": true}``;
a refusal is an error object whose ``data.reason`` names it (`REASONS`)::

    ep = SubmissionEndpoint.acquire("127.0.0.1", 0, 1 << 18); ep.register(task_id, intake)
    post_messages(ep.url, [reveal.encode()])   # -> [None] (accepted) or [error object]
    ep.release()
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable, Literal, Sequence

import httpx
from eth_account import Account
from eth_account.messages import encode_defunct
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tenzro_operator.errors import IpfsPubsubError, ServiceUnavailable, TenzroError
from tenzro_operator.gateway.jsonrpc import BAD_SIGNATURE, INVALID_PARAMS, UNAVAILABLE, Dispatcher, RpcError
from tenzro_operator.gateway.server import GatewayServer
from tenzro_operator.pubsub import multibase_decode, multibase_encode
from tenzro_operator.root_flow import MAX_MESSAGE_BYTES, Address, Hex32, RootFlowError, Signature, parse_message

__all__ = ["ANNOUNCE_EVERY_S", "DELIVER", "MAX_BATCH", "NOT_ACCEPTED", "REASONS", "Announcement", "DeliveryError",
           "SubmissionEndpoint", "SubmissionRefused", "decode_message", "encode_message", "post_messages"]

log = logging.getLogger("tenzro.delivery")

DELIVER = "tenzro_training_deliver"
MAX_BATCH = 100  # calls in one batch request
ANNOUNCE_EVERY_S = 2.0  # seconds between two announcements of the endpoint on the syncer topic
NOT_ACCEPTED = -32010  # a well-formed message the intake refuses (data.reason says why)
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
    "too_many_commitments": NOT_ACCEPTED,  # root_flow.MAX_COMMITMENTS for this trainer and fragment already
    "bad_signature": BAD_SIGNATURE,  # a reveal that does not recover to the trainer it names
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


class Announcement(BaseModel):
    """The syncer's endpoint of a task, published on the task's syncer topic and signed by the
    syncer (EIP-191 ``personal_sign`` of `body`): a trainer uses it only when it recovers to the
    run's syncer, so nobody else can point trainers at a URL of their choosing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["syncer_rpc"] = "syncer_rpc"
    task: Hex32
    syncer: Address
    url: str = Field(min_length=8, max_length=512, pattern=r"^https?://\S+$")
    issued: int = Field(ge=0, lt=2**63)  # unix seconds: the latest one of a syncer wins
    signature: Signature

    def body(self) -> bytes:
        """What the syncer signs: the canonical JSON of every field but the signature."""
        return json.dumps(self.model_dump(mode="json", exclude={"signature"}), sort_keys=True,
                          separators=(",", ":")).encode()

    def encode(self) -> bytes:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def signed(cls, account, task_id: bytes, url: str, issued: int) -> "Announcement":
        unsigned = cls.model_construct(task="0x" + task_id.hex(), syncer=account.address.lower(), url=url,
                                       issued=issued, signature="0x" + "00" * 65)
        sig = account.sign_message(encode_defunct(primitive=unsigned.body())).signature
        return cls(task=unsigned.task, syncer=unsigned.syncer, url=url, issued=issued, signature="0x" + bytes(sig).hex())

    @classmethod
    def parse(cls, data: bytes) -> "Announcement":
        """Raises RootFlowError: too large, not JSON, or a bad field."""
        if len(data) > MAX_MESSAGE_BYTES:
            raise RootFlowError(f"announcement of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise RootFlowError(f"not an announcement: {exc.errors()[0]['msg']}") from None

    def signer(self) -> str:
        """The address that signed it (lower-case), or "" when the signature recovers to none."""
        try:
            return Account.recover_message(encode_defunct(primitive=self.body()),
                                           signature=bytes.fromhex(self.signature[2:])).lower()
        except Exception:  # noqa: BLE001 - eth-keys raises several types for a malformed signature
            return ""


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
        self.server = GatewayServer(self.dispatcher, host, port, max_request_bytes, {"methods": [DELIVER]})

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
        intake(m)
        return {"accepted": True}


# ----------------------------------------------------------------------------- the trainer's client


def post_messages(url: str, messages: Sequence[bytes], timeout_s: float = 3.0) -> list[dict | None]:
    """Post encoded messages to a syncer's endpoint, `MAX_BATCH` per batch request. Returns one
    entry per message: None (accepted) or its JSON-RPC error object.

    Raises:
        DeliveryError: the endpoint did not answer, or not with JSON-RPC.
    """
    out: list[dict | None] = []
    with httpx.Client(timeout=timeout_s) as http:
        for start in range(0, len(messages), MAX_BATCH):
            chunk = messages[start:start + MAX_BATCH]
            body = [{"jsonrpc": "2.0", "id": i, "method": DELIVER, "params": {"message": encode_message(m)}}
                    for i, m in enumerate(chunk)]
            try:
                resp = http.post(url, json=body)
            except httpx.HTTPError as exc:
                raise DeliveryError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None
            if resp.status_code != 200:
                raise DeliveryError(f"HTTP {resp.status_code}")
            try:
                answers = {a["id"]: a for a in resp.json() if isinstance(a, dict) and isinstance(a.get("id"), int)}
            except (ValueError, TypeError) as exc:
                raise DeliveryError(f"the answer is not a JSON-RPC batch response ({exc})") from None
            for i in range(len(chunk)):
                a = answers.get(i)
                if a is None:
                    out.append({"code": None, "message": "no answer to this call"})
                else:
                    out.append(None if "result" in a else a.get("error") or {"code": None, "message": "no result"})
    return out

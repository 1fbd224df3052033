"""Pubsub over the IPFS node's Kubo RPC API: tenzro-train's topics, the wire encodings, messages and
subscriptions (the `IpfsClient` methods ``pubsub_*`` and ``swarm_connect`` use them).

Pubsub (Kubo RPC ``/api/v0/pubsub/{pub,sub,ls,peers}``, gossipsub; see
https://docs.ipfs.tech/reference/kubo/rpc/#api-v0-pubsub-sub and Kubo's
core/commands/pubsub.go): topic names in ``arg`` and in answers, and message
``data`` and ``seqno``, travel as multibase base64url (``u`` + unpadded
RFC 4648 §5); ``sub`` streams one JSON object per line,
``{"from", "data", "seqno", "topicIDs"}``. A Kubo daemon needs
``--enable-pubsub-experiment``; the local Helia node always serves pubsub.

Topics of tenzro-train (names of the Tenzro Train docs: ``tenzro/training/1.0.0``
for trainer traffic, ``tenzro/training/syncer`` for the syncer's), one of each per
task, the task id being the registry's bytes32 as 64 lowercase hex digits
without ``0x`` (``submission_topic`` / ``syncer_topic`` / ``nodes_topic``)::

    tenzro/training/1.0.0/<task id hex>          signed trainer submissions
    tenzro/training/syncer/1.0.0/<task id hex>   syncer announcements
    tenzro/training/nodes/1.0.0/<task id hex>    the parties' IPFS node addresses (`peer_book`)

One topic per task keeps a node from receiving (and gossiping) traffic of runs
it does not follow. Pubsub delivery is best effort: a message published before
the receiving node has joined the mesh is lost, so the chain (and the syncer's
JSON-RPC endpoint) remain the paths of record::

    with IpfsClient(url) as ipfs, ipfs.pubsub_subscribe(submission_topic(task_id)) as sub:
        ipfs.pubsub_publish(submission_topic(task_id), payload)
        msg = sub.get(timeout_s=5)          # PubsubMessage or None
"""

from __future__ import annotations

import base64
import json
import queue
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Iterator

import httpx

from tenzro_operator.errors import IpfsBadTopic, IpfsError, IpfsMessageTooLarge, IpfsPubsubError, IpfsUnavailable

__all__ = ["MAX_MESSAGE_BYTES", "MAX_TOPIC_BYTES", "NODES_TOPIC", "SUBMISSION_TOPIC", "SYNCER_TOPIC", "PubsubMessage",
           "PubsubSubscription", "multibase_decode", "multibase_encode", "nodes_topic", "submission_topic",
           "syncer_topic"]

SUBMISSION_TOPIC = "tenzro/training/1.0.0"  # + "/<task id hex>": signed trainer submissions
SYNCER_TOPIC = "tenzro/training/syncer/1.0.0"  # + "/<task id hex>": syncer announcements
NODES_TOPIC = "tenzro/training/nodes/1.0.0"  # + "/<task id hex>": the parties' IPFS node announcements
MAX_MESSAGE_BYTES = 1 << 20  # bytes of data per pubsub message (go-libp2p-pubsub's default cap, and the node's)
MAX_TOPIC_BYTES = 1024  # bytes of UTF-8 per topic name (the local node's cap)


def multibase_encode(data: bytes) -> str:
    """Multibase base64url (``u`` + RFC 4648 §5 without padding), Kubo's encoding of pubsub topics,
    data and seqno on the RPC API."""
    return "u" + base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


_ALNUM = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def multibase_decode(text: str) -> bytes:
    """Bytes of a multibase string in base64url (``u``) or base64 (``m``), padded or not.

    Raises IpfsPubsubError for another base or characters outside the alphabet.
    """
    if not isinstance(text, str) or not text:
        raise IpfsPubsubError(f"expected a multibase string, got {text!r}")
    prefix, body = text[0], text[1:].rstrip("=")
    alphabet = {"u": "-_", "m": "+/"}.get(prefix)
    if alphabet is None:
        raise IpfsPubsubError(f"multibase prefix {prefix!r} is not supported (base64url 'u' or base64 'm')")
    # the alphabet check in C (str.isascii, bytes.translate): a character loop in Python cost ~80 ns
    # a character, 0.34 ms for a 4 KiB message, on every message an outsider floods in (issue #24)
    if len(body) % 4 == 1 or not body.isascii() or body.encode("ascii").translate(None, _ALNUM + alphabet.encode()):
        raise IpfsPubsubError(f"invalid multibase {'base64url' if prefix == 'u' else 'base64'} string {text[:80]!r}")
    return base64.b64decode(body + "=" * (-len(body) % 4), altchars=alphabet.encode())


def _check_topic(topic: str) -> bytes:
    """UTF-8 bytes of ``topic``; raises IpfsBadTopic if it is not 1..MAX_TOPIC_BYTES bytes of text."""
    if not isinstance(topic, str):
        raise IpfsBadTopic(f"a topic is a string, got {type(topic).__name__}")
    raw = topic.encode("utf-8")
    if not 0 < len(raw) <= MAX_TOPIC_BYTES:
        raise IpfsBadTopic(f"a topic has 1 to {MAX_TOPIC_BYTES} bytes of UTF-8, got {len(raw)}")
    return raw


def _task_hex(task_id: bytes | str) -> str:
    if isinstance(task_id, (bytes, bytearray)):
        raw = bytes(task_id)
    elif isinstance(task_id, str):
        text = task_id[2:] if task_id[:2].lower() == "0x" else task_id
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise IpfsBadTopic(f"task id {task_id!r} is not hex") from None
    else:
        raise IpfsBadTopic(f"a task id is bytes32 or its hex, got {type(task_id).__name__}")
    if len(raw) != 32:
        raise IpfsBadTopic(f"a task id is 32 bytes, got {len(raw)}")
    return raw.hex()


def submission_topic(task_id: bytes | str) -> str:
    """``tenzro/training/1.0.0/<task id hex>``: the topic of a task's signed trainer submissions.

    ``task_id`` is the registry's bytes32 (32 bytes, or 64 hex digits with or without 0x; any
    case); the topic carries it as 64 lowercase hex digits. Raises IpfsBadTopic (a ValueError).
    """
    return f"{SUBMISSION_TOPIC}/{_task_hex(task_id)}"


def syncer_topic(task_id: bytes | str) -> str:
    """``tenzro/training/syncer/1.0.0/<task id hex>``: the topic of a task's syncer announcements
    (same task id rules as `submission_topic`)."""
    return f"{SYNCER_TOPIC}/{_task_hex(task_id)}"


def nodes_topic(task_id: bytes | str) -> str:
    """``tenzro/training/nodes/1.0.0/<task id hex>``: the topic where a task's parties announce
    their IPFS nodes (`tenzro_operator.peer_book`; same task id rules as `submission_topic`)."""
    return f"{NODES_TOPIC}/{_task_hex(task_id)}"


@dataclass(frozen=True)
class PubsubMessage:
    """One message of ``pubsub/sub``, decoded from Kubo's JSON line.

    Attributes:
        from_peer: the publishing peer's ID (Kubo's ``from``), e.g. "12D3KooW...".
        data: the message bytes (Kubo's ``data``, multibase-decoded).
        seqno: the publisher's sequence number (Kubo's ``seqno``: 8 bytes, read big-endian);
            (from_peer, seqno) names one publication.
        topic_ids: the topics it was published to (Kubo's ``topicIDs``, decoded to text).
        received_at: ``time.monotonic()`` seconds when a `PubsubSubscription`'s reader took it off
            the node's stream (0.0 for a message not read from a subscription): a consumer that
            drains late can still judge what arrived in time.
    """

    from_peer: str
    data: bytes
    seqno: int
    topic_ids: tuple[str, ...]
    received_at: float = field(default=0.0, compare=False)

    @classmethod
    def from_kubo(cls, obj: object) -> PubsubMessage:
        """Parse one decoded JSON line; raises IpfsPubsubError when it is not Kubo's message shape."""
        if not isinstance(obj, dict):
            raise IpfsPubsubError(f"a pubsub message is a JSON object, got {type(obj).__name__}")
        try:
            sender = obj["from"]
            if not isinstance(sender, str) or not sender:
                raise IpfsPubsubError(f"pubsub message 'from' is {sender!r}")
            data = multibase_decode(obj["data"]) if "data" in obj else b""  # Kubo omits empty fields
            seqno = int.from_bytes(multibase_decode(obj["seqno"]), "big") if "seqno" in obj else 0
            topics = tuple(multibase_decode(t).decode("utf-8") for t in obj.get("topicIDs") or [])
        except (KeyError, TypeError, UnicodeDecodeError) as exc:
            raise IpfsPubsubError(f"malformed pubsub message {str(obj)[:200]}: {type(exc).__name__}: {exc}") from None
        return cls(sender, data, seqno, topics)


_END = object()  # queued by the reader thread when the stream ends


class PubsubSubscription:
    """A live ``pubsub/sub`` stream, read by a background thread into a bounded queue.

    Made by `IpfsClient.pubsub_subscribe`; when it returns, the node has joined the topic.
    Iterate it (blocks until the next message; ends after `close`), or poll with `get`. Use it
    as a context manager, or call `close`, which ends the HTTP stream (the node then leaves
    the topic unless another subscriber holds it) and stops the thread within about a second.

    Messages with more than ``max_bytes`` bytes of data, and lines that are not Kubo's message
    shape, are skipped and counted in ``dropped`` (a hostile publisher can not end the
    subscription or make this process hold more than about ``max_bytes * 4 / 3`` bytes of one
    line). When the stream breaks (the node stopped), `get` and iteration raise
    IpfsUnavailable once the messages already received are consumed.
    """

    def __init__(self, api_url: str, topic: str, *, max_bytes: int, queue_size: int,
                 connect_timeout_s: float, error_of) -> None:
        self.topic, self.max_bytes, self.api_url = topic, max_bytes, api_url
        self.dropped = 0  # messages skipped: over max_bytes or malformed
        self._line_cap = (max_bytes + 2) // 3 * 4 + 4 * MAX_TOPIC_BYTES + 1024  # bytes of one JSON line
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._closed = threading.Event()
        self._ended: IpfsError | None = None
        self._http = httpx.Client(base_url=api_url + "/api/v0",
                                  timeout=httpx.Timeout(connect_timeout_s, read=None))
        try:
            self._resp = self._http.send(self._http.build_request(
                "POST", "pubsub/sub", params={"arg": multibase_encode(_check_topic(topic))}), stream=True)
        except httpx.TransportError as exc:  # the node did not answer
            self._http.close()
            raise IpfsUnavailable(api_url, f"pubsub/sub: {type(exc).__name__}: {exc}") from None
        except httpx.HTTPError as exc:
            self._http.close()
            raise IpfsPubsubError(f"cannot call IPFS pubsub/sub at {api_url}: {type(exc).__name__}: {exc}") from None
        if self._resp.status_code >= 400:
            body = b""
            try:
                for chunk in self._resp.iter_bytes():
                    body += chunk
                    if len(body) > 65536:
                        break
            except httpx.HTTPError:
                pass
            self._resp.close()
            self._http.close()
            raise error_of("pubsub/sub", self._resp.status_code, body, None)
        self._thread = threading.Thread(target=self._read, daemon=True, name=f"ipfs-pubsub-{topic[:40]}")
        self._thread.start()

    # -- reader thread ----------------------------------------------------------

    def _read(self) -> None:
        buf = bytearray()
        skipping = False  # inside an oversize line: discard up to its newline
        try:
            for chunk in self._resp.iter_bytes():
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    piece = chunk[start:] if nl < 0 else chunk[start:nl]
                    if not skipping:
                        buf += piece
                        if len(buf) > self._line_cap:
                            buf.clear()
                            skipping = True
                            self.dropped += 1
                    if nl < 0:
                        break
                    if not skipping and buf.strip():
                        self._deliver(bytes(buf))
                    buf.clear()
                    skipping = False
                    start = nl + 1
                if self._closed.is_set():
                    return
            reason = "the node ended the stream"
        except Exception as exc:  # noqa: BLE001 - any failure ends the stream and is reported by get()
            if self._closed.is_set():
                return
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self._ended = IpfsUnavailable(self.api_url, f"pubsub subscription to {self.topic!r} ended: {reason}")
        self._put(_END)

    def _deliver(self, line: bytes) -> None:
        try:
            msg = PubsubMessage.from_kubo(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError, IpfsPubsubError):
            self.dropped += 1
            return
        if len(msg.data) > self.max_bytes:
            self.dropped += 1
            return
        self._put(replace(msg, received_at=time.monotonic()))

    def _put(self, item: object) -> None:
        """Queue ``item``; waits while the queue is full (the node then holds or drops messages)."""
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    # -- consumer side ------------------------------------------------------------

    def get(self, timeout_s: float | None = None) -> PubsubMessage | None:
        """The next message; waits at most ``timeout_s`` seconds (None: without limit).

        Returns None when nothing arrived in time or the subscription was closed.
        Raises IpfsUnavailable when the stream broke (node stopped or connection lost).
        """
        if self._closed.is_set():
            return None
        try:
            item = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if item is _END:
            self._queue.put(_END)  # every later call sees the end too
            raise self._ended  # type: ignore[misc]
        return item

    def __iter__(self) -> Iterator[PubsubMessage]:
        while not self._closed.is_set():
            msg = self.get(timeout_s=0.5)
            if msg is not None:
                yield msg

    def close(self) -> None:
        """End the subscription (idempotent): cut the HTTP stream and stop the reader thread."""
        if self._closed.is_set():
            return
        self._closed.set()
        stream = self._resp.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the reader blocked in recv()
            except OSError:
                pass
        self._thread.join(timeout=5)
        self._resp.close()
        self._http.close()

    def __enter__(self) -> PubsubSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

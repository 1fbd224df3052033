"""IPFS client speaking the Kubo RPC API (POST /api/v0/...), for the local Helia node and a real Kubo daemon.

Every CID the client hands out or accepts is checked locally: `add` recomputes
the CID of the uploaded bytes and `cat` verifies the fetched bytes against the
CID asked for, so a node (local or remote) can not substitute content.

Import layout (Kubo's `ipfs add --cid-version 1` defaults, see
https://docs.ipfs.tech/concepts/file-systems/ and the UnixFS spec
https://github.com/ipfs/specs/blob/main/UNIXFS.md): fixed 262144-byte chunks,
raw leaves (CIDv1, codec raw 0x55), a balanced DAG of at most 174 links per
dag-pb node (codec 0x70), multihash sha2-256 (0x12), base32 lower (`b...`).

Usage::

    with IpfsClient("http://127.0.0.1:5001") as ipfs:
        cid = ipfs.add(b"hello IPFS\\n")      # 'bafkrei...'
        assert ipfs.cat(cid) == b"hello IPFS\\n"
        ipfs.unpin(cid)

Pubsub and swarm calls (``pubsub_*``, ``swarm_connect``): see `tenzro_operator.ipfs.pubsub`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass

import httpx

from tenzro_operator.errors import (
    IpfsBadCid,
    IpfsContentError,
    IpfsError,
    IpfsIntegrityError,
    IpfsIsolated,
    IpfsMessageTooLarge,
    IpfsNotFound,
    IpfsPubsubError,
    IpfsTooLarge,
    IpfsUnavailable,
    IpfsUnsupported,
)
from tenzro_operator.ipfs.pubsub import (
    MAX_MESSAGE_BYTES,
    PubsubSubscription,
    _check_topic,
    multibase_decode,
    multibase_encode,
)

__all__ = [
    "Cid", "IpfsBadCid", "IpfsClient", "IpfsContentError", "IpfsError", "IpfsIntegrityError", "IpfsNotFound",
    "IpfsTooLarge", "IpfsUnavailable", "IpfsUnsupported", "parse_cid", "check_fetchable", "kubo_cid",
    "verify_content", "CHUNK_SIZE", "MAX_LINKS", "DEFAULT_MAX_BYTES",
]

DEFAULT_API_URL = "http://127.0.0.1:5001"
DEFAULT_MAX_BYTES = 1 << 30  # bytes: `cat` never holds more than this unless the caller asks for more
NODE_DEADLINE_SHARE = 0.9  # share of a cat's / pin's remaining deadline the node is given (Kubo's `timeout` option)
CHUNK_SIZE = 262144  # bytes; Kubo's default chunker size-262144
MAX_LINKS = 174  # Kubo's balanced DAG: links per dag-pb node
RAW = 0x55
DAG_PB = 0x70
SHA2_256 = 0x12
SHA2_512 = 0x13
IDENTITY = 0x00

# ---------------------------------------------------------------------------
# CIDs: varints, multibase (base32 lower/upper, base58btc, base16), multihash
# ---------------------------------------------------------------------------

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _b58decode(s: str) -> bytes:
    n = 0
    for ch in s:
        i = _B58.find(ch)
        if i < 0:
            raise ValueError(f"invalid base58 character {ch!r}")
        n = n * 58 + i
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\x00" * (len(s) - len(s.lstrip("1"))) + raw


def _b58encode(b: bytes) -> str:
    n = int.from_bytes(b, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    return "1" * (len(b) - len(b.lstrip(b"\x00"))) + out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(b: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(b):
            raise ValueError("truncated varint")
        byte = b[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, pos
        shift += 7


@dataclass(frozen=True)
class Cid:
    """A parsed CID: version 0/1, multicodec (0x55 raw, 0x70 dag-pb), multihash code and digest."""

    version: int
    codec: int
    hash_code: int
    digest: bytes

    @property
    def multihash(self) -> bytes:
        return _varint(self.hash_code) + _varint(len(self.digest)) + self.digest

    def __str__(self) -> str:
        if self.version == 0:
            return _b58encode(self.multihash)
        raw = _varint(1) + _varint(self.codec) + self.multihash
        return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


def parse_cid(text: str) -> Cid:
    """Parse a CID string (CIDv0 `Qm...`, or CIDv1 in base32 `b`/`B`, base58btc `z`, base16 `f`/`F`).

    Accepts an `/ipfs/` prefix. Raises IpfsBadCid (an IpfsError) when the text is not a CID.
    """
    if not isinstance(text, str):
        raise IpfsBadCid(repr(text), f"expected a string, got {type(text).__name__}")
    s = text.strip()
    if s.startswith("/ipfs/"):
        s = s[len("/ipfs/"):]
    try:
        if len(s) == 46 and s.startswith("Qm"):
            mh = _b58decode(s)
            return _cid_from(0, DAG_PB, mh)
        prefix, body = s[:1], s[1:]
        if prefix in ("b", "B"):
            body = body.upper()
            raw = base64.b32decode(body + "=" * (-len(body) % 8))
        elif prefix == "z":
            raw = _b58decode(body)
        elif prefix in ("f", "F"):
            raw = bytes.fromhex(body)
        else:
            raise ValueError(f"unsupported multibase prefix {prefix!r}")
        version, pos = _read_varint(raw, 0)
        if version != 1:
            raise ValueError(f"CID version {version}")
        codec, pos = _read_varint(raw, pos)
        return _cid_from(1, codec, raw[pos:])
    except (ValueError, TypeError, base64.binascii.Error) as exc:
        raise IpfsBadCid(text, str(exc)) from exc


def _cid_from(version: int, codec: int, mh: bytes) -> Cid:
    code, pos = _read_varint(mh, 0)
    length, pos = _read_varint(mh, pos)
    digest = mh[pos:]
    if len(digest) != length:
        raise ValueError(f"multihash digest has {len(digest)} bytes, header says {length}")
    return Cid(version, codec, code, digest)


def _digest(hash_code: int, data: bytes) -> bytes:
    if hash_code == SHA2_256:
        return hashlib.sha256(data).digest()
    if hash_code == SHA2_512:
        return hashlib.sha512(data).digest()
    if hash_code == IDENTITY:
        return data
    raise IpfsUnsupported(f"<multihash 0x{hash_code:x}>", f"multihash function 0x{hash_code:x} is not supported by "
                                                        "this client (sha2-256, sha2-512, identity)")


def check_fetchable(cid: str) -> Cid:
    """Parse ``cid`` and check that `IpfsClient.cat` can verify what it names, before any byte is
    fetched: codec raw (0x55) with a sha2-256 / sha2-512 / identity multihash, or dag-pb (0x70)
    with sha2-256. Returns the parsed CID.

    Raises:
        IpfsBadCid: not a CID. IpfsUnsupported: another codec or multihash function.
    """
    parsed = parse_cid(cid)
    if parsed.codec == RAW and parsed.hash_code in (SHA2_256, SHA2_512, IDENTITY):
        return parsed
    if parsed.codec == DAG_PB and parsed.hash_code == SHA2_256:
        return parsed
    raise IpfsUnsupported(cid, f"codec 0x{parsed.codec:x} with multihash 0x{parsed.hash_code:x} can not be "
                               "verified by this client (raw: sha2-256/sha2-512/identity; dag-pb: sha2-256)")


# ---------------------------------------------------------------------------
# Kubo's import layout, recomputed locally (UnixFS v1 + dag-pb)
# ---------------------------------------------------------------------------


def _pb_bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _pb_uint(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _unixfs_file(filesize: int, blocksizes: list[int], data: bytes | None = None) -> bytes:
    """UnixFS Data message of Type File (2): Type, Data?, filesize, blocksizes (proto2, not packed)."""
    out = _pb_uint(1, 2)
    if data:
        out += _pb_bytes(2, data)
    out += _pb_uint(3, filesize)
    for size in blocksizes:
        out += _pb_uint(4, size)
    return out


def _dag_pb(links: list[tuple[bytes, int]], data: bytes) -> bytes:
    """Canonical dag-pb PBNode: Links (field 2: Hash=1, Name=2 empty, Tsize=3) before Data (field 1)."""
    out = b""
    for cid_bytes, tsize in links:
        out += _pb_bytes(2, _pb_bytes(1, cid_bytes) + _pb_bytes(2, b"") + _pb_uint(3, tsize))
    return out + _pb_bytes(1, data)


@dataclass(frozen=True)
class _Node:
    cid: Cid
    file_size: int  # bytes of file content under this node
    tsize: int  # cumulative DAG size: block length + children's tsize


def _cid_bytes(cid: Cid) -> bytes:
    return cid.multihash if cid.version == 0 else _varint(1) + _varint(cid.codec) + cid.multihash


def kubo_cid(data: bytes, cid_version: int = 1, raw_leaves: bool | None = None,
             chunk_size: int = CHUNK_SIZE, max_links: int = MAX_LINKS) -> str:
    """CID that `ipfs add` (Kubo) gives `data` with fixed-size chunking and a balanced layout.

    Args:
        data: the file's bytes.
        cid_version: 1 (default, `--cid-version 1`) or 0 (Kubo's historic default).
        raw_leaves: leaves as raw blocks; defaults to True for CIDv1, False for CIDv0 (as Kubo).
        chunk_size: bytes per leaf (Kubo `size-262144`).
        max_links: children per dag-pb node (Kubo 174).

    Returns the root CID string (base32 CIDv1 or base58 CIDv0). A single-chunk
    file's root is its leaf. The v0 / dag-pb-leaf path follows go-unixfs
    (leaves are UnixFS File nodes) and was not checked against a Kubo binary.
    """
    if raw_leaves is None:
        raw_leaves = cid_version == 1

    def make_cid(codec: int, block: bytes) -> Cid:
        version = 0 if cid_version == 0 and codec == DAG_PB else 1
        return Cid(version, codec, SHA2_256, hashlib.sha256(block).digest())

    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)] or [b""]
    level: list[_Node] = []
    for chunk in chunks:
        if raw_leaves:
            level.append(_Node(make_cid(RAW, chunk), len(chunk), len(chunk)))
        else:
            block = _dag_pb([], _unixfs_file(len(chunk), [], chunk))
            level.append(_Node(make_cid(DAG_PB, block), len(chunk), len(block)))
    if len(level) == 1:
        return str(level[0].cid)
    while True:
        parents = []
        for i in range(0, len(level), max_links):
            group = level[i:i + max_links]
            size = sum(n.file_size for n in group)
            block = _dag_pb([(_cid_bytes(n.cid), n.tsize) for n in group],
                            _unixfs_file(size, [n.file_size for n in group]))
            parents.append(_Node(make_cid(DAG_PB, block), size, len(block) + sum(n.tsize for n in group)))
        if len(parents) == 1:
            return str(parents[0].cid)
        level = parents


def verify_content(cid: str, data: bytes) -> None:
    """Check that `data` is the content `cid` names; raises IpfsIntegrityError if not.

    Raw CIDs (0x55): the multihash of the bytes. dag-pb roots (0x70): the CID
    recomputed with Kubo's import layout (kubo_cid); content imported with
    other chunking can not be verified this way (`cat(..., verify=False)`).
    """
    parsed = check_fetchable(cid)
    if parsed.codec == RAW:
        if _digest(parsed.hash_code, data) != parsed.digest:
            raise IpfsIntegrityError(cid, f"the multihash of the {len(data)} bytes received differs")
        return
    for raw_leaves in ((True, False) if parsed.version == 1 else (False,)):
        if kubo_cid(data, cid_version=parsed.version, raw_leaves=raw_leaves) == str(parsed):
            return
    raise IpfsIntegrityError(
        cid, f"the {len(data)} bytes received do not rebuild this DAG with Kubo's layout "
             f"({CHUNK_SIZE}-byte chunks, {MAX_LINKS} links per node)")


# ---------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------

_RETRY_STATUS = {502, 503, 504}
#: what the embedded node (scripts/ipfs/fetch.mjs) says when it has no connected peer to ask for a block
_NO_PEER_MARKER = "no connected peer"
_NOT_FOUND_MARKERS = ("not found", "could not find", "no link named", "not exist", "context deadline exceeded")
_NOT_A_FILE_MARKERS = ("is a directory", "not a file", "notafileerror")
_CONNECTION_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError,
                      httpx.ReadError, httpx.WriteError, httpx.WriteTimeout, httpx.PoolTimeout)


class IpfsClient:
    """Kubo RPC client: add / cat / pin / unpin / pins / block_size / version / id, and pubsub
    (pubsub_publish / pubsub_subscribe / pubsub_topics / pubsub_peers) with swarm_connect and swarm_peers.

    Args:
        api_url: base URL of the RPC API, e.g. "http://127.0.0.1:5001".
        timeout_s: seconds to wait for each answer (read timeout; for `cat` the total deadline of the
            whole read); connecting waits at most 5 s.
            A `cat`, `pin` or `block_size` that times out raises IpfsNotFound
            (a Kubo daemon online searches the network for unknown CIDs).
        retries: extra attempts after a connection error or a 502/503/504,
            with exponential backoff (backoff_s, 2*backoff_s, ... capped at 2 s).
        backoff_s: first backoff in seconds.
        offline: ask the node to read its own blocks only (`offline=true`): a Kubo daemon does
            not search the network, the local Helia node asks none of its swarm-connected peers
            (over bitswap) for a block it lacks.

    Errors: IpfsUnavailable (no node answers), IpfsNotFound (unknown CID, or not in time),
    IpfsContentError (the CID or its content is at fault: IpfsBadCid, IpfsUnsupported,
    IpfsTooLarge, IpfsIntegrityError), IpfsPubsubError (a pubsub or swarm call refused:
    IpfsBadTopic, IpfsMessageTooLarge), IpfsError (anything else the node refused).
    """

    def __init__(self, api_url: str = DEFAULT_API_URL, timeout_s: float = 30.0, retries: int = 3,
                 backoff_s: float = 0.2, offline: bool = False) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.offline = offline
        self._http = httpx.Client(base_url=self.api_url + "/api/v0",
                                  timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> IpfsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ----------------------------------------------------------

    def _post(self, command: str, params: dict | None = None, *, files: dict | None = None,
              cid: str | None = None, timeout_s: float | None = None, online: bool = False) -> httpx.Response:
        """POST /api/v0/<command>; retries connection errors and 502/503/504; maps Kubo errors.
        ``online``: a command that needs the network (pubsub, swarm) never gets ``offline=true``."""
        params = dict(params or {})
        if self.offline and not online:
            params["offline"] = "true"
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)) if timeout_s else httpx.USE_CLIENT_DEFAULT
        reason = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 2.0))
            try:
                resp = self._http.post(command, params=params, files=files, timeout=timeout)
            except httpx.ReadTimeout:
                waited = timeout_s or self.timeout_s
                if cid is not None:
                    raise IpfsNotFound(cid, f"the node at {self.api_url} did not return it within {waited:g} s") from None
                raise IpfsError(f"the IPFS node at {self.api_url} did not answer {command} within {waited:g} s") from None
            except _CONNECTION_ERRORS as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            except httpx.HTTPError as exc:  # e.g. a malformed API URL: retrying will not help
                raise IpfsError(f"cannot call IPFS {command} at {self.api_url}: {type(exc).__name__}: {exc}") from None
            if resp.status_code in _RETRY_STATUS:
                reason = f"HTTP {resp.status_code}"
                continue
            if resp.status_code >= 400:
                raise self._error(command, resp.status_code, resp.content, cid)
            return resp
        raise IpfsUnavailable(self.api_url, f"{self.retries + 1} attempts, last: {reason}")

    def _error(self, command: str, status: int, body: bytes, cid: str | None) -> IpfsError:
        """The error of a Kubo answer with HTTP ``status`` and ``body`` ({"Message": ...} JSON)."""
        try:
            message = str(json.loads(body).get("Message", ""))
        except (json.JSONDecodeError, AttributeError, UnicodeDecodeError):
            message = body.decode("utf-8", "replace").strip()[:300]
        if status == 404 and not message:
            return IpfsError(f"the node at {self.api_url} does not serve /api/v0/{command} (HTTP 404)")
        message = message[:500]
        if cid is not None and any(m in message.lower() for m in _NOT_FOUND_MARKERS):
            return (IpfsIsolated if _NO_PEER_MARKER in message.lower() else IpfsNotFound)(cid, message)
        if cid is not None and any(m in message.lower() for m in _NOT_A_FILE_MARKERS):
            return IpfsUnsupported(cid, f"not a file: {message}")
        if cid is not None and "invalid cid" in message.lower():
            return IpfsBadCid(cid, message)
        if command.startswith(("pubsub/", "swarm/")):
            return IpfsPubsubError(f"IPFS {command} failed at {self.api_url} (HTTP {status}): {message}")
        return IpfsError(f"IPFS {command} failed at {self.api_url} (HTTP {status}): {message}")

    # -- commands -----------------------------------------------------------

    def add(self, data: bytes, pin: bool = True, *, name: str = "data", timeout_s: float | None = None) -> str:
        """Add `data` (bytes) as a UnixFS file: CIDv1, raw leaves, 256 KiB chunks; returns the CID string.

        The CID the node returns is checked against the one computed locally;
        a node that imports differently raises IpfsIntegrityError.
        """
        params = {"cid-version": "1", "raw-leaves": "true", "chunker": f"size-{CHUNK_SIZE}",
                  "pin": "true" if pin else "false"}
        resp = self._post("add", params, files={"file": (name, data, "application/octet-stream")},
                          timeout_s=timeout_s)
        lines = [ln for ln in resp.text.splitlines() if ln.strip()]
        try:
            entry = json.loads(lines[-1])
            cid = entry["Hash"]
        except (IndexError, json.JSONDecodeError, KeyError, TypeError):
            raise IpfsError(f"IPFS add at {self.api_url} gave an unexpected answer: {resp.text[:300]!r}") from None
        expected = kubo_cid(data)
        if cid != expected:
            raise IpfsIntegrityError(cid, f"the node returned {cid} for {len(data)} bytes, expected {expected}")
        return cid

    def cat(self, cid: str, *, verify: bool = True, timeout_s: float | None = None,
            max_bytes: int | None = None) -> bytes:
        """Fetch the bytes of the file `cid` names, streamed, with a byte cap and a total deadline;
        verified against the CID unless verify=False.

        Args:
            cid: the CID (raw or dag-pb; `check_fetchable` is applied before anything is fetched).
            verify: check the bytes against the CID (`verify_content`).
            timeout_s: total deadline for the whole read in seconds (connecting, retries, every
                byte), default the client's ``timeout_s``. A node that trickles bytes is cut off at
                the deadline; one that stalls at the latest one read timeout later (so at most
                twice ``timeout_s`` in all).
            max_bytes: most bytes accepted (default `DEFAULT_MAX_BYTES`); at most ``max_bytes + 1``
                bytes are ever held, whatever the node sends or announces.

        The node is told both limits (Kubo's ``length`` = max_bytes + 1 and ``timeout``), so a node
        that fetches the blocks from its peers (bitswap) fetches no more than that, no longer.

        Raises:
            IpfsBadCid / IpfsUnsupported: not a CID, or one that can not be verified (nothing fetched).
            IpfsTooLarge: more than ``max_bytes`` bytes. IpfsNotFound: unknown CID, or not
            received within the deadline. IpfsUnsupported: a directory. IpfsIntegrityError: bytes do not match the CID.
            IpfsUnavailable: the node does not answer.
        """
        cid = cid.strip() if isinstance(cid, str) else cid
        if verify:
            check_fetchable(cid)
        else:
            parse_cid(cid)
        limit = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)
        budget = self.timeout_s if timeout_s is None else float(timeout_s)
        data = self._stream_cat(cid, limit, budget)
        if verify:
            verify_content(cid, data)
        return data

    def _stream_cat(self, cid: str, limit: int, budget: float) -> bytes:
        """POST cat, read the body in chunks under ``limit`` bytes and ``budget`` seconds; the same
        retries as `_post` (connection errors, 502/503/504) while the deadline allows."""
        params = {"arg": cid, "length": str(limit + 1)}
        if self.offline:
            params["offline"] = "true"
        deadline = time.monotonic() + budget
        reason = ""
        answered = False  # the last attempt's node began to send the content: a cut after that is no outage
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 2.0, max(0.0, deadline - time.monotonic())))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            timeout = httpx.Timeout(remaining, connect=min(remaining, 5.0))
            # Kubo's option (a Go duration): the node gives up a little before this client does,
            # so that its own answer (which peers it asked) arrives rather than a read timeout
            params["timeout"] = f"{max(remaining * NODE_DEADLINE_SHARE, 0.001):.3f}s"
            received = 0
            answered = False
            try:
                with self._http.stream("POST", "cat", params=params, timeout=timeout) as resp:
                    if resp.status_code in _RETRY_STATUS:
                        reason = f"HTTP {resp.status_code}"
                        continue
                    if resp.status_code >= 400:
                        body = b""
                        for chunk in resp.iter_bytes():  # an error message, never more than 64 KiB of it
                            body += chunk
                            if len(body) > 65536:
                                break
                        raise self._error("cat", resp.status_code, body, cid)
                    announced = resp.headers.get("x-content-length") or resp.headers.get("content-length")
                    if announced and announced.isdigit() and int(announced) > limit:
                        raise IpfsTooLarge(cid, limit, 0)
                    answered = True
                    buf = bytearray()
                    for chunk in resp.iter_bytes():
                        buf += chunk
                        received = len(buf)
                        if received > limit:
                            raise IpfsTooLarge(cid, limit, received)
                        if time.monotonic() > deadline:
                            raise IpfsNotFound(cid, f"the node at {self.api_url} sent {received} bytes in "
                                                    f"{budget:g} s, not the whole content")
                    return bytes(buf)
            except httpx.ReadTimeout:
                raise IpfsNotFound(cid, f"the node at {self.api_url} did not return it within {budget:g} s "
                                        f"({received} bytes received)") from None
            except _CONNECTION_ERRORS as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            except httpx.HTTPError as exc:  # e.g. a malformed API URL: retrying will not help
                raise IpfsError(f"cannot call IPFS cat at {self.api_url}: {type(exc).__name__}: {exc}") from exc
        if answered or (time.monotonic() >= deadline and reason == ""):
            raise IpfsNotFound(cid, f"the node at {self.api_url} did not return it within {budget:g} s"
                                    + (f" (last: {reason})" if reason else ""))
        raise IpfsUnavailable(self.api_url, f"cat {cid}: {attempt + 1} attempt(s) within {budget:g} s, last: "
                                            f"{reason or 'deadline passed'}")

    def pin(self, cid: str, *, timeout_s: float | None = None) -> None:
        """Pin `cid` recursively (idempotent); a node fetches the blocks it lacks from its peers
        within ``timeout_s`` (default the client's; sent as Kubo's ``timeout``). Raises IpfsNotFound
        when a block of the DAG is not on the node nor found in time."""
        parse_cid(cid)
        waited = self.timeout_s if timeout_s is None else float(timeout_s)
        self._post("pin/add", {"arg": cid, "recursive": "true", "timeout": f"{waited * NODE_DEADLINE_SHARE:.3f}s"},
                   cid=cid, timeout_s=timeout_s)

    def unpin(self, cid: str) -> bool:
        """Remove the recursive pin of `cid`; True if one was removed, False if it was not pinned (idempotent)."""
        parse_cid(cid)
        try:
            self._post("pin/rm", {"arg": cid})
        except IpfsError as exc:
            if "not pinned" in str(exc):
                return False
            raise
        return True

    def pins(self) -> set[str]:
        """CIDs of the recursive pins (strings as the node returns them)."""
        keys = self._post("pin/ls", {"type": "recursive"}).json().get("Keys") or {}
        return set(keys)

    def block_size(self, cid: str) -> int:
        """Size in bytes of the single block `cid` (block/stat), not of the whole file."""
        parse_cid(cid)
        return int(self._post("block/stat", {"arg": cid}, cid=cid).json()["Size"])

    def version(self) -> dict:
        """The node's /api/v0/version answer: {"Version", "Commit", "Repo", "System", "Golang", ...}."""
        return self._post("version").json()

    def id(self) -> dict:
        """The node's /api/v0/id answer: {"ID", "PublicKey", "Addresses", "AgentVersion", "ProtocolVersion", ...}.

        ``Addresses`` are the libp2p multiaddrs the node listens on, each ending in
        ``/p2p/<ID>`` (what `swarm_connect` on another node takes). Raises IpfsUnavailable.
        """
        return self._post("id").json()

    def bitswap_stat(self) -> dict:
        """What the node's bitswap received since it started (/api/v0/bitswap/stat, Kubo's names):
        ``BlocksReceived``, ``DataReceived`` (bytes) and of them the copies of blocks that had
        arrived already, ``DupBlksReceived``, ``DupDataReceived`` (bytes). Raises IpfsUnavailable."""
        return self._post("bitswap/stat").json()

    # -- pubsub and swarm -----------------------------------------------------

    def pubsub_publish(self, topic: str, data: bytes, *, timeout_s: float | None = None) -> None:
        """Publish ``data`` (at most MAX_MESSAGE_BYTES bytes) to ``topic`` (pubsub/pub).

        Returns once the node has handed the message to its mesh; delivery is best effort and
        nobody subscribed is not an error. A retry after a lost connection may publish twice
        (with another seqno): receivers dedupe on content.

        Raises:
            IpfsMessageTooLarge: ``data`` is over MAX_MESSAGE_BYTES (nothing sent).
            IpfsBadTopic: ``topic`` is not 1..MAX_TOPIC_BYTES bytes of text.
            IpfsPubsubError: the node refused it. IpfsUnavailable: the node does not answer.
        """
        raw_topic = _check_topic(topic)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise IpfsPubsubError(f"pubsub data is bytes, got {type(data).__name__}")
        if len(data) > MAX_MESSAGE_BYTES:
            raise IpfsMessageTooLarge(len(data), MAX_MESSAGE_BYTES)
        self._post("pubsub/pub", {"arg": multibase_encode(raw_topic)}, online=True, timeout_s=timeout_s,
                   files={"file": ("data", bytes(data), "application/octet-stream")})

    def pubsub_subscribe(self, topic: str, *, max_bytes: int = MAX_MESSAGE_BYTES,
                         queue_size: int = 1024) -> PubsubSubscription:
        """Subscribe to ``topic`` (pubsub/sub, a stream); returns once the node has joined it.

        Args:
            topic: the topic name (text, 1..MAX_TOPIC_BYTES bytes of UTF-8).
            max_bytes: most bytes of data accepted per message; longer ones are skipped
                (counted in the subscription's ``dropped``), never held whole.
            queue_size: messages held for a consumer that lags; beyond it the reader waits and
                the node drops messages for this subscriber, as Kubo does for slow readers.

        Returns a PubsubSubscription (iterator of PubsubMessage, ``get(timeout_s)``, ``close()``).
        Messages published by other nodes arrive once this node and theirs are connected
        (`swarm_connect`) and the subscription has reached them: poll ``pubsub_peers(topic)``
        on the publishing node for this node's ID before relying on delivery.

        Raises:
            IpfsBadTopic: not a usable topic. IpfsPubsubError: the node refused the topic.
            IpfsUnavailable: the node does not answer (connecting waits at most the client's
            timeout_s, capped at 5 s).
        """
        _check_topic(topic)
        return PubsubSubscription(self.api_url, topic, max_bytes=int(max_bytes), queue_size=int(queue_size),
                                  connect_timeout_s=min(self.timeout_s, 5.0), error_of=self._error)

    def pubsub_topics(self) -> list[str]:
        """Topics the node is subscribed to (pubsub/ls), decoded to text. Raises IpfsPubsubError
        on an answer that is not Kubo's, IpfsUnavailable when the node does not answer."""
        strings = self._strings("pubsub/ls", {})
        try:
            return [multibase_decode(t).decode("utf-8") for t in strings]
        except UnicodeDecodeError as exc:
            raise IpfsPubsubError(f"IPFS pubsub/ls at {self.api_url} listed a topic that is not UTF-8: {exc}") from None

    def pubsub_peers(self, topic: str | None = None) -> list[str]:
        """Peer IDs (sorted) of the connected peers subscribed to ``topic`` (pubsub/peers); every
        pubsub peer when ``topic`` is None. Raises IpfsBadTopic, IpfsPubsubError, IpfsUnavailable."""
        params = {} if topic is None else {"arg": multibase_encode(_check_topic(topic))}
        return sorted(self._strings("pubsub/peers", params))

    def swarm_connect(self, addr: str, *, timeout_s: float | None = None) -> str:
        """Connect the node to the peer at ``addr``, a multiaddr ending in ``/p2p/<peer id>``
        (one of the other node's `id()` ``Addresses``); returns that peer ID.

        Idempotent (an open connection is reused). The node gives up dialling after 10 s.
        Raises IpfsPubsubError (bad address, dial failed; the node's message) or IpfsUnavailable.
        """
        if not isinstance(addr, str) or "/p2p/" not in addr:
            raise IpfsPubsubError(f"swarm_connect needs a multiaddr ending in /p2p/<peer id>, got {addr!r}")
        answer = self._strings("swarm/connect", {"arg": addr}, timeout_s=timeout_s)
        peer = addr.rsplit("/p2p/", 1)[1].split("/", 1)[0]
        if not any(peer in line and "success" in line for line in answer):
            raise IpfsPubsubError(f"IPFS swarm/connect at {self.api_url} did not confirm {peer}: {answer!r}")
        return peer

    def swarm_peers(self, *, timeout_s: float | None = None) -> list[str]:
        """Peer IDs (sorted, distinct) of the peers the node is connected to (swarm/peers: Kubo's
        ``{"Peers": [{"Addr": ..., "Peer": ...}]}``, null read as none).
        Raises IpfsPubsubError (an unexpected answer) or IpfsUnavailable."""
        resp = self._post("swarm/peers", {}, online=True, timeout_s=timeout_s)
        try:
            peers = resp.json().get("Peers") or []
            return sorted({str(p["Peer"]) for p in peers})
        except (json.JSONDecodeError, AttributeError, KeyError, TypeError):
            raise IpfsPubsubError(f"IPFS swarm/peers at {self.api_url} gave an unexpected answer: "
                                  f"{resp.text[:300]!r}") from None

    def _strings(self, command: str, params: dict, timeout_s: float | None = None) -> list[str]:
        """The ``Strings`` list of a Kubo answer (null read as empty)."""
        resp = self._post(command, params, online=True, timeout_s=timeout_s)
        unexpected = IpfsPubsubError(f"IPFS {command} at {self.api_url} gave an unexpected answer: {resp.text[:300]!r}")
        try:
            strings = resp.json().get("Strings") or []
        except (json.JSONDecodeError, AttributeError):
            raise unexpected from None
        if not isinstance(strings, list) or not all(isinstance(x, str) for x in strings):
            raise unexpected
        return strings

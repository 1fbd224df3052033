"""JSON-RPC 2.0 envelopes (https://www.jsonrpc.org/specification), independent of HTTP and chain.

`Dispatcher.handle` takes a request body (bytes) and returns the response body (bytes), or None
when every call was a notification. It parses the body, validates each request object, binds
``params`` (an array by position or an object by name) to the method's Python signature, runs the
method and wraps its result or error. Batches run in order, one call after the other.
`Dispatcher.parse` and `Dispatcher.run` are its two halves, for a server that parses on its event
loop and picks a worker pool by `Dispatcher.is_write`. JSON nested more than `MAX_DEPTH` deep is a
`PARSE_ERROR` like any other body that is not JSON, refused before the parser sees it: the C
parser recurses once per level, and where a library has raised the recursion limit (py-evm sets
it to 10,000 or more) 100,000 nested arrays overflow the thread's stack and kill the process.

Error codes: the standard ones (`PARSE_ERROR` ... `INTERNAL_ERROR`) and the gateway's own in the
server range -32000..-32099 (listed in ``operator/RPC.md``). A method raises `RpcError`; any
other exception goes through ``map_error`` (the chain's errors) and, if that has no answer, is
logged here with its traceback and answered with a bare `INTERNAL_ERROR`: no traceback and no
exception text ever reaches the client.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any, Callable, Mapping

import numpy as np

log = logging.getLogger("tenzro.gateway")

__all__ = ["MAX_DEPTH", "Dispatcher", "RpcError", "error_response", "json_depth"]

MAX_DEPTH = 64  # most nested arrays / objects in a body (a batch of calls needs 4 or 5)
_BRACKETS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 opens, -1 closes (as int8)
_NOT_MARK = bytes(b for b in range(256) if b not in b'"[{]}')  # what the depth scan drops

# -- standard codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# -- the gateway's (server-defined range)
REVERTED = -32000  # the registry refused: data.error is the custom error's name, data.args its arguments
REQUEST_TOO_LARGE = -32001  # the HTTP body is over max_request_bytes
TX_REJECTED = -32002  # a signed transaction that is not a call of this method on this chain's registry
BAD_SIGNATURE = -32003  # a submission whose signature does not recover to an enrolled trainer of the run
NO_RELAYER = -32004  # submitGradient on a gateway without a relayer keystore
NODE_REJECTED = -32005  # the chain node refused the transaction (nonce, funds, fees, gas)
UNAVAILABLE = -32006  # the chain node does not answer, or the transaction was not mined in time
NONCE_GAP = -32007  # a signed transaction whose nonce is not the sender's next one (pending included)
BUSY = -32008  # every write worker is taken: retry later (nothing was done)


def json_depth(body: bytes) -> int:
    """How deep arrays and objects nest in ``body`` (brackets inside strings ignored), computed
    without recursion: 0 for a scalar; when ``body`` holds at most `MAX_DEPTH` brackets in all,
    their number (a bound that already proves it shallow). Malformed text gets a number too; the
    parser judges it."""
    # Bytes methods only (C loops; a regular expression over the strings took about twice the
    # parse of a 100-call batch). Drop the escape pairs that can hide a quote (an escaped
    # backslash first, paired left to right as the parser does), keep only quotes and brackets:
    # then quotes alternate, and the even pieces between them are outside strings.
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = body.translate(None, _NOT_MARK)
    brackets = marks.count(b"[") + marks.count(b"{")
    if brackets <= MAX_DEPTH:  # the common case: no scan needed
        return brackets
    marks = b"".join(marks.split(b'"')[::2]).translate(_BRACKETS)
    if not marks:
        return 0
    return int(np.cumsum(np.frombuffer(marks, dtype=np.int8), dtype=np.int64).max())


class RpcError(Exception):
    """A JSON-RPC error object: ``code`` (int), ``message`` (one line), ``data`` (JSON-ready, optional)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def error_response(err: RpcError, id_: Any = None) -> dict[str, Any]:
    """The response object of a failed call (``id`` null when the request's could not be read)."""
    return {"jsonrpc": "2.0", "error": err.to_json(), "id": id_}


def _valid_id(v: Any) -> bool:
    return v is None or isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool))


_NO_ID = object()  # a notification: no "id" member


class Dispatcher:
    """Runs JSON-RPC requests against a table of methods.

    Args:
        methods: name -> callable; its parameters are the method's params (by position or name;
            parameters with defaults are optional). A parameter the callable does not declare, or
            a required one left out, is `INVALID_PARAMS`.
        max_batch: most calls in one batch (more: one `INVALID_REQUEST` for the whole batch).
        map_error: turns an exception a method raised into an `RpcError`, or returns None
            (then `INTERNAL_ERROR`, the exception logged here with its traceback).
        writes: names of the methods that write (send a transaction and wait for it): `is_write`.
    """

    def __init__(self, methods: Mapping[str, Callable[..., Any]], max_batch: int = 100,
                 map_error: Callable[[BaseException], RpcError | None] | None = None,
                 writes: frozenset[str] | set[str] = frozenset()) -> None:
        self.methods = dict(methods)
        self.max_batch = max_batch
        self.map_error = map_error or (lambda exc: None)
        self.writes = frozenset(writes)
        self._sigs = {name: inspect.signature(fn) for name, fn in self.methods.items()}

    def handle(self, body: bytes) -> bytes | None:
        """One HTTP body in, the response body out (None: only notifications, nothing to answer)."""
        doc, refused = self.parse(body)
        return refused if refused is not None else self.run(doc)

    def parse(self, body: bytes) -> tuple[Any, bytes | None]:
        """``(document, None)``, or ``(None, the PARSE_ERROR response body)`` when ``body`` is not
        JSON (not UTF-8, a syntax error) or nests more than `MAX_DEPTH` deep (checked first)."""
        depth = json_depth(bytes(body))
        if depth > MAX_DEPTH:
            return None, self._dump(error_response(RpcError(
                PARSE_ERROR, f"parse error: the body is nested too deeply ({depth} levels, at most {MAX_DEPTH})",
                {"limit": MAX_DEPTH})))
        try:
            return json.loads(body), None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            return None, self._dump(error_response(RpcError(PARSE_ERROR, f"parse error: the body is not JSON ({why})")))

    def is_write(self, doc: Any) -> bool:
        """True when ``doc`` (a request or a batch) calls a method of ``writes``."""
        reqs = doc if isinstance(doc, list) else [doc]
        return any(isinstance(r, dict) and r.get("method") in self.writes for r in reqs)

    def refuse(self, doc: Any, err: RpcError) -> bytes | None:
        """The response body answering every call of ``doc`` with ``err`` (none of them run)."""
        reqs = doc if isinstance(doc, list) else [doc]
        out = [error_response(err, r.get("id") if isinstance(r, dict) and _valid_id(r.get("id")) else None)
               for r in reqs if not (isinstance(r, dict) and "id" not in r)]
        if not out:
            return None
        return self._dump(out if isinstance(doc, list) else out[0])

    def run(self, doc: Any) -> bytes | None:
        """A parsed document (one request or a batch) in, the response body out (None: only
        notifications)."""
        if isinstance(doc, list):
            if not doc:
                return self._dump(error_response(RpcError(INVALID_REQUEST, "invalid request: an empty batch")))
            if len(doc) > self.max_batch:
                return self._dump(error_response(RpcError(
                    INVALID_REQUEST, f"invalid request: a batch of {len(doc)} calls is over the limit of "
                                     f"{self.max_batch}", {"limit": self.max_batch, "got": len(doc)})))
            out = [r for r in (self.call(req) for req in doc) if r is not None]
            return self._dump(out) if out else None
        resp = self.call(doc)
        return None if resp is None else self._dump(resp)

    def call(self, req: Any) -> dict[str, Any] | None:
        """One request object -> its response object (None for a valid notification)."""
        if not isinstance(req, dict):
            return error_response(RpcError(INVALID_REQUEST, "invalid request: expected a JSON object, got "
                                                            f"{_json_type(req)}"))
        id_ = req.get("id", _NO_ID)
        echo = id_ if id_ is not _NO_ID and _valid_id(id_) else None
        problem = self._invalid(req, id_)
        if problem:
            return error_response(RpcError(INVALID_REQUEST, f"invalid request: {problem}"), echo)
        method = req["method"]
        try:
            result = self._run(method, req.get("params"))
        except RpcError as err:
            resp = error_response(err, echo)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error object, never a traceback
            err = self.map_error(exc)
            if err is None:
                log.exception("%s failed", method)
                err = RpcError(INTERNAL_ERROR, "internal error (logged by the gateway)")
            else:  # answered to the caller: at INFO a flood of refusals would write the log at its rate
                log.debug("%s: %s", method, err.message)
            resp = error_response(err, echo)
        else:
            resp = {"jsonrpc": "2.0", "result": result, "id": echo}
        return None if id_ is _NO_ID else resp

    @staticmethod
    def _invalid(req: dict[str, Any], id_: Any) -> str:
        if req.get("jsonrpc") != "2.0":
            return '"jsonrpc" must be exactly "2.0"'
        if not isinstance(req.get("method"), str):
            return '"method" must be a string'
        if "params" in req and not isinstance(req["params"], (list, dict)):
            return '"params" must be an array or an object'
        if id_ is not _NO_ID and not _valid_id(id_):
            return '"id" must be a string, a number or null'
        return ""

    def _run(self, method: str, params: Any) -> Any:
        fn = self.methods.get(method)
        if fn is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method!r}",
                           {"methods": sorted(self.methods)})
        sig = self._sigs[method]
        try:
            bound = sig.bind(*params) if isinstance(params, list) else sig.bind(**(params or {}))
        except TypeError as exc:
            names = [p.name + ("" if p.default is inspect.Parameter.empty else "?") for p in sig.parameters.values()]
            raise RpcError(INVALID_PARAMS, f"invalid params for {method}: {exc}", {"params": names}) from None
        return fn(*bound.args, **bound.kwargs)

    @staticmethod
    def _dump(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


def _json_type(v: Any) -> str:
    for t, name in ((bool, "a boolean"), (str, "a string"), ((int, float), "a number"), (list, "an array")):
        if isinstance(v, t):
            return name
    return "null" if v is None else type(v).__name__

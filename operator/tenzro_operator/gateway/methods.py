"""The seven ``tenzro_training_*`` methods (params, results and errors: ``operator/RPC.md``).

Reads answer what ``tenzro train list-runs / get-run / get-receipt --format json`` print: the
registry's views through `ChainClient` and the views' own ``to_json``; ``getRun`` through the run
read model (`tenzro_operator.views.run`). Writes never use a user's key: ``postTask`` (and the
sponsor's ``useRootFlow`` after it), ``enrollTrainer`` and ``finalizeRound`` (the syncer's
``commitRound``) relay a transaction the user signed (`rawtx` checks it, `relay` sends it);
``submitGradient`` takes a trainer's EIP-712 signed submission, checks that it recovers to an
enrolled trainer of the run and sends it from the gateway's relayer account: the reveal of the
commitment the trainer made on-chain in the round's commit phase (``submitOuterGradient``
recovers the trainer from the signature, so the sender does not matter).
"""

from __future__ import annotations

import enum
from typing import Any, Callable

from eth_account import Account
from eth_account.messages import encode_typed_data

from tenzro_operator.chain import ChainClient, SignedPayload, TxResult, outer_gradient_typed_data
from tenzro_operator.errors import ChainRevert, RpcUnavailable, TenzroError, TxFailed, TxReverted
from tenzro_operator.gateway import params as P
from tenzro_operator.gateway.jsonrpc import (
    BAD_SIGNATURE,
    NO_RELAYER,
    NODE_REJECTED,
    REVERTED,
    UNAVAILABLE,
    RpcError,
)
from tenzro_operator.gateway.rawtx import check_registry_call, decode_raw_tx
from tenzro_operator.gateway.relay import Relay

__all__ = ["PREFIX", "TrainingMethods", "chain_error", "to_json"]

PREFIX = "tenzro_training_"
MAX_LIST_LIMIT = 1000  # runs per listRuns page, as `tenzro train list-runs --limit`
JSON_SAFE_INT = 2**53 - 1  # larger integers go out as decimal strings (a JSON number loses them)


def to_json(v: Any) -> Any:
    """Chain values as JSON: bytes as 0x-hex, enums by name, integers beyond 2**53 - 1 as decimal
    strings, tuples as arrays, mappings recursively."""
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, int):
        return v if abs(v) <= JSON_SAFE_INT else str(v)
    if hasattr(v, "items"):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return str(v)


def chain_error(exc: BaseException) -> RpcError | None:
    """The JSON-RPC error of an operator error a method let through (None: not one of ours).

    ``ChainRevert`` (a view, a simulation, or a mined transaction: `TxReverted`) -> `REVERTED`
    with ``data = {error, args, function}`` (+ ``tx_hash``, ``block`` once mined); the node not
    answering or a transaction not mined in time -> `UNAVAILABLE`; any other `TenzroError` ->
    `NODE_REJECTED` with its one-line message."""
    if isinstance(exc, ChainRevert):
        data: dict[str, Any] = {"error": exc.error_name, "args": to_json(exc.args_), "function": exc.function}
        if isinstance(exc, TxReverted):
            data.update(tx_hash=exc.tx_hash, block=exc.block)
        return RpcError(REVERTED, f"reverted: {exc.error_name}", data)
    if isinstance(exc, RpcUnavailable):
        return RpcError(UNAVAILABLE, "the chain node is not answering; try again later", {"cause": exc.cause[:200]})
    if isinstance(exc, TxFailed):
        return RpcError(UNAVAILABLE, str(exc))
    if isinstance(exc, TenzroError):
        return RpcError(NODE_REJECTED, str(exc)[:500])
    return None


def _tx_result(res: TxResult, event: str, **extra: Any) -> dict[str, Any]:
    out = {"tx_hash": res.tx_hash, "block_number": res.block_number, "gas_used": res.gas_used,
           "status": "success" if res.status == 1 else "reverted", "function": res.method}
    out.update(extra)
    out["event"] = to_json(next((a for n, a in res.events if n == event), None))
    return out


class TrainingMethods:
    """The methods, bound to a chain.

    Args:
        chain: a read-only `ChainClient` (reads, relaying users' signed transactions).
        relay: a `Relay` over ``chain``.
        relayer: a `ChainClient` signing as the gateway's relayer account, or None (then
            ``submitGradient`` answers `NO_RELAYER`).
    """

    def __init__(self, chain: ChainClient, relay: Relay, relayer: ChainClient | None = None) -> None:
        self.chain, self.relay_, self.relayer = chain, relay, relayer

    def table(self) -> dict[str, Callable[..., Any]]:
        """``{"tenzro_training_<name>": bound method}`` for the `Dispatcher`."""
        names = ("postTask", "listRuns", "getRun", "getReceipt", "enrollTrainer", "submitGradient", "finalizeRound")
        return {PREFIX + n: getattr(self, n) for n in names}

    @staticmethod
    def writes() -> frozenset[str]:
        """The methods that send a transaction and wait for its receipt (the write workers')."""
        return frozenset(PREFIX + n for n in ("postTask", "enrollTrainer", "submitGradient", "finalizeRound"))

    # -- reads --------------------------------------------------------------------------

    def listRuns(self, offset: Any = 0, limit: Any = 50) -> dict[str, Any]:  # noqa: N802 - the docs' name
        """Runs in posting order: ``{"total", "offset", "runs": [getRun without trainers]}``
        (``tenzro train list-runs --format json``)."""
        off = P.uint(offset, "offset", 64)
        lim = P.uint(limit, "limit", 16)
        if not 1 <= lim <= MAX_LIST_LIMIT:
            raise P.bad("limit", f"an integer from 1 to {MAX_LIST_LIMIT}", limit)
        ids, total = self.chain.list_runs(off, lim)
        return {"total": total, "offset": off, "runs": [self.chain.get_run(i).to_json() for i in ids]}

    def getRun(self, task_id: Any, trainers: Any = True) -> dict[str, Any]:  # noqa: N802
        """One run as ``tenzro train get-run --format json`` prints it (`views.run.RunReadModel.to_json`,
        the run's fields, its phase and next change, ``rounds`` and, with ``trainers``,
        ``"trainers"`` (submitted / scored out are null: the gateway reads no transcripts). Reverts ``Registry__UnknownTask`` for a task id never posted."""
        from tenzro_operator.views.run import build

        tid = P.task_id(task_id)
        with_trainers = P.flag(trainers, "trainers")
        return build(self.chain, tid, trainers=with_trainers).to_json(trainers=with_trainers)

    def getReceipt(self, task_id: Any) -> dict[str, Any]:  # noqa: N802
        """The sealed receipt (`TrainingReceipt.to_json`) and ``verifier_accepts`` (the receipt
        verifier's answer), as ``tenzro train get-receipt --format json``. Reverts while the run
        is not Sealed (``Registry__WrongStatus``) or unknown."""
        tid = P.task_id(task_id)
        rec = self.chain.get_receipt(tid)
        out = rec.to_json()
        out["verifier_accepts"] = self.chain.verify_receipt(rec.serialized, rec.run_root)
        return out

    # -- writes: users' signed transactions ----------------------------------------------

    def _relay_signed(self, raw_transaction: Any, events: dict[str, str]) -> tuple[dict, dict]:
        """Relay a signed call of one of the registry functions ``events`` names (function ->
        the event its result carries)."""
        raw = P.hex_bytes(raw_transaction, "raw_transaction")
        tx = decode_raw_tx(raw)
        function, args = check_registry_call(tx, self.chain, tuple(events))
        res = self.relay_.relay(tx, function)
        return _tx_result(res, events[function], **{"from": tx.sender}), args

    def postTask(self, raw_transaction: Any) -> dict[str, Any]:  # noqa: N802
        """Relay a sponsor's signed ``postTask`` or ``postTaskWithPermit`` transaction (the result
        carries ``task_id`` and the ``TaskPosted`` event), or its ``useRootFlow`` right after (the
        run's initial fragments root and outer rule, before any enrollment; the ``RootFlowEnabled``
        event)."""
        out, args = self._relay_signed(raw_transaction, {"postTask": "TaskPosted", "postTaskWithPermit": "TaskPosted",
                                                         "useRootFlow": "RootFlowEnabled"})
        out["task_id"] = to_json(args["p"]["taskId"] if "p" in args else args["taskId"])
        return out

    def enrollTrainer(self, raw_transaction: Any) -> dict[str, Any]:  # noqa: N802
        """Relay a trainer's signed ``enrollTrainer`` or ``enrollTrainerWithPermit`` transaction;
        the result carries ``task_id`` and the ``TrainerEnrolled`` event (index, shard, stake)."""
        out, args = self._relay_signed(raw_transaction, {"enrollTrainer": "TrainerEnrolled",
                                                         "enrollTrainerWithPermit": "TrainerEnrolled"})
        out["task_id"] = to_json(args["taskId"])
        return out

    def finalizeRound(self, raw_transaction: Any) -> dict[str, Any]:  # noqa: N802
        """Relay the elected syncer's signed ``commitRound`` transaction (the round committed by
        root, contracts/PROTOCOL.md §5); the result carries ``task_id``, ``round`` and the
        ``RoundCommitted`` event."""
        out, args = self._relay_signed(raw_transaction, {"commitRound": "RoundCommitted"})
        out["task_id"] = to_json(args["c"]["taskId"])
        out["round"] = int(args["c"]["round"])
        return out

    # -- writes: a trainer's signed submission, sent by the relayer -----------------------

    def submitGradient(self, task_id: Any, round: Any, fragment: Any, payload_root: Any,  # noqa: N802, A002
                       payload_sumsq: Any, cid: Any, payload_hash: Any, signature: Any,
                       trainer: Any = None) -> dict[str, Any]:
        """Check a trainer's EIP-712 signed submission (``SignedPayload`` + task, round, fragment;
        signed over the run's current weights root) and send it with ``submitOuterGradient`` from
        the relayer account: the reveal, after the round's commit phase, of the commitment the
        trainer sent itself in the phase (``commitSubmission``, the forced path). ``trainer``,
        when given, must be the address the signature recovers.

        Raises:
            RpcError: `NO_RELAYER`; `BAD_SIGNATURE` (does not recover, recovers to someone who is
                not an enrolled trainer of the run, or not to ``trainer``); `INVALID_PARAMS`.
            ChainRevert: the registry refuses it (``Registry__UnknownTask``, ``Registry__WrongRound``,
                ``Registry__CommitPhaseOpen``, ``Registry__NotCommitted``, ``Registry__DuplicateSubmission``,
                ``Registry__DeadlinePassed``...).
        """
        tid = P.task_id(task_id)
        rnd, frag = P.uint(round, "round", 32), P.uint(fragment, "fragment", 16)
        payload = SignedPayload(payload_root=P.hex_bytes(payload_root, "payload_root", 32),
                                payload_sumsq=P.uint(payload_sumsq, "payload_sumsq", 32),
                                cid=P.text(cid, "cid"),
                                payload_hash=P.hex_bytes(payload_hash, "payload_hash", 32),
                                signature=P.hex_bytes(signature, "signature", max_length=65))
        claimed = None
        if trainer is not None:
            from eth_utils import is_address, to_checksum_address

            if not isinstance(trainer, str) or not is_address(trainer):
                raise P.bad("trainer", "a 0x address", trainer)
            claimed = to_checksum_address(trainer)
        if self.relayer is None:
            raise RpcError(NO_RELAYER, "this gateway has no relayer account (keystore in its config): it cannot "
                                       "send submissions; submit on-chain yourself (`tenzro train submit-gradient`)")
        run = self.chain.get_run(tid)  # Registry__UnknownTask for a task never posted
        signer = self._recover(tid, rnd, frag, run.weights_root, payload)
        if claimed is not None and signer != claimed:
            raise RpcError(BAD_SIGNATURE, f"bad signature: it recovers to {signer}, not to the trainer {claimed}",
                           {"recovered": signer, "trainer": claimed})
        stats = self.chain.trainer_stats(tid, signer)
        if not stats.enrolled:
            raise RpcError(BAD_SIGNATURE,
                           f"bad signature: it recovers to {signer}, which is not an enrolled trainer of run 0x{tid.hex()} (signed by another "
                           f"key, over other fields, or over another round's weights root)",
                           {"recovered": signer, "weights_root": "0x" + run.weights_root.hex()})
        res = self.relayer.submit_outer_gradient(tid, rnd, frag, payload)
        return _tx_result(res, "GradientSubmitted", task_id="0x" + tid.hex(), round=rnd, fragment=frag,
                          trainer=signer, relayer=self.relayer.address)

    def _recover(self, tid: bytes, rnd: int, frag: int, base_root: bytes, payload: SignedPayload) -> str:
        typed = outer_gradient_typed_data(self.chain.chain_id, self.chain.registry.address, tid, rnd, frag,
                                          base_root, payload)
        try:
            return Account.recover_message(encode_typed_data(full_message=typed), signature=payload.signature)
        except Exception as exc:  # noqa: BLE001 - eth-keys raises several types for a malformed signature
            raise RpcError(BAD_SIGNATURE, f"bad signature: it does not recover to any address ({exc})",
                           {"signature_bytes": len(payload.signature)}) from None

"""The chain client's transaction layer: gas estimates that refuse what would revert, the
account's nonce (local counter under a lock, resynced after a nonce error), signing, sending,
replacing an unmined transaction with bumped fees under the fee cap, and receipts."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from web3.exceptions import ContractLogicError, TransactionNotFound, Web3RPCError

from tenzro_operator.chain.abi_decoding import revert_data, why_failed
from tenzro_operator.chain.deployment import REGISTRY
from tenzro_operator.chain.records import PendingTx, TxResult
from tenzro_operator.errors import (
    ChainError,
    ChainRevert,
    FeeCapExceeded,
    RpcUnavailable,
    TxFailed,
    TxReverted,
)

log = logging.getLogger("tenzro.chain")

FEE_BUMP = (9, 8)  # a replacement pays 9/8 of the fees it replaces (12.5 %; nodes require >= 10 %)
_NONCE_ERROR = re.compile(r"nonce too (low|high)|already known|replacement transaction underpriced|"
                          r"invalid nonce|known transaction", re.I)


class Transactions:
    """The transaction layer of `ChainClient`: estimates, nonces, sending, replacing, receipts."""

    def resync_nonce(self) -> None:
        """Forget the local nonce counter; the next transaction reads it from the node."""
        with self._nonce_lock:
            self._next_nonce = None

    def estimate(self, method: str, *args: Any, contract: str = REGISTRY, value: int = 0) -> int:
        """Gas estimate; raises `ChainRevert` (decoded) if the transaction would revert."""
        fn = self._fn(contract, method, *args)
        try:
            return self._rpc(f"estimate {method}", lambda: fn.estimate_gas({"from": self.address, "value": value}))
        except (ContractLogicError, Web3RPCError) as exc:
            data = revert_data(exc)
            if data is None and not isinstance(exc, ContractLogicError):
                raise ChainError(f"estimating {contract}.{method} failed: {exc}") from None
            err = self._errors.decode(data, f"{contract}.{method}")
            if self.metrics is not None:
                self.metrics.tx_failed(method, err.error_name)
            raise err from None

    def send(self, method: str, *args: Any, contract: str = REGISTRY, value: int = 0,
             gas: int | None = None) -> PendingTx:
        """Estimate (refusing reverts), apply the fee cap, sign with the next local nonce and
        broadcast; do not wait.

        A broadcast whose answer is lost is not signed again: when the node then says the nonce
        is used ("nonce too low", "already known") or stops answering, the signed hash is looked
        up first (`_tx_known`); if the node has it, that transaction is the one returned.

        Raises:
            ChainRevert: the estimate reverted (nothing is sent, no nonce is used).
            FeeCapExceeded: the network's fee is above ``max_fee_per_gas`` (nothing is sent).
            RpcUnavailable: the endpoint is down (and the node does not show the transaction).
        """
        if self.account is None:
            raise ChainError(f"cannot send {method}: this chain client has no account")
        gas_limit = gas or int(self.estimate(method, *args, contract=contract, value=value) * 1.25) + 20_000
        fn = self._fn(contract, method, *args)
        # Fees and calldata outside the lock; nonce, signature and broadcast inside it, so that
        # transactions reach the node in nonce order (a gap would stall an automining devnet).
        tx = self._rpc(f"build {method}", lambda: fn.build_transaction(
            {"from": self.address, "nonce": 0, "gas": gas_limit, "chainId": self.chain_id, "value": value}))
        tx = self._cap_fees(dict(tx), method)
        with self._nonce_lock:
            for attempt in range(2):
                if self._next_nonce is None:
                    self._next_nonce = self._rpc("eth_getTransactionCount", lambda: self.w3.eth.get_transaction_count(
                        self.address, "pending"))
                nonce = self._next_nonce
                signed = self.account.sign_transaction(dict(tx, nonce=nonce))
                tx_hash = "0x" + bytes(signed.hash).hex()
                pending = PendingTx(tx_hash, nonce, method, time.monotonic(), dict(tx, nonce=nonce))
                try:
                    self._rpc(f"send {method}", lambda: self.w3.eth.send_raw_transaction(signed.raw_transaction))
                except Web3RPCError as exc:
                    text = str(exc)
                    if "already known" in text.lower() or (_NONCE_ERROR.search(text) and self._tx_known(tx_hash)):
                        # our own broadcast got through earlier and its answer was lost: it is this one
                        log.warning("%s nonce=%d: the node already has tx %s (an earlier answer was lost); "
                                    "not sending it again", method, nonce, tx_hash)
                        self._next_nonce = nonce + 1
                        return self._sent(pending)
                    self._next_nonce = None
                    if _NONCE_ERROR.search(text) and attempt == 0:
                        log.warning("nonce %d for %s rejected (%s); resyncing from the node", nonce, method, text)
                        continue
                    if self.metrics is not None:
                        self.metrics.tx_failed(method, "send")
                    raise ChainError(f"sending {contract}.{method} failed: {text}") from exc
                except RpcUnavailable:
                    self._next_nonce = None
                    try:
                        known = self._tx_known(tx_hash)
                    except RpcUnavailable:
                        known = False
                    if known:
                        self._next_nonce = nonce + 1
                        return self._sent(pending)
                    log.warning("%s nonce=%d: broadcast of tx %s is uncertain (the endpoint stopped answering); "
                                "the next send re-reads the nonce from the node", method, nonce, tx_hash)
                    raise
                self._next_nonce = nonce + 1
                return self._sent(pending)
        raise ChainError(f"sending {contract}.{method} failed: nonce kept being rejected")  # pragma: no cover

    def _sent(self, pending: PendingTx) -> PendingTx:
        if self.metrics is not None:
            self.metrics.tx_sent(pending.method)
        log.debug("sent %s nonce=%d tx=%s", pending.method, pending.nonce, pending.tx_hash)
        return pending

    def _tx_known(self, tx_hash: str) -> bool:
        """True iff the node has the transaction ``tx_hash`` (pending or mined)."""
        try:
            return self._rpc("eth_getTransactionByHash", lambda: self.w3.eth.get_transaction(tx_hash)) is not None
        except TransactionNotFound:
            return False

    def _cap_fees(self, tx: dict[str, Any], method: str) -> dict[str, Any]:
        """Hold the fees of ``tx`` at or under ``max_fee_per_gas`` (wei per gas): an EIP-1559 fee
        above the cap is lowered to it while it still covers the latest base fee plus the tip.

        Raises:
            FeeCapExceeded: the latest base fee plus the tip (or the legacy gas price) is above the cap.
        """
        cap = self.max_fee_per_gas
        if cap is None:
            return tx
        if "maxFeePerGas" in tx:
            if int(tx["maxFeePerGas"]) <= cap:
                return tx
            base = int(self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block("latest")).get(
                "baseFeePerGas", 0))
            tip = min(int(tx.get("maxPriorityFeePerGas", 0)), cap)
            if base + tip > cap:
                raise FeeCapExceeded(f"{method}: the network asks {base + tip} wei/gas (base fee {base} + tip "
                                     f"{tip}), above the cap max_fee_per_gas={cap}; not sent")
            return dict(tx, maxFeePerGas=cap, maxPriorityFeePerGas=tip)
        if int(tx.get("gasPrice", 0)) > cap:
            raise FeeCapExceeded(f"{method}: gas price {tx['gasPrice']} wei above the cap max_fee_per_gas={cap}; "
                                 "not sent")
        return tx

    def _bumped(self, tx: dict[str, Any]) -> dict[str, Any] | None:
        """``tx`` with every fee raised by `FEE_BUMP` (+1 wei), or None when the cap leaves no room
        for a replacement (a node needs >= 10 % more to take it)."""
        num, den = FEE_BUMP
        keys = ("maxFeePerGas", "maxPriorityFeePerGas") if "maxFeePerGas" in tx else ("gasPrice",)
        out = dict(tx)
        for k in keys:
            out[k] = int(tx[k]) * num // den + 1
        cap = self.max_fee_per_gas
        if cap is not None:
            top = "maxFeePerGas" if "maxFeePerGas" in tx else "gasPrice"
            if out[top] > cap:
                out[top] = cap
                if out[top] * 10 < int(tx[top]) * 11:
                    return None
                if "maxPriorityFeePerGas" in out:
                    out["maxPriorityFeePerGas"] = min(out["maxPriorityFeePerGas"], cap)
        return out

    def _replace(self, pending: PendingTx) -> bool:
        """Broadcast a fee-bumped copy of ``pending`` on its nonce; True if one went out."""
        bumped = self._bumped(pending.tx) if pending.tx else None
        if bumped is None:
            return False
        signed = self.account.sign_transaction(bumped)
        new_hash = "0x" + bytes(signed.hash).hex()
        try:
            self._rpc(f"replace {pending.method}", lambda: self.w3.eth.send_raw_transaction(signed.raw_transaction))
        except Web3RPCError as exc:  # mined meanwhile ("nonce too low"), or the node wants more: keep polling
            log.info("replacement of %s nonce=%d not taken: %s", pending.method, pending.nonce, exc)
            return False
        pending.tx = bumped
        pending.hashes.append(new_hash)
        pending.tx_hash = new_hash
        log.warning("%s nonce=%d not mined after %.0f s: replaced by tx %s with fees x%d/%d (%s)", pending.method,
                    pending.nonce, self.replace_after_s, new_hash, *FEE_BUMP,
                    ", ".join(f"{k}={bumped[k]}" for k in ("maxFeePerGas", "maxPriorityFeePerGas", "gasPrice")
                              if k in bumped))
        return True

    def _receipt_of(self, pending: PendingTx) -> tuple[str, Any] | None:
        """``(hash, receipt)`` of whichever broadcast of ``pending`` was mined, else None."""
        for h in list(pending.hashes):
            try:
                rcpt = self._rpc("eth_getTransactionReceipt", lambda h=h: self.w3.eth.get_transaction_receipt(h))
            except TransactionNotFound:
                continue
            if rcpt is not None:
                return h, rcpt
        return None

    def wait(self, pending: PendingTx, timeout_s: float | None = None) -> TxResult:
        """Poll for the receipt (bounded; ``receipt_timeout_s`` by default) and decode its events.
        Every ``replace_after_s`` seconds without a receipt the transaction is replaced on the same
        nonce with bumped fees (`_bumped`); whichever broadcast is mined is the result.

        Raises:
            TxReverted: mined with status 0, the reason decoded (a `ChainRevert` and a `TxFailed`).
            TxFailed: no receipt within the timeout (the nonce counter is resynced), or status 0
                with no recoverable reason.
        """
        timeout = self.receipt_timeout_s if timeout_s is None else timeout_s
        start = last_broadcast = time.monotonic()
        while True:
            found = self._receipt_of(pending)
            if found is not None:
                break
            now = time.monotonic()
            if now - start > timeout:
                self.resync_nonce()
                if self.metrics is not None:
                    self.metrics.tx_failed(pending.method, "timeout")
                raise TxFailed(f"{pending.method} tx {pending.tx_hash} (nonce {pending.nonce}) was not mined within "
                               f"{timeout:.0f} s")
            if self.replace_after_s is not None and now - last_broadcast >= self.replace_after_s \
                    and self.account is not None:
                self._replace(pending)
                last_broadcast = now
            time.sleep(self.poll_s)
        tx_hash, rcpt = found
        pending.tx_hash = tx_hash
        result = TxResult(tx_hash=tx_hash, block_number=rcpt["blockNumber"], gas_used=rcpt["gasUsed"],
                          status=rcpt["status"], method=pending.method, events=self.decode_logs(rcpt["logs"]))
        if rcpt["status"] != 1:
            if self.metrics is not None:
                self.metrics.tx_failed(pending.method, "reverted")
            reason = self._replay_revert(pending, result.block_number)
            if reason is not None:
                raise TxReverted(reason.error_name, reason.args_, reason.function, reason.data, tx_hash=tx_hash,
                                 block=result.block_number)
            limit = pending.tx.get("gas")
            why = (f"it used all its gas ({result.gas_used}): out of gas" if limit and result.gas_used >= limit
                   else "the reason could not be recovered")
            raise TxFailed(f"{pending.method} tx {tx_hash} reverted on-chain (block {result.block_number}); {why}")
        return result

    def _replay_revert(self, pending: PendingTx, block: int) -> ChainRevert | None:
        """The reason a mined transaction reverted: from the node's trace of the transaction itself
        (``debug_traceTransaction``, exact: its own block's time and the transactions before it in
        the block) where the node serves one (anvil, geth, reth), else by re-running it as a call
        on the state before its block (exact only when nothing in its block came first and nothing
        depended on the block's time). None when it can not be recovered: the node has no trace
        and the replay succeeds, or it ran out of gas (no revert data), or the node does not answer."""
        traced = self._traced_revert(pending)
        if traced is not None:
            return traced
        try:
            tx = self._rpc("eth_getTransactionByHash", lambda: self.w3.eth.get_transaction(pending.tx_hash))
            self._rpc("eth_call replay", lambda: self.w3.eth.call(
                {"from": tx["from"], "to": tx["to"], "data": tx["input"], "value": tx["value"], "gas": tx["gas"]},
                block_identifier=max(0, block - 1)))
        except (ContractLogicError, Web3RPCError) as exc:
            data = revert_data(exc)
            return self._errors.decode(data, pending.method) if data is not None else None
        except (ChainError, TransactionNotFound) as exc:
            log.warning("could not replay reverted tx %s for its reason: %s", pending.tx_hash, why_failed(exc))
            return None
        return None

    def _traced_revert(self, pending: PendingTx) -> ChainRevert | None:
        """The revert data of a mined transaction from ``debug_traceTransaction``'s call tracer,
        decoded; None when the node serves no trace or the trace carries no revert data."""
        try:
            answer = self._rpc("debug_traceTransaction", lambda: self.w3.provider.make_request(
                "debug_traceTransaction", [pending.tx_hash, {"tracer": "callTracer"}]))
        except (ChainError, Web3RPCError, ValueError) as exc:
            log.debug("no trace of reverted tx %s: %s", pending.tx_hash, why_failed(exc))
            return None
        output = (answer.get("result") or {}).get("output") if isinstance(answer, dict) else None
        if not isinstance(output, str) or len(output) < 10:
            return None
        return self._errors.decode(output, pending.method)

    def transact(self, method: str, *args: Any, contract: str = REGISTRY, value: int = 0,
                 gas: int | None = None) -> TxResult:
        """`send` then `wait`."""
        return self.wait(self.send(method, *args, contract=contract, value=value, gas=gas))

"""Relaying a user's signed transaction: simulate it, broadcast it as is, wait for its receipt.

The gateway signs nothing here: the bytes the user signed go to ``eth_sendRawTransaction``
unchanged. Before that, unless ``preflight`` is off, the call is simulated (``eth_call`` from the
sender, with the transaction's gas limit, on the latest block): a transaction the registry would
refuse is answered with the decoded custom error and never broadcast, so the user pays no gas for
it. A transaction that reverts once mined (the state moved between the simulation and its block)
is answered the same way, with its hash and block. Sending the same signed bytes twice is safe:
a node that already has them ("already known", "nonce too low" for a mined one) is not an error,
the gateway waits for that transaction's receipt.

Before anything else the nonce is checked against the sender's next one (``eth_getTransactionCount``
on ``pending``): a transaction at a later nonce would wait in the node's queue for a gap nobody
fills, and the gateway with it, for ``receipt_timeout_s`` of a write worker, at no gas to its
sender. So a nonce above the next one is refused at once (`NONCE_GAP`), and so is one below it
unless the node already has these very bytes (a retry; a replacement goes to a node directly).
"""

from __future__ import annotations

import logging
import time

from web3.exceptions import ContractLogicError, Web3RPCError

from tenzro_operator.chain import ChainClient, ErrorDecoder, PendingTx, TxResult
from tenzro_operator.chain.abi_decoding import revert_data
from tenzro_operator.gateway.jsonrpc import NODE_REJECTED, NONCE_GAP, RpcError
from tenzro_operator.gateway.rawtx import DecodedTx

__all__ = ["Relay"]

log = logging.getLogger("tenzro.gateway")


class Relay:
    """Broadcasts users' signed transactions through a read-only `ChainClient`.

    Args:
        chain: the gateway's chain client (no account needed).
        preflight: simulate first and refuse what would revert (nothing broadcast).
        receipt_timeout_s: how long `relay` waits for the receipt, seconds.
    """

    def __init__(self, chain: ChainClient, preflight: bool = True, receipt_timeout_s: float = 60.0) -> None:
        self.chain, self.preflight, self.receipt_timeout_s = chain, preflight, receipt_timeout_s
        self._errors = ErrorDecoder(rec.abi for rec in chain.deployment.contracts.values())

    def simulate(self, tx: DecodedTx, function: str) -> None:
        """``eth_call`` the transaction as its sender on the latest block.

        Raises:
            ChainRevert: it would revert (the custom error decoded by name, its arguments by name).
            RpcError: `NODE_REJECTED` when the node refuses the call without revert data
                (e.g. out of gas at the transaction's gas limit).
            RpcUnavailable: the node does not answer.
        """
        call = {"from": tx.sender, "to": tx.to, "data": "0x" + tx.data.hex(), "value": tx.value, "gas": tx.gas}
        try:
            self.chain._rpc(f"eth_call {function}", lambda: self.chain.w3.eth.call(call, "latest"))
        except (ContractLogicError, Web3RPCError) as exc:
            data = revert_data(exc)
            if data is None and not isinstance(exc, ContractLogicError):
                raise RpcError(NODE_REJECTED, f"the node refuses the simulated {function}: {exc}") from None
            raise self._errors.decode(data, f"TrainingRegistry.{function}") from None

    def relay(self, tx: DecodedTx, function: str) -> TxResult:
        """Simulate (with ``preflight``), broadcast ``tx.raw`` and wait for the receipt.

        Returns:
            The mined `TxResult` (status 1, events decoded).
        Raises:
            ChainRevert: refused by the simulation (nothing broadcast), or `TxReverted` (a
                ChainRevert with ``tx_hash`` and ``block``) when mined with status 0.
            RpcError: `NONCE_GAP` (`check_nonce`); `NODE_REJECTED` when the node refuses the
                broadcast (funds, fees).
            TxFailed: no receipt within ``receipt_timeout_s``.
            RpcUnavailable: the node does not answer.
        """
        self.check_nonce(tx)
        if self.preflight:
            self.simulate(tx, function)
        try:
            self.chain._rpc(f"eth_sendRawTransaction {function}",
                            lambda: self.chain.w3.eth.send_raw_transaction(tx.raw))
            log.info("relayed %s from %s: tx %s", function, tx.sender, tx.tx_hash)
        except Web3RPCError as exc:
            if not self._known(tx.tx_hash):
                raise RpcError(NODE_REJECTED, f"the node refused the transaction: {_message(exc)}",
                               {"tx_hash": tx.tx_hash}) from None
            log.info("%s tx %s was already sent; waiting for its receipt", function, tx.tx_hash)
        return self.chain.wait(PendingTx(tx.tx_hash, tx.nonce, function, time.monotonic()),
                               timeout_s=self.receipt_timeout_s)

    def check_nonce(self, tx: DecodedTx) -> None:
        """Refuse ``tx`` unless its nonce is the sender's next one (``pending`` count), or it is
        below that and the node already has this very transaction (a retry of a sent one).

        Raises:
            RpcError: `NONCE_GAP` with ``data = {nonce, next_nonce, sender}``.
            RpcUnavailable: the node does not answer.
        """
        sender = tx.sender
        nxt = self.chain._rpc("eth_getTransactionCount",
                              lambda: self.chain.w3.eth.get_transaction_count(sender, "pending"))
        if tx.nonce == nxt or (tx.nonce < nxt and self._known(tx.tx_hash)):
            return
        if tx.nonce > nxt:
            why = (f"nonce gap: the transaction's nonce {tx.nonce} is above {sender}'s next nonce {nxt}; "
                   f"send the transactions of nonces {nxt}..{tx.nonce - 1} first")
        else:
            why = (f"nonce {tx.nonce} of {sender} is already used (the next one is {nxt}); sign the "
                   "transaction again at the next nonce")
        raise RpcError(NONCE_GAP, why, {"nonce": tx.nonce, "next_nonce": nxt, "sender": sender})

    def _known(self, tx_hash: str) -> bool:
        from web3.exceptions import TransactionNotFound

        try:
            return self.chain._rpc("eth_getTransactionByHash",
                                   lambda: self.chain.w3.eth.get_transaction(tx_hash)) is not None
        except TransactionNotFound:
            return False


def _message(exc: Web3RPCError) -> str:
    rpc = getattr(exc, "rpc_response", None) or {}
    msg = (rpc.get("error") or {}).get("message") if isinstance(rpc, dict) else None
    return str(msg or exc)[:300]


"""Signed raw transactions a user hands the gateway: decode them, and check that one is a call of
the expected registry function on this chain before it is relayed.

Accepted encodings: legacy with EIP-155 replay protection (a chain id in ``v``), EIP-2930 (type 1)
and EIP-1559 (type 2). A legacy transaction without a chain id could be replayed on any chain and
is refused; blob (type 3) and set-code (type 4) transactions are refused too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_utils import keccak, to_checksum_address
from hexbytes import HexBytes

from tenzro_operator.gateway.jsonrpc import INVALID_PARAMS, TX_REJECTED, RpcError

__all__ = ["DecodedTx", "decode_raw_tx", "check_registry_call"]

MAX_RAW_TX_BYTES = 128 * 1024  # the largest signed transaction accepted (a postTask is a few KiB)


@dataclass(frozen=True)
class DecodedTx:
    """A signed transaction: its bytes, hash (0x-hex), sender (recovered, checksummed), chain id,
    nonce, recipient (checksummed; None for a contract creation), value (wei), gas limit and
    calldata."""

    raw: bytes
    tx_hash: str
    sender: str
    chain_id: int | None
    nonce: int
    to: str | None
    value: int
    gas: int
    data: bytes


def decode_raw_tx(raw: bytes, name: str = "raw_transaction") -> DecodedTx:
    """Decode a signed transaction and recover its sender.

    Raises:
        RpcError: `INVALID_PARAMS` when the bytes are not a signed transaction of an accepted type
            (the parameter ``name`` is named in the message).
    """
    if not raw:
        raise RpcError(INVALID_PARAMS, f"invalid params: {name} is empty", {"param": name})
    if len(raw) > MAX_RAW_TX_BYTES:
        raise RpcError(INVALID_PARAMS, f"invalid params: {name} is {len(raw)} bytes, over {MAX_RAW_TX_BYTES}",
                       {"param": name})
    try:
        fields = _fields(raw)
        sender = Account.recover_transaction(raw)
    except RpcError:
        raise
    except Exception as exc:  # noqa: BLE001 - rlp / eth-account raise many types for malformed bytes
        raise RpcError(INVALID_PARAMS, f"invalid params: {name} is not a signed transaction: {exc}",
                       {"param": name}) from None
    to = fields.get("to")
    return DecodedTx(raw=raw, tx_hash="0x" + keccak(raw).hex(), sender=to_checksum_address(sender),
                     chain_id=fields["chain_id"], nonce=int(fields["nonce"]),
                     to=to_checksum_address(to) if to else None, value=int(fields["value"]),
                     gas=int(fields["gas"]), data=bytes(fields["data"]))


def _fields(raw: bytes) -> dict[str, Any]:
    if raw[0] >= 0xC0:  # an RLP list: a legacy transaction
        from eth_account._utils.legacy_transactions import Transaction

        d = Transaction.from_bytes(raw).as_dict()
        v = int(d["v"])
        if v < 35:
            raise RpcError(INVALID_PARAMS, "invalid params: a legacy transaction without EIP-155 replay protection "
                                           "(no chain id in v) is not accepted", {"param": "raw_transaction"})
        return {"chain_id": (v - 35) // 2, "nonce": d["nonce"], "to": d["to"], "value": d["value"],
                "gas": d["gas"], "data": d["data"]}
    if raw[0] not in (1, 2):
        raise RpcError(INVALID_PARAMS, f"invalid params: transaction type {raw[0]} is not accepted (legacy, 1 and 2 "
                                       "are)", {"param": "raw_transaction"})
    from eth_account.typed_transactions import TypedTransaction

    d = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
    return {"chain_id": int(d["chainId"]), "nonce": d["nonce"], "to": d.get("to"), "value": d["value"],
            "gas": d["gas"], "data": d["data"]}


def check_registry_call(tx: DecodedTx, chain, allowed: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """Check that ``tx`` calls one of the registry functions ``allowed`` on ``chain``'s registry
    (a `tenzro_operator.chain.ChainClient`), on its chain id, with no value attached.

    Returns:
        ``(function name, decoded arguments by ABI name)``.
    Raises:
        RpcError: `TX_REJECTED`; ``data.reason`` is ``"chain_id"``, ``"to"``, ``"value"`` or
            ``"function"``, with ``expected`` and ``got``.
    """
    registry = chain.registry
    if tx.chain_id != chain.chain_id:
        raise _reject("chain_id", f"it is signed for chain {tx.chain_id}, this gateway serves chain {chain.chain_id}",
                      chain.chain_id, tx.chain_id)
    if tx.to is None or tx.to != registry.address:
        raise _reject("to", f"it is sent to {tx.to or 'no address (a contract creation)'}, not to this chain's "
                            f"TrainingRegistry {registry.address}", registry.address, tx.to)
    if tx.value:
        raise _reject("value", f"it carries {tx.value} wei; registry calls take none", 0, str(tx.value))
    selector = "0x" + tx.data[:4].hex()
    try:
        fn, args = registry.decode_function_input(tx.data)
    except Exception:  # noqa: BLE001 - web3 raises ValueError / decoding errors for unknown or bad calldata
        fn, args = None, None
    name = fn.fn_name if fn is not None else None
    if name not in allowed:
        what = f"calls {name}" if name else f"calls selector {selector}, which is no registry function's " \
                                             f"(or its arguments do not decode)"
        raise _reject("function", f"it {what}; expected {' or '.join(allowed)}", list(allowed), name or selector)
    return name, dict(args)


def _reject(reason: str, why: str, expected: Any, got: Any) -> RpcError:
    return RpcError(TX_REJECTED, f"transaction rejected: {why}", {"reason": reason, "expected": expected, "got": got})

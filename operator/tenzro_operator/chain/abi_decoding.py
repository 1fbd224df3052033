"""Decoding what a node answers: custom errors by name from every deployed ABI
(`ErrorDecoder` -> `ChainRevert`), the revert data and the cause inside web3's exceptions, and
outputs and event arguments by ABI name."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address
from eth_utils.abi import abi_to_signature, get_abi_input_types
from web3.exceptions import Web3RPCError

from tenzro_operator.errors import ChainRevert

# ----------------------------------------------------------------------------- errors from ABIs


class ErrorDecoder:
    """Maps 4-byte selectors of every custom error in a set of ABIs to (name, input names, types)."""

    BUILTIN = {
        bytes.fromhex("08c379a0"): ("Error", ["message"], ["string"]),
        bytes.fromhex("4e487b71"): ("Panic", ["code"], ["uint256"]),
    }

    def __init__(self, abis: Iterable[list[dict[str, Any]]]) -> None:
        self.errors: dict[bytes, tuple[str, list[str], list[str]]] = dict(self.BUILTIN)
        for abi in abis:
            for item in abi:
                if item.get("type") != "error":
                    continue
                types = list(get_abi_input_types(item))
                sel = keccak(text=abi_to_signature(item))[:4]
                self.errors[sel] = (item["name"], [i.get("name") or f"arg{n}" for n, i in
                                                   enumerate(item.get("inputs", []))], types)

    def decode(self, data: bytes | str | None, function: str = "") -> ChainRevert:
        if isinstance(data, str):
            s = data[2:] if data.startswith("0x") else data
            try:
                data = bytes.fromhex(s)
            except ValueError:
                return ChainRevert("<unknown>", (data,), function)
        data = data or b""
        if len(data) < 4:
            return ChainRevert("<no reason>" if not data else "<unknown>", (), function, data)
        entry = self.errors.get(data[:4])
        if entry is None:
            return ChainRevert("<unknown>", ("0x" + data.hex(),), function, data)
        name, names, types = entry
        try:
            values = abi_decode(types, data[4:])
        except Exception:  # noqa: BLE001 - malformed revert data: report raw
            return ChainRevert(name, ("0x" + data[4:].hex(),), function, data)
        values = [to_checksum_address(v) if t == "address" else v for t, v in zip(types, values)]
        return ChainRevert(name, dict(zip(names, values)), function, data)


def _os_cause(exc: BaseException) -> OSError | None:
    """The operating system's error under a client library's wrapping (requests -> urllib3's
    MaxRetryError -> NewConnectionError -> ConnectionRefusedError), if there is one."""
    seen, cur = set(), exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.strerror:
            return cur
        reason = getattr(cur, "reason", None)
        cur = reason if isinstance(reason, BaseException) else (cur.__cause__ or cur.__context__)
    return None


def why_failed(exc: BaseException | None) -> str:
    """``"TypeName: message"`` for logs and error messages: the operating system's error when a
    library wraps one (``ConnectionRefusedError: Connection refused``, not 400 characters of urllib3),
    else the message cut to 200 characters."""
    if exc is None:
        return "?"
    root = _os_cause(exc)
    if root is not None:
        return f"{type(root).__name__}: {root.strerror}"
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def revert_data(exc: Exception) -> bytes | str | None:
    data = getattr(exc, "data", None)
    if isinstance(data, dict):  # some nodes nest it
        data = data.get("data")
    if data is None and isinstance(exc, Web3RPCError):
        rpc = getattr(exc, "rpc_response", None) or {}
        data = (rpc.get("error") or {}).get("data")
        if isinstance(data, dict):
            data = data.get("data")
    return data


def to_named(abi_params: list[dict[str, Any]], values: Sequence[Any]) -> dict[str, Any]:
    """Tuple values of ABI outputs/components -> dict by name, recursively (web3 returns tuples)."""
    out = {}
    for i, (p, v) in enumerate(zip(abi_params, values)):
        out[p.get("name") or f"out{i}"] = _named_value(p, v)
    return out


def _named_value(p: dict[str, Any], v: Any) -> Any:
    t = p.get("type", "")
    if t == "tuple" and isinstance(v, (tuple, list)):
        return to_named(p["components"], v)
    if t.startswith("tuple[") and isinstance(v, (tuple, list)):
        return [to_named(p["components"], x) if isinstance(x, (tuple, list)) else x for x in v]
    if isinstance(v, (tuple, list)):
        return list(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return v


def normalize_event_args(args: Any) -> Any:
    if hasattr(args, "items"):
        return {k: normalize_event_args(v) for k, v in args.items()}
    if isinstance(args, (list, tuple)):
        return [normalize_event_args(x) for x in args]
    if isinstance(args, (bytes, bytearray)):
        return bytes(args)
    return args

"""Checks and conversions of the gateway's params: each returns the Python value or raises
`RpcError` (`INVALID_PARAMS`) naming the parameter and what was expected."""

from __future__ import annotations

import re
from typing import Any

from tenzro_operator.gateway.jsonrpc import INVALID_PARAMS, RpcError

_HEX = re.compile(r"0x([0-9a-fA-F]{2})*")


def bad(name: str, expected: str, got: Any) -> RpcError:
    """The `INVALID_PARAMS` error of parameter ``name`` (``got`` shown, cut to 80 characters)."""
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return RpcError(INVALID_PARAMS, f"invalid params: {name} must be {expected}, got {shown}",
                    {"param": name, "expected": expected})


def task_id(value: Any, name: str = "task_id") -> bytes:
    """A task id: ``0x`` + 64 hex digits as is, or the spec's ``task_id`` name (hashed, as the CLI's
    ``--task-id``: `tenzro_operator.spec.task_id_argument`). Returns 32 bytes."""
    from tenzro_operator.errors import SpecError
    from tenzro_operator.spec import task_id_argument

    if not isinstance(value, str) or not value:
        raise bad(name, "the spec's task_id name or 0x + 64 hex digits", value)
    try:
        return task_id_argument(value)
    except SpecError as exc:
        raise RpcError(INVALID_PARAMS, f"invalid params: {name}: {exc.reason}", {"param": name}) from None


def uint(value: Any, name: str, bits: int = 256) -> int:
    """An unsigned integer below ``2**bits``: a JSON integer, or a string (decimal or ``0x`` hex)."""
    n: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and re.fullmatch(r"[0-9]{1,78}|0x[0-9a-fA-F]{1,64}", value):
        n = int(value, 0) if value.startswith("0x") else int(value)
    if n is None or not 0 <= n < 2**bits:
        raise bad(name, f"an unsigned integer below 2**{bits} (a number, or a decimal or 0x-hex string)", value)
    return n


def hex_bytes(value: Any, name: str, length: int | None = None, max_length: int | None = None) -> bytes:
    """``0x``-hex text as bytes: exactly ``length`` bytes, or at most ``max_length``."""
    what = f"0x + {2 * length} hex digits" if length else "0x-prefixed hex (an even number of digits)"
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise bad(name, what, value)
    raw = bytes.fromhex(value[2:])
    if length is not None and len(raw) != length:
        raise bad(name, what, value)
    if max_length is not None and len(raw) > max_length:
        raise bad(name, f"at most {max_length} bytes of 0x-hex", f"{len(raw)} bytes")
    return raw


def text(value: Any, name: str, max_length: int = 256) -> str:
    """A non-empty string of at most ``max_length`` characters."""
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise bad(name, f"a non-empty string of at most {max_length} characters", value)
    return value


def flag(value: Any, name: str) -> bool:
    """A JSON boolean."""
    if not isinstance(value, bool):
        raise bad(name, "true or false", value)
    return value

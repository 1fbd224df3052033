"""Task ids: the spec's ``task_id`` string and the on-chain ``bytes32`` it names."""

from __future__ import annotations

import re

from tenzro_operator.errors import SpecError

HEX32_RE = re.compile(r"^0x[0-9a-fA-F]{64}$")


def task_id_bytes32(task_id: str | bytes) -> bytes:
    """The on-chain ``bytes32`` of a task id.

    ``0x`` + 64 hex digits is taken as is; any other string is hashed:
    keccak256 of its UTF-8 bytes (the rule of ``contracts/RECEIPT.md``). 32 raw bytes
    pass through.

    Raises:
        SpecError: empty id, or raw bytes that are not 32 long.
    """
    if isinstance(task_id, (bytes, bytearray)):
        if len(task_id) != 32:
            raise SpecError("task_id", f"raw task id must be 32 bytes, got {len(task_id)}")
        return bytes(task_id)
    if not task_id:
        raise SpecError("task_id", "empty task id")
    if HEX32_RE.match(task_id):
        return bytes.fromhex(task_id[2:])
    from eth_utils import keccak

    return keccak(text=task_id)


def task_id_argument(value: str) -> bytes:
    """A task id a person typed (``--task-id``, the gateway's ``task_id``): the spec's task_id
    string (hashed, `task_id_bytes32`), or ``0x`` + 64 hex digits as is.

    Raises:
        SpecError: an empty id, or one that looks like hex but is not 32 bytes (refused rather
            than hashed as a name: a truncated id would name another run).
    """
    if re.fullmatch(r"0x[0-9a-fA-F]*", value) and len(value) != 66:
        raise SpecError("task_id", f"{value!r} looks like a hex task id but has {len(value) - 2} hex digits, "
                                   f"not 64 (pass the full 0x id, or the spec's task_id name)")
    return task_id_bytes32(value)

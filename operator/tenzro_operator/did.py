"""Decentralized identifiers as a trainer enrolls with them (W3C DID Core 1.0, section 3.1, "DID Syntax").

``did:<method>:<method-specific-id>``: the method in lowercase letters and digits, the id one or more
``:``-separated segments of letters, digits, ``.``, ``-``, ``_`` and ``%XX`` escapes (the last segment
not empty). Tenzro machines use ``did:tenzro:machine:<name>``. The DID is stored on-chain as a string,
so its length is capped (`MAX_DID_BYTES`, paid in calldata and storage gas by the trainer).
"""

from __future__ import annotations

import re

MAX_DID_BYTES = 128

_DID = re.compile(r"did:[a-z0-9]+:(?:(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})*:)*(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})+")


def check_did(value: str) -> str:
    """``value`` if it is a DID (see the module docstring), else ValueError saying what a DID looks like.

    Raises:
        ValueError: not DID syntax, or longer than `MAX_DID_BYTES` bytes (UTF-8).
    """
    if len(value.encode()) > MAX_DID_BYTES:
        raise ValueError(f"a DID is at most {MAX_DID_BYTES} bytes, got {len(value.encode())}")
    if not _DID.fullmatch(value):
        raise ValueError(f"{value!r} is not a DID: expected did:<method>:<id>, e.g. did:tenzro:machine:gpu-host-1")
    return value

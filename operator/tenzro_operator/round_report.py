"""The report of one round's check (`tenzro_operator.root_check.RootRoundChecker`): every value
that differs from its commitment (`Mismatch`), with the round's counts (`RoundReport`). Shared by
the sealed-run replay (`tenzro_operator.replay`) and the live watcher
(`tenzro_operator.roles.watcher`); imports nothing of either.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Mismatch", "RoundReport", "show"]


def show(v: Any) -> str:
    """Hex for bytes32 and addresses; longer byte strings as their length and sha256."""
    if isinstance(v, (bytes, bytearray)):
        if len(v) > 32:
            return f"{len(v)} bytes with sha256 0x{hashlib.sha256(v).hexdigest()}"
        return "0x" + bytes(v).hex()
    return str(v)


_FRAGMENT = re.compile(r"\bfragment (\d+)\b")


@dataclass(frozen=True)
class Mismatch:
    """One check that failed: ``what`` names the value and where (round, fragment, trainer).
    ``fragment`` is the fragment ``what`` names (None: the check is about no single fragment)."""

    what: str
    expected: str
    got: str
    round: int | None = None

    @property
    def fragment(self) -> int | None:
        m = _FRAGMENT.search(self.what)
        return int(m.group(1)) if m else None

    def __str__(self) -> str:
        return f"{self.what}: expected {self.expected}, got {self.got}"

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "expected": self.expected, "got": self.got, "round": self.round,
                "fragment": self.fragment}


@dataclass
class RoundReport:
    """The replay of one round. ``seconds`` is wall time (fetch + decode + aggregate + encode)."""

    round: int
    accepted: int = 0
    payloads_checked: int = 0
    payload_bytes: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "ok": self.ok, "accepted": self.accepted,
                "payloads_checked": self.payloads_checked, "payload_bytes": self.payload_bytes,
                "seconds": round(self.seconds, 3), "mismatches": [m.to_json() for m in self.mismatches],
                "notes": list(self.notes)}

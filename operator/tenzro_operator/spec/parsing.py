"""Reading a task spec (a dict, JSON text, a file, the bytes pinned to IPFS) into a validated
`TaskSpec`, with every error naming its field path; and the spec's canonical bytes and hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tenzro_operator.errors import SpecError
from tenzro_operator.spec.model import _METADATA_MODELS, TaskSpec


def _loc(loc: tuple) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("TrimmedMeanRule", "KrumRule") or str(item).startswith(("literal[", "function-")):
            continue  # union branch names pydantic inserts: not a field
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "<root>"


def _spec_error(exc: ValidationError, source: str | None) -> SpecError:
    errors = []
    for e in exc.errors():
        msg = e["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        path = _loc(tuple(e["loc"]))
        if msg.startswith("@") and ": " in msg:  # a model-level check naming its field
            at, msg = msg[1:].split(": ", 1)
            path = at
        errors.append((path, msg))
    # For a union, report the most specific branch first (the longest path).
    errors.sort(key=lambda pm: -len(pm[0]))
    path, msg = errors[0]
    return SpecError(path, msg, source=source, errors=errors)


def parse_spec(data: dict[str, Any] | str | bytes, source: str | None = None) -> TaskSpec:
    """Validate a spec given as a dict or JSON text.

    Raises:
        SpecError: the first problem with its field path (all of them in ``.errors``).
    """
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data, parse_constant=_reject_constant)
        except (json.JSONDecodeError, ValueError) as exc:
            raise SpecError("<root>", f"not valid JSON: {exc}", source=source) from exc
    if not isinstance(data, dict):
        raise SpecError("<root>", f"a task spec is a JSON object, got {type(data).__name__}", source=source)
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    try:
        for key, model in _METADATA_MODELS.items():
            if metadata.get(key) is None:
                continue
            try:
                model.model_validate(metadata[key])
            except ValidationError as exc:
                err = _spec_error(exc, source)
                where = [f"metadata.{key}" + ("" if p == "<root>" else f".{p}") for p, _ in err.errors]
                raise SpecError(where[0], err.reason, source=source,
                                errors=list(zip(where, (m for _, m in err.errors)))) from exc
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise _spec_error(exc, source) from exc


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not allowed in a task spec")


def load_spec(path: str | Path) -> TaskSpec:
    """Read and validate a task spec JSON file.

    Raises:
        SpecError: missing/unreadable file, bad JSON, or a field that fails validation
            (the message names the file and the field path).
    """
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise SpecError("<file>", f"cannot read: {exc.strerror or exc}", source=str(p)) from exc
    return parse_spec(text, source=str(p))


def spec_from_bytes(data: bytes, expected_hash: bytes | None = None, source: str | None = None) -> TaskSpec:
    """Parse a spec fetched from IPFS (its canonical bytes) and check it against the on-chain
    ``specHash`` (32 bytes) when given.

    Raises:
        SpecError: invalid spec, bytes that are not canonical, or a hash mismatch.
    """
    spec = parse_spec(data, source=source)
    if expected_hash is not None:
        got = hashlib.sha256(data).digest()
        if got != expected_hash:
            raise SpecError("<root>", f"sha256 of the fetched spec is 0x{got.hex()}, the chain says "
                            f"0x{bytes(expected_hash).hex()}", source=source)
        if canonical_json(spec) != data:
            raise SpecError("<root>", "the fetched spec bytes are not in canonical form", source=source)
    return spec


def canonical_json(spec: TaskSpec | dict[str, Any]) -> bytes:
    """Canonical bytes of a spec: sorted keys, separators ``(",", ":")``, UTF-8, no NaN/Infinity.

    These are the bytes pinned to IPFS and hashed into ``spec_hash``. A dict is
    validated first (`parse_spec`).
    """
    if not isinstance(spec, TaskSpec):
        spec = parse_spec(spec)
    try:
        text = json.dumps(spec.to_json_obj(), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except ValueError as exc:
        raise SpecError("metadata", f"contains a non-finite number: {exc}") from exc
    return text.encode("utf-8")


def spec_hash(spec: TaskSpec | dict[str, Any]) -> bytes:
    """``sha256(canonical_json(spec))``: 32 bytes, the ``specHash`` stored on-chain."""
    return hashlib.sha256(canonical_json(spec)).digest()

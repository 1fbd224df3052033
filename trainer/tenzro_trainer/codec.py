"""Payload codec: fragment tensors <-> safetensors bytes (https://github.com/huggingface/safetensors).

A payload is one fragment's tensors (weights or a pseudo-gradient) with string metadata
``task, round, fragment, trainer, dtype, kind`` in the safetensors header. Encoding is
deterministic (a canonical safetensors header: sorted keys, tensors in name order), so the same tensors and metadata always give the same bytes and the same sha256, which goes
on-chain.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from torch import Tensor

from tenzro_trainer.errors import PayloadError

METADATA_KEYS = ("task", "round", "fragment", "trainer", "dtype", "kind")
KINDS = ("pseudo_gradient", "weights", "momentum")  # momentum: the outer momentum a root-flow syncer pins
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).removeprefix("torch.")


def encode_fragment(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> bytes:
    """Serialize one fragment.

    Args:
        tensors: name -> tensor, all of one floating dtype (moved to the CPU, made contiguous).
        metadata: the six keys of :data:`METADATA_KEYS` (values converted with ``str``); ``dtype``
            must name the tensors' dtype and ``kind`` be one of :data:`KINDS`.
    Returns:
        safetensors bytes.
    Raises:
        PayloadError: missing/unknown metadata keys, mixed or mismatched dtypes, no tensors.
    """
    meta = {k: str(v) for k, v in metadata.items()}
    _check_metadata(meta)
    if not tensors:
        raise PayloadError("cannot encode a fragment with no tensors")
    dtypes = {dtype_name(t.dtype) for t in tensors.values()}
    if dtypes != {meta["dtype"]}:
        raise PayloadError(f"tensor dtypes {sorted(dtypes)} do not match metadata dtype {meta['dtype']!r}")
    return _canonical_save({n: tensors[n] for n in sorted(tensors)}, meta)


_ST_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.uint8: "U8"}


def write_safetensors(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> bytes:
    """Canonical safetensors bytes of any float32 / bfloat16 / float16 / uint8 tensors and string
    metadata, with no check of the metadata's keys (the compressed payloads of
    :mod:`tenzro_trainer.compression` use it). Tensors are written in name order."""
    unsupported = sorted(n for n, t in tensors.items() if t.dtype not in _ST_DTYPE)
    if unsupported:
        raise PayloadError(f"tensors {unsupported} have dtypes the codec does not write; supported: "
                           f"{[dtype_name(d) for d in _ST_DTYPE]}")
    return _canonical_save({n: tensors[n] for n in sorted(tensors)}, {k: str(v) for k, v in metadata.items()})


def _canonical_save(tensors: Mapping[str, Tensor], meta: Mapping[str, str]) -> bytes:
    """The safetensors layout (8-byte LE header length, JSON header padded with spaces to a
    multiple of 8, then the raw little-endian tensor bytes) written with a canonical header:
    keys sorted, no whitespace, tensors in name order. ``safetensors.torch.save`` itself keeps
    the metadata in a hash map whose order changes from call to call, so its bytes (and their
    sha256) are not reproducible; its loader reads these bytes unchanged."""
    header: dict[str, object] = {"__metadata__": dict(meta)}
    blobs, offset = [], 0
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _ST_DTYPE[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(blobs)


def decode_fragment(data: bytes) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Parse bytes made by :func:`encode_fragment`.

    Returns:
        (tensors, metadata).
    Raises:
        PayloadError: not safetensors, truncated, trailing garbage, missing metadata, or tensors
            whose dtype differs from the metadata's.
    """
    tensors, meta = read_safetensors(data)
    _check_metadata(meta)
    for name, t in tensors.items():
        if dtype_name(t.dtype) != meta["dtype"]:
            raise PayloadError(f"tensor {name!r} has dtype {dtype_name(t.dtype)}, metadata says {meta['dtype']}")
    return tensors, meta


def read_safetensors(data: bytes) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Parse safetensors bytes with the structural checks of :func:`decode_fragment` (truncation,
    trailing bytes, malformed header) but none on the metadata's keys or the dtypes.

    Raises:
        PayloadError: not bytes, not safetensors, truncated, or trailing garbage.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise PayloadError(f"payload must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < 8:
        raise PayloadError(f"payload truncated: {len(data)} bytes, a safetensors header needs at least 8")
    header_len = int.from_bytes(data[:8], "little")
    if header_len > len(data) - 8:
        raise PayloadError(f"payload truncated: header says {header_len} bytes, only {len(data) - 8} follow")
    try:
        tensors = st_load(data)
        meta = _read_metadata(data, header_len)
    except SafetensorError as exc:
        raise PayloadError(f"malformed safetensors payload ({len(data)} bytes): {exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError(f"malformed safetensors header: {exc}") from exc
    return tensors, meta


def _read_metadata(data: bytes, header_len: int) -> dict[str, str]:
    header = json.loads(data[8 : 8 + header_len].decode("utf-8"))
    meta = header.get("__metadata__") or {}
    if not isinstance(meta, dict):
        raise ValueError("__metadata__ is not an object")
    end = max((info["data_offsets"][1] for k, info in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + end != len(data):
        raise ValueError(f"data section is {len(data) - 8 - header_len} bytes, tensors need {end}")
    return {str(k): str(v) for k, v in meta.items()}


def _check_metadata(meta: Mapping[str, str]) -> None:
    missing = [k for k in METADATA_KEYS if k not in meta]
    if missing:
        raise PayloadError(f"payload metadata lacks {missing}; required: {list(METADATA_KEYS)}")
    extra = sorted(set(meta) - set(METADATA_KEYS))
    if extra:
        raise PayloadError(f"payload metadata has unknown keys {extra}")
    if meta["kind"] not in KINDS:
        raise PayloadError(f"payload kind {meta['kind']!r} is not one of {KINDS}")
    if meta["dtype"] not in DTYPES:
        raise PayloadError(f"payload dtype {meta['dtype']!r} is not one of {sorted(DTYPES)}")


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of the payload bytes (lower case, no prefix)."""
    return hashlib.sha256(data).hexdigest()

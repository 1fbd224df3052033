"""Wire format of a compressed pseudo-gradient payload: one fragment as a safetensors file.

The fragment's tensors, in ascending name order, each flattened row-major, form one float32
vector of n values (the vector of ``contracts/PROTOCOL.md`` section 2). The codec compresses that
vector; the payload holds the compressed parts as tensors (bytes on the wire; ``m`` = values kept
by top-k, ``B = ceil(n / 32)``, ``C = ceil(n / chunk)``):

================  =====  ================================  ====================================
codec             name   dtype, shape                      content
================  =====  ================================  ====================================
mx                elements  U8 (ceil(n * bits / 8),)       element codes packed LSB first (bitpack)
mx                scales    U8 (B,)                        E8M0 scale bytes, ``X + 127``
topk              indices   U8 (ceil(m * ceil(log2 chunk) / 8),)  in-chunk offsets, packed
topk, bits 32     values    F32 (m,)                       the kept values
topk, bits 2      codes     U8 (ceil(2 m / 8),)            sign and magnitude bits, packed
topk, bits 2      codebook  F32 (C, 2)                     per chunk ``(lo, hi)``
================  =====  ================================  ====================================

Metadata: the six keys of :mod:`tenzro_trainer.codec` (``dtype`` is ``float32``, the decoded
dtype; ``kind`` is ``pseudo_gradient``) plus ``codec`` (canonical JSON of the codec config,
:func:`~tenzro_trainer.compression.config.codec_json`) and ``numel`` (n). The tensor names and
shapes are not sent: the receiver knows the fragment's layout from the model and passes it to
:func:`decode_payload`. Codec ``none`` is exactly :func:`tenzro_trainer.codec.encode_fragment`'s
dense payload, so tasks without compression keep their wire format.

The bytes are canonical (sorted header keys, tensors in name order): the same input gives the
same bytes and sha256. Decoding checks every name, dtype, shape, code and scale, so any byte
string it accepts decodes to exactly one finite float32 vector.

Usage::

    data = encode_payload(delta, meta, MXCodec(element="fp4_e2m1"))
    tensors, meta = decode_payload(data, {n: tuple(t.shape) for n, t in delta.items()}, codec)
"""

from __future__ import annotations

import json
import math
from typing import Mapping

import torch
from torch import Tensor

from tenzro_trainer.codec import METADATA_KEYS, decode_fragment, encode_fragment, read_safetensors, write_safetensors
from tenzro_trainer.compression import bitpack, topk
from tenzro_trainer.compression.config import MXCodec, NoCompression, TopKCodec, codec_json, parse_codec
from tenzro_trainer.compression.elements import element_format
from tenzro_trainer.compression.mx import BLOCK, check_vector, mx_dequantize, mx_quantize
from tenzro_trainer.errors import PayloadError

PAYLOAD_KEYS = (*METADATA_KEYS, "codec", "numel")
Layout = Mapping[str, tuple[int, ...]]  # tensor name -> shape
AnyCodec = NoCompression | MXCodec | TopKCodec


def flatten(tensors: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, tuple[int, ...]]]:
    """(n,) float32 CPU vector of the tensors in ascending name order, and their layout."""
    names = sorted(tensors)
    if not names:
        raise ValueError("cannot compress a fragment with no tensors")
    for name in names:
        if tensors[name].dtype != torch.float32:
            raise ValueError(f"tensor {name!r} is {tensors[name].dtype}; compressed payloads take float32 tensors")
    layout = {n: tuple(tensors[n].shape) for n in names}
    parts = [tensors[n].detach().to("cpu").reshape(-1) for n in names]
    return (torch.cat(parts) if parts else torch.zeros(0)).contiguous(), layout


def unflatten(flat: Tensor, layout: Layout) -> dict[str, Tensor]:
    """Inverse of :func:`flatten` (names in ascending order)."""
    out, i = {}, 0
    for name in sorted(layout):
        size = math.prod(layout[name])
        out[name] = flat[i : i + size].reshape(layout[name]).clone()
        i += size
    return out


def tensor_specs(codec: AnyCodec, n: int) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
    """Name -> (dtype, shape) of every tensor a payload of ``n`` values carries under ``codec``
    (codec ``none``: one ``"flat"`` float32 (n,) entry standing for the dense tensors)."""
    if isinstance(codec, NoCompression):
        return {"flat": (torch.float32, (n,))}
    if isinstance(codec, MXCodec):
        bits = element_format(codec.element).bits
        return {"elements": (torch.uint8, (bitpack.packed_size(n, bits),)), "scales": (torch.uint8, (-(-n // BLOCK),))}
    m = sum(topk.kept_per_chunk(n, codec.k, codec.chunk))
    specs = {"indices": (torch.uint8, (bitpack.packed_size(m, topk.index_bits(codec.chunk)),))}
    if codec.bits == 32:
        specs["values"] = (torch.float32, (m,))
    else:
        specs["codes"] = (torch.uint8, (bitpack.packed_size(m, 2),))
        specs["codebook"] = (torch.float32, (-(-n // codec.chunk), 2))
    return specs


def compress(flat: Tensor, codec: AnyCodec) -> dict[str, Tensor]:
    """The payload tensors of one flat vector (see the table in the module docstring).

    Args:
        flat: (n,) float32, finite.
    Raises:
        ValueError: ``flat`` is not a finite 1-D float32 tensor.
    """
    flat = check_vector(flat)
    if isinstance(codec, NoCompression):
        return {"flat": flat.clone()}
    if isinstance(codec, MXCodec):
        fmt = element_format(codec.element)
        codes, scales = mx_quantize(flat, fmt)
        return {"elements": bitpack.pack(codes, fmt.bits), "scales": scales}
    sparse = topk.select(flat, codec.k, codec.chunk)
    out = {"indices": bitpack.pack(sparse.offsets, topk.index_bits(codec.chunk))}
    if codec.bits == 32:
        out["values"] = sparse.values.clone()
    else:
        codes, book = topk.two_bit(sparse)
        out["codes"], out["codebook"] = bitpack.pack(codes, 2), book
    return out


def decompress(parts: Mapping[str, Tensor], n: int, codec: AnyCodec) -> Tensor:
    """(n,) float32 vector of payload tensors, exactly (see :mod:`tenzro_trainer.compression`).

    Raises:
        PayloadError: missing or extra tensors, a wrong dtype or shape, or any code, scale,
            offset or codebook entry the format does not allow.
    """
    specs = tensor_specs(codec, n)
    if set(parts) != set(specs):
        raise PayloadError(f"{codec.kind} payload holds tensors {sorted(parts)}, expected {sorted(specs)}")
    for name, (dtype, shape) in specs.items():
        t = parts[name]
        if t.dtype != dtype or tuple(t.shape) != shape:
            raise PayloadError(f"{codec.kind} payload tensor {name!r} is {t.dtype} {tuple(t.shape)}, "
                               f"expected {dtype} {shape} for {n} values")
    if isinstance(codec, NoCompression):
        flat = parts["flat"].detach().to("cpu").contiguous()
        if not bool(torch.isfinite(flat).all()):
            raise PayloadError("dense payload holds non-finite values")
        return flat
    if isinstance(codec, MXCodec):
        fmt = element_format(codec.element)
        return mx_dequantize(bitpack.unpack(parts["elements"], n, fmt.bits), parts["scales"], n, fmt)
    counts = topk.kept_per_chunk(n, codec.k, codec.chunk)
    m = sum(counts)
    offsets = bitpack.unpack(parts["indices"], m, topk.index_bits(codec.chunk))
    topk.check_offsets(offsets, n, codec.k, codec.chunk)
    if codec.bits == 32:
        values = parts["values"].detach().to("cpu")
        if not bool(torch.isfinite(values).all()):
            raise PayloadError("top-k payload holds non-finite values")
    else:
        values = topk.decode_two_bit(bitpack.unpack(parts["codes"], m, 2), parts["codebook"], counts)
    return topk.Sparse(n, codec.k, codec.chunk, offsets, values).dense()


def encode_payload(tensors: Mapping[str, Tensor], metadata: Mapping[str, object], codec: AnyCodec) -> bytes:
    """Serialize one fragment's pseudo-gradient under ``codec``.

    Args:
        tensors: name -> float32 tensor (any shapes), finite.
        metadata: the six keys of :data:`tenzro_trainer.codec.METADATA_KEYS`; ``dtype`` must be
            ``float32`` and ``kind`` ``pseudo_gradient`` for a compressed codec.
        codec: a codec config (or anything :func:`parse_codec` takes).
    Returns:
        safetensors bytes (codec ``none``: exactly ``encode_fragment(tensors, metadata)``).
    Raises:
        ValueError: non-finite or non-float32 input; PayloadError: bad metadata.
    """
    codec = parse_codec(codec)
    if isinstance(codec, NoCompression):
        return encode_fragment(tensors, metadata)
    flat, _ = flatten(tensors)
    return write_payload(compress(flat, codec), metadata, codec, flat.numel())


def write_payload(parts: Mapping[str, Tensor], metadata: Mapping[str, object], codec: AnyCodec, n: int) -> bytes:
    """Payload bytes of tensors made by :func:`compress` from ``n`` values, with ``metadata``
    (the six keys of :data:`tenzro_trainer.codec.METADATA_KEYS`) plus ``codec`` and ``numel``.

    Raises:
        PayloadError: metadata keys missing or unknown, dtype not float32, kind not pseudo_gradient.
    """
    meta = {k: str(v) for k, v in metadata.items()}
    _check_keys(meta, set(METADATA_KEYS), "metadata to encode")
    meta.update(codec=codec_json(codec), numel=str(n))
    _check_meta(meta, codec, n)
    return write_safetensors(parts, meta)


def decode_payload(data: bytes, layout: Layout, codec: AnyCodec) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Parse and decode a payload made by :func:`encode_payload`.

    Args:
        data: the payload bytes.
        layout: the fragment's tensor names -> shapes (from the model; the payload does not carry them).
        codec: the codec the task specifies; a payload naming another codec is rejected.
    Returns:
        (name -> float32 tensor of the layout's shape, metadata).
    Raises:
        PayloadError: malformed bytes, metadata, codec mismatch, or any check of :func:`decompress`.
    """
    codec = parse_codec(codec)
    n = sum(math.prod(s) for s in layout.values())
    if isinstance(codec, NoCompression):
        tensors, meta = decode_fragment(data)
        if set(tensors) != set(layout):
            raise PayloadError(f"dense payload holds tensors {sorted(tensors)}, the fragment has {sorted(layout)}")
        return tensors, meta
    parts, meta = read_safetensors(data)
    _check_keys(meta, set(PAYLOAD_KEYS), "payload metadata")
    _check_meta(meta, codec, n)
    return unflatten(decompress(parts, n, codec), layout), meta


def _check_keys(meta: Mapping[str, str], expected: set[str], what: str) -> None:
    missing, extra = sorted(expected - set(meta)), sorted(set(meta) - expected)
    if missing or extra:
        raise PayloadError(f"{what}: missing keys {missing}, unknown keys {extra}; expected {sorted(expected)}")


def _check_meta(meta: Mapping[str, str], codec: AnyCodec, n: int) -> None:
    if meta["dtype"] != "float32" or meta["kind"] != "pseudo_gradient":
        raise PayloadError(f"compressed payloads are float32 pseudo-gradients, metadata says dtype "
                           f"{meta['dtype']!r}, kind {meta['kind']!r}")
    if meta["codec"] != codec_json(codec):
        try:
            named = json.loads(meta["codec"])
        except ValueError:
            named = meta["codec"]
        raise PayloadError(f"payload codec {named} is not the task's codec {codec_json(codec)}")
    if meta["numel"] != str(n):
        raise PayloadError(f"payload carries numel {meta['numel']!r}, the fragment has {n} values")

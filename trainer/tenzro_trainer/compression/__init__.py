"""Compressed outer gradients: OCP MX block quantization and top-k with error feedback, exact to decode.

Modules, one job each:

- :mod:`~tenzro_trainer.compression.config`      the codec a task picks (pydantic; ``metadata.compression``)
- :mod:`~tenzro_trainer.compression.elements`    MX element types: code <-> value, rounding
- :mod:`~tenzro_trainer.compression.mx`          MX block scaling (32 values, one E8M0 scale)
- :mod:`~tenzro_trainer.compression.topk`        chunked top-k, 2-bit values with a per-chunk codebook
- :mod:`~tenzro_trainer.compression.bitpack`     packing of small codes into bytes
- :mod:`~tenzro_trainer.compression.wire`        the payload: safetensors bytes <-> float32 tensors
- :mod:`~tenzro_trainer.compression.feedback`    the trainer's encoder with error feedback, restart-safe
- :mod:`~tenzro_trainer.compression.accounting`  bytes per round per trainer, and data-parallel's

Sources: OCP Microscaling Formats (MX) Specification v1.0 (2023); DeMo (Peng, Quesnelle &
Kingma 2024, arXiv:2411.19870); SparseLoCo (Sarfi, Thérien, Lidin & Belilovsky 2025,
arXiv:2508.15706).

Why decoding is exact, so aggregation and the binary32 fraud proofs are unaffected
--------------------------------------------------------------------------------

Protocol v2 (``contracts/PROTOCOL.md`` sections 1-2) commits to, aggregates and proves over the
*decoded* float32 vector of each payload. That is sound only if every honest party decodes the
same bytes to the same bits. Each decoded value is obtained without rounding:

1. **MX** (``element * 2^X``). The element value comes from a 2^bits-entry table (a lookup, no
   arithmetic); every entry is ``m * 2^q`` with integer ``|m| < 2^8`` and ``q >= -16`` (INT8:
   ``m * 2^-6``; FP4 E2M1's smallest step is ``2^-1``, E5M2's ``2^-16``), so it is a binary32
   number. ``2^X`` is built from its bit pattern for ``X`` in [-127, 127 - emax] (``2^-127`` is a
   binary32 subnormal). Their product ``m * 2^(q + X)`` has at most 8 significant bits, its
   exponent ``q + X >= -16 - 127 = -143 >= -149`` (never below the smallest subnormal step), and
   ``|element| < 2^(emax + 1)`` with ``X <= 127 - emax`` keeps it below ``2^128``; by the largest
   finite element (e.g. 1.5 * 2^2 for E2M1, 127/64 for INT8) it is at most ``1.984375 * 2^127 <
   FLT_MAX``. A binary32 multiplication whose exact result is representable returns it exactly
   under every rounding mode, on every IEEE-754 device (provided subnormals are not flushed to
   zero, the precondition :mod:`tenzro_trainer.canonical` already states). The decoder refuses the
   codes and scales outside these ranges (NaN/inf element codes, INT8's -2, the scale byte 0xFF,
   ``X > 127 - emax``), so any payload it accepts decodes to finite, exact values.
2. **Top-k** writes kept values into a vector of +0: a value is either a float32 taken from the
   payload unchanged (``bits = 32``) or ``+-lo`` / ``+-hi`` copied from the chunk's codebook
   (``bits = 2``); negation only flips the sign bit. No arithmetic at all.
3. Positions are integers (offsets checked strictly ascending inside their chunk), so the write
   has no overlaps and no order dependence.

Encoding (the trainer's side) is deterministic on the CPU too (float64 arithmetic that is exact,
stable sorts), but nobody has to reproduce it: the syncer, the watchers and the referee only
decode. Test: ``tests/trainer/test_compression.py`` (decode twice is bit-identical; every
decoded MX value equals ``element * 2^X`` computed in float64 and is exact in binary32).

Usage::

    codec = from_metadata(spec.metadata)                          # NoCompression / MXCodec / TopKCodec
    comp = PayloadCompressor.load(state_path, codec)               # trainer: error feedback survives restarts
    data = comp.encode(round=r, fragment=f, tensors=delta, metadata=meta); comp.save(state_path)
    tensors, meta = decode_payload(data, layout, codec)            # syncer: exact float32 tensors
"""

from tenzro_trainer.compression.accounting import data_bytes, payload_bytes, round_upload_bytes, sync_dp_bytes
from tenzro_trainer.compression.config import (
    CompressionConfig,
    MXCodec,
    NoCompression,
    TopKCodec,
    codec_json,
    from_metadata,
    parse_codec,
)
from tenzro_trainer.compression.elements import ELEMENTS, ElementFormat, element_format
from tenzro_trainer.compression.feedback import PayloadCompressor
from tenzro_trainer.compression.wire import compress, decode_payload, decompress, encode_payload, flatten, unflatten

__all__ = [
    "CompressionConfig", "MXCodec", "NoCompression", "TopKCodec", "codec_json", "from_metadata", "parse_codec",
    "ELEMENTS", "ElementFormat", "element_format",
    "PayloadCompressor",
    "compress", "decompress", "encode_payload", "decode_payload", "flatten", "unflatten",
    "data_bytes", "payload_bytes", "round_upload_bytes", "sync_dp_bytes",
]

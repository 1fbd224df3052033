"""Bytes on the wire: what one trainer uploads per round under a codec, and what synchronous
data-parallel training would move instead.

A payload's size depends only on the codec, the fragment's layout and the metadata's lengths,
never on the values (every tensor's shape is fixed by n and the codec), so it is computed by
encoding zeros. Units: bytes.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch

from tenzro_trainer.compression.config import parse_codec
from tenzro_trainer.compression.wire import AnyCodec, Layout, encode_payload, tensor_specs

EXAMPLE_METADATA: Mapping[str, str] = {
    "task": "task-0001", "round": "100", "fragment": "0", "dtype": "float32", "kind": "pseudo_gradient",
    "trainer": "0x" + "ab" * 20,
}  # a typical header: task id, round, fragment, a 20-byte address


def data_bytes(codec: AnyCodec, n: int) -> int:
    """Bytes of tensor data (no header) in a payload of ``n`` values."""
    specs = tensor_specs(parse_codec(codec), n)
    return sum(math.prod(shape) * torch.empty(0, dtype=dtype).element_size() for dtype, shape in specs.values())


def payload_bytes(codec: AnyCodec, layout: Layout, metadata: Mapping[str, object] = EXAMPLE_METADATA) -> int:
    """Exact size of a payload of a fragment with ``layout`` (name -> shape): header and data."""
    zeros = {name: torch.zeros(shape, dtype=torch.float32) for name, shape in layout.items()}
    return len(encode_payload(zeros, metadata, parse_codec(codec)))


def round_upload_bytes(codec: AnyCodec, layouts: Sequence[Layout], metadata: Mapping[str, object] = EXAMPLE_METADATA) -> int:
    """Bytes one trainer uploads per round: one payload per fragment."""
    return sum(payload_bytes(codec, layout, {**metadata, "fragment": str(f)}) for f, layout in enumerate(layouts))


def sync_dp_bytes(num_params: int, steps: int) -> int:
    """Bytes one worker of synchronous data-parallel training sends over ``steps`` optimizer steps:
    one float32 gradient per step (parameter-server accounting; a ring all-reduce moves
    ``2 (M - 1) / M`` of that)."""
    return 4 * num_params * steps

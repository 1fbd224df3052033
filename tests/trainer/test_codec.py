import hashlib

import pytest
import torch
from safetensors.torch import load as st_load

from tenzro_trainer.codec import decode_fragment, encode_fragment, sha256_hex
from tenzro_trainer.errors import PayloadError

META = dict(task="7", round=3, fragment=1, trainer="0xabc", dtype="float32", kind="pseudo_gradient")


def _tensors():
    g = torch.Generator().manual_seed(0)
    return {"blocks.0.w": torch.randn(8, 4, generator=g), "bias": torch.randn(4, generator=g), "s": torch.tensor(2.5)}


def test_round_trip_and_determinism():
    t = _tensors()
    data = encode_fragment(t, META)
    back, meta = decode_fragment(data)
    assert set(back) == set(t) and all(torch.equal(back[k], t[k]) for k in t)
    assert meta == {k: str(v) for k, v in META.items()}
    again = encode_fragment(dict(reversed(list(t.items()))), dict(reversed(list(META.items()))))
    assert again == data and sha256_hex(again) == hashlib.sha256(data).hexdigest()
    assert set(st_load(data)) == set(t)  # plain safetensors readers read it


def test_bf16_round_trip():
    t = {"x": torch.randn(5).to(torch.bfloat16)}
    back, meta = decode_fragment(encode_fragment(t, {**META, "dtype": "bfloat16", "kind": "weights"}))
    assert torch.equal(back["x"], t["x"]) and meta["kind"] == "weights"


@pytest.mark.parametrize("cut", [0, 5, 8, 40, -1, -7])
def test_truncated_bytes_rejected(cut):
    data = encode_fragment(_tensors(), META)
    with pytest.raises(PayloadError):
        decode_fragment(data[:cut])


def test_corrupted_bytes_rejected():
    data = bytearray(encode_fragment(_tensors(), META))
    with pytest.raises(PayloadError):
        decode_fragment(bytes(data) + b"\x00\x00")  # trailing garbage
    bad_header = bytearray(data)
    bad_header[10] = 0xFF  # invalid UTF-8/JSON inside the header
    with pytest.raises(PayloadError):
        decode_fragment(bytes(bad_header))
    with pytest.raises(PayloadError, match="payload must be bytes"):
        decode_fragment("not bytes")


def test_metadata_checked():
    with pytest.raises(PayloadError, match="lacks"):
        encode_fragment(_tensors(), {k: v for k, v in META.items() if k != "round"})
    with pytest.raises(PayloadError, match="do not match metadata dtype"):
        encode_fragment(_tensors(), {**META, "dtype": "bfloat16"})
    with pytest.raises(PayloadError, match="kind"):
        encode_fragment(_tensors(), {**META, "kind": "gradient"})

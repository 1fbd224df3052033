"""Compressed outer gradients: MX formats, top-k with error feedback, the wire format, the codec config."""

import json
import math

import pytest
import torch
from safetensors.torch import load as st_load

from tenzro_trainer.codec import encode_fragment, read_safetensors, write_safetensors
from tenzro_trainer.compression import (
    ELEMENTS,
    CompressionConfig,
    MXCodec,
    NoCompression,
    PayloadCompressor,
    TopKCodec,
    codec_json,
    data_bytes,
    decode_payload,
    encode_payload,
    from_metadata,
    payload_bytes,
    round_upload_bytes,
    sync_dp_bytes,
)
from tenzro_trainer.compression import bitpack, topk
from tenzro_trainer.compression.config import ElementName
from tenzro_trainer.compression.mx import BLOCK, mx_dequantize, mx_quantize, pow2_f32
from tenzro_trainer.errors import ConfigError, ErrorFeedbackStateError, PayloadError

META = dict(task="t7", round=3, fragment=1, trainer="worker001", dtype="float32", kind="pseudo_gradient")


def gradient_like(n: int, seed: int = 0) -> torch.Tensor:
    """A pseudo-gradient-like vector: Gaussian values whose scale varies by 4 orders of magnitude
    across 256-value stretches (layers of different sizes) with a few 20x outliers."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.exp(torch.empty(-(-n // 256)).uniform_(math.log(1e-6), math.log(1e-2), generator=g))
    x = torch.randn(n, generator=g) * scale.repeat_interleave(256)[:n]
    spikes = torch.randint(0, n, (max(1, n // 1000),), generator=g)
    x[spikes] *= 20
    return x


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


# ---------------------------------------------------------------- element types


def test_element_names_match_config():
    assert set(ElementName.__args__) == set(ELEMENTS)


@pytest.mark.parametrize("name, torch_dtype", [("fp8_e4m3", torch.float8_e4m3fn), ("fp8_e5m2", torch.float8_e5m2)])
def test_fp8_codes_match_torch(name, torch_dtype):
    """Rounding (nearest, ties to even, saturating) agrees with torch's float8 casts on every code's
    neighbourhood, including exact ties and the subnormal range."""
    fmt = ELEMENTS[name]
    vals = fmt.values[fmt.valid].double()
    mids = (vals[:, None] + vals[None, :]).flatten() / 2  # every midpoint, incl. ties
    x = torch.cat([vals, mids[mids.abs() <= fmt.max_value], torch.randn(5000, dtype=torch.float64) * fmt.max_value / 8])
    x = x.float().double()  # torch casts from float32
    ours = fmt.quantize(x)
    theirs = x.float().to(torch_dtype)
    assert torch.equal(fmt.values[ours], theirs.float())  # equal values (torch keeps -0 where we write +0)
    nonzero = theirs.float() != 0
    assert torch.equal(ours[nonzero].to(torch.uint8), theirs.view(torch.uint8)[nonzero])
    assert bool((fmt.values[ours][~nonzero].view(torch.int32) == 0).all())  # zero is always the +0 code


def test_small_formats_tables():
    assert ELEMENTS["fp4_e2m1"].values[:8].tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert ELEMENTS["fp4_e2m1"].values[8:].tolist() == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert ELEMENTS["fp6_e3m2"].max_value == 28 and ELEMENTS["fp6_e2m3"].max_value == 7.5
    assert ELEMENTS["fp8_e4m3"].max_value == 448 and ELEMENTS["fp8_e5m2"].max_value == 57344
    assert ELEMENTS["int8"].max_value == 127 / 64
    assert ELEMENTS["fp6_e3m2"].values[1] == 2.0 ** -4  # smallest subnormal
    # saturation and ties to even
    fp4 = ELEMENTS["fp4_e2m1"]
    assert fp4.values[fp4.quantize(torch.tensor([100.0, -7.0, 2.5, 3.5, 0.25, 0.75], dtype=torch.float64))].tolist() == \
        [6, -6, 2, 4, 0, 1]


# ---------------------------------------------------------------- MX block scaling

# Relative L2 error, measured: on N(0, 1) data (n = 50,000, seed 0) int8 0.0083, e4m3 0.029,
# e5m2 0.054, e3m2 0.054, e2m3 0.028, e2m1 0.115; on gradient-like data (seeds 0-5; 20x outliers
# raise their blocks' scales) int8 0.009-0.015, e4m3 0.027-0.037, e5m2 / e3m2 0.049-0.053,
# e2m3 0.030-0.044, e2m1 0.13-0.15. The bounds leave ~20% headroom.
MX_BOUNDS_GAUSS = {"int8": 0.010, "fp8_e4m3": 0.035, "fp8_e5m2": 0.065, "fp6_e3m2": 0.065, "fp6_e2m3": 0.034,
                   "fp4_e2m1": 0.14}
MX_BOUNDS_GRAD = {"int8": 0.019, "fp8_e4m3": 0.045, "fp8_e5m2": 0.065, "fp6_e3m2": 0.065, "fp6_e2m3": 0.053,
                  "fp4_e2m1": 0.185}


def assert_within_step(x: torch.Tensor, y: torch.Tensor, scales: torch.Tensor, fmt) -> None:
    """Per value: |error| <= 2^(X + emax + 1 - mbits), half a step in the block's top binade or the
    saturation gap (the worst case of rounding to the nearest element)."""
    X = scales.to(torch.int64).repeat_interleave(BLOCK)[: x.numel()] - 127
    bound = torch.ldexp(torch.ones_like(X, dtype=torch.float64), X + fmt.emax + 1 - fmt.mbits)
    assert bool(((y.double() - x.double()).abs() <= bound).all())


@pytest.mark.parametrize("name", sorted(ELEMENTS))
def test_mx_round_trip_error_bounds(name):
    fmt = ELEMENTS[name]
    gauss = torch.randn(50_000, generator=torch.Generator().manual_seed(0))
    for x, bound in [(gauss, MX_BOUNDS_GAUSS[name]), (gradient_like(50_000, 0), MX_BOUNDS_GRAD[name]),
                     (gradient_like(50_000, 1), MX_BOUNDS_GRAD[name])]:
        codes, scales = mx_quantize(x, fmt)
        y = mx_dequantize(codes, scales, x.numel(), fmt)
        assert rel_err(y, x) < bound, (name, rel_err(y, x))
        assert_within_step(x, y, scales, fmt)


@pytest.mark.parametrize("name", sorted(ELEMENTS))
def test_mx_decode_is_exact_and_deterministic(name):
    fmt = ELEMENTS[name]
    x = torch.cat([gradient_like(4000, 3), torch.tensor([3.0e38, -3.4e38, 1.0e38] * 11),  # near FLT_MAX
                   torch.tensor([1e-45, -3e-42, 1e-39, 2e-38] * 8)])  # subnormal blocks
    codes, scales = mx_quantize(x, fmt)
    a = mx_dequantize(codes, scales, x.numel(), fmt)
    b = mx_dequantize(codes.clone(), scales.clone(), x.numel(), fmt)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))  # bit-identical
    assert bool(torch.isfinite(a).all())
    # the exact product element * 2^X in float64, and binary32 holds it exactly
    X = scales.to(torch.int64).repeat_interleave(BLOCK)[: x.numel()] - 127
    exact = torch.ldexp(fmt.values[codes].double(), X.double())
    assert torch.equal(a.double(), exact)
    assert torch.equal(exact.float().double(), exact)


def test_mx_edge_cases():
    fmt = ELEMENTS["fp4_e2m1"]
    # all-zero block: the canonical scale byte 0, values +0
    codes, scales = mx_quantize(torch.zeros(64), fmt)
    assert scales.tolist() == [0, 0] and int(codes.abs().sum()) == 0
    assert torch.equal(mx_dequantize(codes, scales, 64, fmt), torch.zeros(64))
    # sizes not a multiple of 32: ceil(n / 32) scales, a short last block
    for n in (1, 31, 33, 1000):
        x = gradient_like(n, n)
        c, s = mx_quantize(x, fmt)
        assert c.shape == (n,) and s.shape == (-(-n // 32),)
        assert_within_step(x, mx_dequantize(c, s, n, fmt), s, fmt)
    # subnormal inputs: the scale clamps at 2^-127 (byte 0); rounding stays within the step bound
    for name in ELEMENTS:
        f = ELEMENTS[name]
        x = torch.tensor([1e-40, -2.5e-41, 7e-45, 0.0] * 8)
        c, s = mx_quantize(x, f)
        y = mx_dequantize(c, s, x.numel(), f)
        assert s.tolist() == [0] and bool(torch.isfinite(y).all())
        assert_within_step(x, y, s, f)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input_rejected(bad):
    x = gradient_like(100)
    x[37] = bad
    with pytest.raises(ValueError, match=r"non-finite .* index 37"):
        mx_quantize(x, ELEMENTS["int8"])
    with pytest.raises(ValueError, match="non-finite"):
        encode_payload({"w": x}, META, TopKCodec(k=4, chunk=64))
    with pytest.raises(ValueError, match="1-D float32"):
        mx_quantize(x.double(), ELEMENTS["int8"])


def test_mx_decoder_refuses_bad_codes_and_scales():
    e4m3, e5m2, i8 = ELEMENTS["fp8_e4m3"], ELEMENTS["fp8_e5m2"], ELEMENTS["int8"]
    codes = torch.zeros(32, dtype=torch.int64)
    ok = torch.tensor([127], dtype=torch.uint8)
    with pytest.raises(PayloadError, match="0xFF"):
        mx_dequantize(codes, torch.tensor([255], dtype=torch.uint8), 32, e4m3)
    with pytest.raises(PayloadError, match="exceeds"):
        mx_dequantize(codes, torch.tensor([254], dtype=torch.uint8), 32, e5m2)  # 2^127 x 57344 would overflow
    with pytest.raises(PayloadError, match="0x7f"):
        mx_dequantize(torch.full((32,), 0x7F), ok, 32, e4m3)  # E4M3 NaN
    with pytest.raises(PayloadError, match="0x7c"):
        mx_dequantize(torch.full((32,), 0x7C), ok, 32, e5m2)  # E5M2 inf
    with pytest.raises(PayloadError, match="0x80"):
        mx_dequantize(torch.full((32,), 0x80), ok, 32, i8)  # INT8 -2
    with pytest.raises(PayloadError, match="scales"):
        mx_dequantize(codes, torch.tensor([127, 127], dtype=torch.uint8), 32, i8)
    # the largest allowed scale with the largest element stays finite
    y = mx_dequantize(torch.full((32,), 127), torch.tensor([254], dtype=torch.uint8), 32, i8)
    assert bool(torch.isfinite(y).all()) and float(y[0]) == 127 / 64 * 2.0 ** 127


def test_pow2_f32_bit_patterns():
    e = torch.arange(-149, 128)
    assert torch.equal(pow2_f32(e).double(), torch.ldexp(torch.ones(len(e), dtype=torch.float64), e.double()))


# ---------------------------------------------------------------- bit packing


@pytest.mark.parametrize("bits", [1, 2, 4, 6, 8, 12, 16])
def test_bitpack_round_trip(bits):
    g = torch.Generator().manual_seed(bits)
    for n in (0, 1, 7, 1001):
        codes = torch.randint(0, 1 << bits, (n,), generator=g)
        packed = bitpack.pack(codes, bits)
        assert packed.dtype == torch.uint8 and packed.numel() == bitpack.packed_size(n, bits)
        assert torch.equal(bitpack.unpack(packed, n, bits), codes)
    assert bitpack.pack(torch.tensor([1, 2]), 4).tolist() == [0x21]  # code 0 in the low nibble
    with pytest.raises(ValueError, match="codes must lie"):
        bitpack.pack(torch.tensor([4]), 2)
    if bits < 8:
        with pytest.raises(PayloadError, match="padding"):
            bitpack.unpack(torch.tensor([0xFF], dtype=torch.uint8), 1, bits)
    with pytest.raises(PayloadError, match="bytes"):
        bitpack.unpack(torch.zeros(3, dtype=torch.uint8), 1, bits)


# ---------------------------------------------------------------- top-k


def test_topk_keeps_exactly_k_largest_per_chunk():
    n, k, chunk = 10_000, 41, 4096
    x = gradient_like(n, 5)
    sp = topk.select(x, k, chunk)
    counts = topk.kept_per_chunk(n, k, chunk)
    assert counts == [41, 41, 19]  # last chunk of 1808 values keeps ceil(41 * 1808 / 4096)
    pos = sp.positions()
    assert pos.numel() == sum(counts) and torch.equal(sp.values, x[pos])
    for c, m in enumerate(counts):
        part = x[c * chunk : (c + 1) * chunk]
        mine = pos[(pos >= c * chunk) & (pos < (c + 1) * chunk)]
        assert mine.numel() == m
        assert torch.equal(torch.sort(x[mine].abs()).values, torch.sort(torch.topk(part.abs(), m).values).values)
    dense = sp.dense()
    assert int((dense != 0).sum()) == sum(counts)


def test_topk_ties_go_to_the_lower_index():
    x = torch.ones(16)
    sp = topk.select(x, 3, 8)
    assert sp.positions().tolist() == [0, 1, 2, 8, 9, 10]


def test_topk_two_bit_values_come_from_the_codebook():
    x = gradient_like(9000, 2)
    data = encode_payload({"w": x}, META, TopKCodec(k=64, chunk=4096, bits=2))
    parts, _ = read_safetensors(data)
    book = parts["codebook"]
    back, _ = decode_payload(data, {"w": (9000,)}, TopKCodec(k=64, chunk=4096, bits=2))
    kept = back["w"][back["w"] != 0]
    allowed = set(book.flatten().tolist()) | set((-book).flatten().tolist())
    assert set(kept.tolist()) <= allowed
    assert bool((book[:, 0] <= book[:, 1]).all())
    sp = topk.select(x, 64, 4096)  # the decoded nonzeros sit exactly at the kept positions, with their signs
    assert torch.equal((back["w"] != 0).nonzero().flatten(), sp.positions())
    assert torch.equal(torch.sign(back["w"][sp.positions()]), torch.sign(sp.values))


def test_topk_decoder_refuses_bad_offsets_and_codebook():
    codec = TopKCodec(k=2, chunk=8, bits=32)
    good = encode_payload({"w": gradient_like(16)}, META, codec)
    parts, meta = read_safetensors(good)
    dup = dict(parts, indices=bitpack.pack(torch.tensor([3, 3, 1, 5]), 3))
    with pytest.raises(PayloadError, match="strictly ascending"):
        decode_payload(write_safetensors(dup, meta), {"w": (16,)}, codec)
    two = TopKCodec(k=2, chunk=8, bits=2)
    parts2, meta2 = read_safetensors(encode_payload({"w": gradient_like(16)}, META, two))
    neg = dict(parts2, codebook=torch.tensor([[1.0, -1.0], [0.0, 1.0]]))
    with pytest.raises(PayloadError, match="codebook"):
        decode_payload(write_safetensors(neg, meta2), {"w": (16,)}, two)
    nan = dict(parts, values=torch.tensor([1.0, float("nan"), 0.5, 0.5]))
    with pytest.raises(PayloadError, match="non-finite"):
        decode_payload(write_safetensors(nan, meta), {"w": (16,)}, codec)


# ---------------------------------------------------------------- error feedback


@pytest.mark.parametrize("codec", [TopKCodec(k=16, chunk=1024, bits=2), TopKCodec(k=16, chunk=1024, bits=32),
                                   MXCodec(element="fp4_e2m1", error_feedback=True)])
def test_error_feedback_conserves_the_sum(codec):
    """sum over rounds of sent + final residual = sum of the true pseudo-gradients, up to the float32
    rounding of the compensation and residual updates, bounded by 2^-24 (|c_r| + |e_r|) per round."""
    comp, layout = PayloadCompressor(codec), {"w": (3000,)}
    sent_sum = torch.zeros(3000, dtype=torch.float64)
    delta_sum = torch.zeros(3000, dtype=torch.float64)
    bound = torch.zeros(3000, dtype=torch.float64)
    e_prev = torch.zeros(3000)
    for r in range(1, 9):
        delta = gradient_like(3000, 100 + r)
        data = comp.encode(r, 0, {"w": delta}, META)
        sent = decode_payload(data, layout, codec)[0]["w"]
        c = e_prev + delta
        e = comp.residual[0]
        sent_sum += sent.double()
        delta_sum += delta.double()
        bound += (c.double().abs() + e.double().abs()) * 2.0 ** -24
        e_prev = e
    err = (sent_sum + e_prev.double() - delta_sum).abs()
    assert bool((err <= bound).all()), float((err - bound).max())
    assert float(e_prev.double().norm()) < float(delta_sum.norm())  # the residual stays bounded


def test_error_feedback_decay():
    """ef_decay beta: the compensated vector is beta * e + delta (SparseLoCo)."""
    codec = TopKCodec(k=4, chunk=256, bits=32, ef_decay=0.5)
    comp = PayloadCompressor(codec)
    d1, d2 = gradient_like(512, 1), gradient_like(512, 2)
    comp.encode(1, 0, {"w": d1}, META)
    e1 = comp.residual[0].clone()
    sent2 = decode_payload(comp.encode(2, 0, {"w": d2}, META), {"w": (512,)}, codec)[0]["w"]
    assert torch.equal(comp.residual[0] + sent2, e1 * 0.5 + d2)  # exact: top-k with fp32 values sends copies


def test_error_feedback_restart_gives_the_same_bytes(tmp_path):
    codec = TopKCodec(k=8, chunk=512, bits=2)
    path = tmp_path / "state" / "ef.safetensors"
    deltas = [{"a": gradient_like(700, 10 * r).view(7, 100), "b": gradient_like(300, 10 * r + 1)} for r in range(4)]
    unbroken = PayloadCompressor(codec)
    ref = [[unbroken.encode(r, f, deltas[r], {**META, "fragment": f}) for f in range(2)] for r in range(4)]

    first = PayloadCompressor.load(path, codec)  # no file yet: a fresh state
    for r in range(2):
        for f in range(2):
            assert first.encode(r, f, deltas[r], {**META, "fragment": f}) == ref[r][f]
        first.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["ef.safetensors"]  # no temporary file left
    resumed = PayloadCompressor.load(path, codec)
    # round 1 again (the payload never reached the syncer): same bytes, the round is not counted twice
    assert resumed.encode(1, 0, deltas[1], {**META, "fragment": 0}) == ref[1][0]
    for r in (2, 3):
        for f in range(2):
            assert resumed.encode(r, f, deltas[r], {**META, "fragment": f}) == ref[r][f]
    for f in range(2):
        assert torch.equal(resumed.residual[f], unbroken.residual[f])
    with pytest.raises(ConfigError, match="older"):
        resumed.encode(1, 0, deltas[1], META)
    with pytest.raises(ErrorFeedbackStateError, match="codec"):
        PayloadCompressor.load(path, TopKCodec(k=9, chunk=512))
    path.write_bytes(b"garbage!" * 4)
    with pytest.raises(ErrorFeedbackStateError, match="unreadable"):
        PayloadCompressor.load(path, codec)


# ---------------------------------------------------------------- wire format and accounting


@pytest.mark.parametrize("codec", [MXCodec(element="int8"), MXCodec(element="fp6_e3m2"), MXCodec(element="fp4_e2m1"),
                                   TopKCodec(), TopKCodec(k=123, bits=32)])
def test_wire_round_trip_size_and_determinism(codec):
    tensors = {"blocks.0.w": gradient_like(6000, 1).view(60, 100), "bias": gradient_like(77, 2), "s": torch.tensor(0.5)}
    layout = {n: tuple(t.shape) for n, t in tensors.items()}
    data = encode_payload(tensors, META, codec)
    assert encode_payload(dict(reversed(list(tensors.items()))), META, codec) == data  # canonical bytes
    back, meta = decode_payload(data, layout, codec)
    again, _ = decode_payload(data, layout, codec)
    assert all(torch.equal(back[n].view(torch.int32), again[n].view(torch.int32)) for n in layout)
    assert {n: tuple(t.shape) for n, t in back.items()} == layout and all(t.dtype == torch.float32 for t in back.values())
    assert json.loads(meta["codec"])["kind"] == codec.kind and meta["numel"] == "6078"
    assert set(st_load(data)) <= {"elements", "scales", "indices", "values", "codes", "codebook"}  # plain safetensors
    assert len(data) == payload_bytes(codec, layout, META)  # size does not depend on the values
    header = int.from_bytes(data[:8], "little")
    assert len(data) - 8 - header == data_bytes(codec, 6078)


def test_wire_rejects_mismatches():
    codec = MXCodec(element="fp4_e2m1")
    t = {"w": gradient_like(65)}
    data = encode_payload(t, META, codec)
    with pytest.raises(PayloadError, match="not the task's codec"):
        decode_payload(data, {"w": (65,)}, MXCodec(element="int8"))
    with pytest.raises(PayloadError, match="numel"):
        decode_payload(data, {"w": (64,)}, codec)
    with pytest.raises(PayloadError, match="unknown keys"):
        encode_payload(t, {**META, "extra": 1}, codec)
    with pytest.raises(PayloadError, match="pseudo-gradients"):
        encode_payload(t, {**META, "kind": "weights"}, codec)
    parts, meta = read_safetensors(data)
    with pytest.raises(PayloadError, match="elements"):
        decode_payload(write_safetensors({**parts, "elements": parts["elements"][:-1]}, meta), {"w": (65,)}, codec)
    with pytest.raises(PayloadError, match="padding"):  # 65 fp4 codes leave 4 padding bits in the last byte
        bad = parts["elements"].clone()
        bad[-1] |= 0xF0
        decode_payload(write_safetensors({**parts, "elements": bad}, meta), {"w": (65,)}, codec)
    with pytest.raises(PayloadError, match="truncated"):
        decode_payload(data[:20], {"w": (65,)}, codec)


def test_codec_none_is_the_dense_codec():
    t = {"w": gradient_like(100).view(10, 10)}
    assert encode_payload(t, META, NoCompression()) == encode_fragment(t, META)
    back, _ = decode_payload(encode_fragment(t, META), {"w": (10, 10)}, None)
    assert torch.equal(back["w"], t["w"])


def test_accounting():
    layouts = [{"a": (4096, 4)}, {"b": (10_000,), "c": (3,)}]
    n = 4096 * 4 + 10_003
    assert round_upload_bytes(NoCompression(), layouts, META) == sum(
        len(encode_fragment({k: torch.zeros(s) for k, s in lay.items()}, {**META, "fragment": f}))
        for f, lay in enumerate(layouts))
    assert data_bytes(NoCompression(), n) == 4 * n
    assert data_bytes(MXCodec(element="fp4_e2m1"), n) == math.ceil(n / 2) + math.ceil(n / 32)
    m = 64 * 6 + math.ceil(64 * (n - 6 * 4096) / 4096)
    assert data_bytes(TopKCodec(k=64, chunk=4096, bits=2), n) == math.ceil(12 * m / 8) + math.ceil(2 * m / 8) + 7 * 8
    assert sync_dp_bytes(1000, 24) == 96_000


# ---------------------------------------------------------------- codec config


def test_codec_config_from_metadata():
    assert from_metadata({}) == NoCompression() and from_metadata(None) == NoCompression()
    assert from_metadata({"compression": {"kind": "mx", "element": "fp4_e2m1"}}) == MXCodec(element="fp4_e2m1")
    c = from_metadata({"compression": {"kind": "topk", "k": 41, "chunk": 4096, "bits": 2}})
    assert isinstance(c, TopKCodec) and c.error_feedback and math.isclose(c.density, 41 / 4096)
    assert from_metadata({"compression": codec_json(c)}) == c  # the JSON string form
    assert codec_json(c) == ('{"bits":2,"chunk":4096,"ef_decay":1.0,"error_feedback":true,"k":41,"kind":"topk"}')
    assert CompressionConfig.model_validate({"kind": "none"}).root == NoCompression()
    for bad, where in [({"kind": "mx", "element": "fp3"}, "element"), ({"kind": "topk", "k": 5000}, "k"),
                       ({"kind": "topk", "bits": 4}, "bits"), ({"kind": "mx", "elemnt": "int8"}, "elemnt"),
                       ({"kind": "zip"}, "kind"), ({"kind": "mx", "block": 16}, "block")]:
        with pytest.raises(ConfigError, match=where):
            from_metadata({"compression": bad})


# ---------------------------------------------------------------- simulator hook


def test_simulate_with_compression(collection):
    from tenzro_trainer.config import InnerConfig, ModelConfig
    from tenzro_trainer.simulate import SimConfig, simulate

    cfg = SimConfig(model=ModelConfig.preset("demo"), inner=InnerConfig(steps=4, batch_size=16), workers=3, rounds=2,
                    fragments=2, compression={"kind": "topk", "k": 64, "chunk": 4096}, attackers={2: "nan"})
    res = simulate(cfg, collection)
    assert res.rounds[-1]["heldout_loss"] < res.rounds[0]["heldout_loss"]
    assert res.rounds[1]["rejected"] == 2  # the NaN attacker cannot encode either fragment
    assert 0 < res.rounds[1]["upload_bytes"] < 4 * res.num_params / 20

"""Compressed payloads on the operator side: the trainer's `PayloadEncoder` (its error feedback
survives a restart, its state file is written atomically, it commits to what the syncer decodes)
and `TaskRuntime.decode_payload`, the one decode path (a malformed compressed payload is a
PayloadError / PayloadCheckError with a reason, like a malformed dense one)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from tenzro_operator.errors import TenzroError
from tenzro_operator.payload_check import PayloadCheckError, check_payload
from tenzro_operator.payload_encoder import PayloadEncoder
from tenzro_operator.spec import parse_spec
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.codec import encode_fragment
from tenzro_trainer.commitment import flatten_fragment
from tenzro_trainer.compression import NoCompression
from tenzro_trainer.errors import PayloadError
from tenzro_trainer.fragments import fragment_state

EXAMPLE = Path(__file__).resolve().parents[2] / "operator" / "examples" / "task_spec.json"
ROUNDS = 3


def _runtime(compression) -> TaskRuntime:
    raw = copy.deepcopy(json.loads(EXAMPLE.read_text()))
    raw["metadata"]["protocol"]["compression"] = compression
    return TaskRuntime.from_spec(parse_spec(raw))


def _meta(rt: TaskRuntime, r: int, f: int) -> dict:
    return dict(task=rt.task, round=r, fragment=f, trainer="0x" + "ab" * 20, dtype="float32", kind="pseudo_gradient")


def _deltas(rt: TaskRuntime, rounds: int = ROUNDS) -> list[list[dict[str, torch.Tensor]]]:
    """rounds x F pseudo-gradients (float32, seeded)."""
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(rounds):
        state = {n: torch.randn(shape, generator=g) * 1e-2 for lay in rt.layouts for n, (shape, _) in lay.items()}
        out.append([fragment_state(state, names) for names in rt.fragments])
    return out


@pytest.mark.parametrize("compression", [{"kind": "topk", "k": 16, "chunk": 512},
                                         {"kind": "mx", "element": "fp4_e2m1", "error_feedback": True}])
def test_error_feedback_survives_a_restart_and_a_repeated_round(tmp_path, compression):
    rt = _runtime(compression)
    deltas = _deltas(rt)
    unbroken = PayloadEncoder(rt, tmp_path / "a" / "ef.safetensors")
    want = [[unbroken.encode(r, f, d, _meta(rt, r, f))[0] for f, d in enumerate(ds)] for r, ds in enumerate(deltas)]

    path = tmp_path / "b" / "ef.safetensors"
    life = PayloadEncoder(rt, path)
    assert life.feedback and life.round == -1 and not path.exists()
    got = [[life.encode(0, f, d, _meta(rt, 0, f))[0] for f, d in enumerate(deltas[0])]]
    life.save()
    for r in range(1, ROUNDS):  # a restart before every round: a fresh encoder from the state file
        life = PayloadEncoder(rt, path)
        assert life.round == r - 1 and set(life.compressor.residual) == {0, 1}
        got.append([life.encode(r, f, d, _meta(rt, r, f))[0] for f, d in enumerate(deltas[r])])
        life.save()
    assert got == want  # the same residuals carried across the restarts: the same bytes
    assert sorted(p.name for p in path.parent.iterdir()) == ["ef.safetensors"]  # no temporary file left

    # a restart after the state was saved but before the round's payloads landed: encoding the
    # same round again gives the same bytes (the round is not counted twice)
    again = PayloadEncoder(rt, path)
    assert [again.encode(ROUNDS - 1, f, d, _meta(rt, ROUNDS - 1, f))[0]
            for f, d in enumerate(deltas[-1])] == want[-1]

    # what was sent plus the residual is what was trained, per fragment (plain error feedback)
    for f in range(len(rt.fragments)):
        sent = sum(flatten_fragment(rt.decode_payload(w[f], f)[0]).double() for w in want)
        total = sum(flatten_fragment(ds[f]).double() for ds in deltas)
        assert torch.allclose(sent + unbroken.compressor.residual[f].double(), total, atol=1e-6)


def test_the_commitment_is_over_the_vector_the_syncer_decodes(tmp_path):
    rt = _runtime("mx_fp4")
    d = _deltas(rt, 1)[0][1]
    enc = PayloadEncoder(rt, tmp_path / "ef.safetensors")
    assert not enc.feedback
    blob, flat = enc.encode(0, 1, d, _meta(rt, 0, 1))
    assert enc.save() is None and not (tmp_path / "ef.safetensors").exists()  # nothing to keep without feedback
    decoded, meta = rt.decode_payload(blob, 1)
    assert torch.equal(flat, flatten_fragment(decoded)) and not torch.equal(flat, flatten_fragment(d))
    assert meta["kind"] == "pseudo_gradient" and json.loads(meta["codec"])["element"] == "fp4_e2m1"
    dense = encode_fragment(d, _meta(rt, 0, 1))
    assert len(blob) * 6 < len(dense), (len(blob), len(dense))  # 4.25 bits a value against 32


def test_dense_payloads_are_unchanged(tmp_path):
    rt = _runtime(None)
    assert rt.codec == NoCompression()
    d = _deltas(rt, 1)[0][0]
    enc = PayloadEncoder(rt, tmp_path / "ef.safetensors")
    blob, flat = enc.encode(0, 0, d, _meta(rt, 0, 0))
    assert blob == encode_fragment(d, _meta(rt, 0, 0)) and torch.equal(flat, flatten_fragment(d))
    assert enc.save() is None and list(tmp_path.iterdir()) == []


def test_a_state_of_another_codec_or_a_torn_file_is_refused_with_its_path(tmp_path):
    path = tmp_path / "ef.safetensors"
    rt = _runtime({"kind": "topk", "k": 16, "chunk": 512})
    enc = PayloadEncoder(rt, path)
    enc.encode(0, 0, _deltas(rt, 1)[0][0], _meta(rt, 0, 0))
    enc.save()
    with pytest.raises(TenzroError, match="saved under codec"):
        PayloadEncoder(_runtime("topk"), path)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(TenzroError, match="unreadable"):
        PayloadEncoder(rt, path)


def test_a_malformed_compressed_payload_is_rejected_with_a_reason():
    rt = _runtime("mx_fp4")
    d = _deltas(rt, 1)[0][0]
    good = PayloadEncoder(rt, "unused").encode(0, 0, d, _meta(rt, 0, 0))[0]
    assert check_payload(good, rt, 0, 0) > 0
    cases = {
        "truncated": (good[:-7], "safetensors|bytes|truncated|length"),
        "dense under an MX task": (encode_fragment(d, _meta(rt, 0, 0)), "missing keys"),
        "another codec": (PayloadEncoder(_runtime("mx_int8"), "unused").encode(0, 0, d, _meta(rt, 0, 0))[0],
                          "is not the task's codec"),
    }
    # the last byte is the last block's E8M0 scale (tensors in name order: elements, scales); 0xFF
    # is NaN, which the decoder refuses (no decoded value may be non-finite)
    cases["a NaN scale"] = (good[:-1] + b"\xff", "0xFF")
    for what, (data, reason) in cases.items():
        with pytest.raises(PayloadError, match=reason):
            rt.decode_payload(data, 0)
        with pytest.raises(PayloadCheckError, match="not a payload of the codec \\(the task's"):
            check_payload(data, rt, 0, 0, source=what)
    assert rt.payload_cap(0) >= len(good)


def test_the_payload_cap_covers_a_top_k_payload_larger_than_the_dense_one():
    dense, rt = _runtime(None), _runtime({"kind": "topk", "k": 512, "chunk": 512, "bits": 32})
    d = _deltas(rt, 1)[0][0]
    blob = PayloadEncoder(rt, "unused").encode(0, 0, d, _meta(rt, 0, 0))[0]
    assert len(blob) > len(encode_fragment(d, _meta(rt, 0, 0))) and rt.payload_cap(0) >= len(blob)
    assert rt.payload_cap(0) > dense.payload_cap(0)

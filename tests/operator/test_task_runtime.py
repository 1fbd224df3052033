"""TaskRuntime (weights <-> fragment blobs) and RoundTranscript (canonical bytes, hash checks)."""

import hashlib
import json
from pathlib import Path

import pytest

from tenzro_operator.errors import SpecError
from tenzro_operator.spec import parse_spec
from tenzro_operator.task_runtime import INITIAL_ROUND, TaskRuntime, WeightsError
from tenzro_operator.transcript import BlobRef, FragmentRecord, RoundTranscript, Submission, TranscriptError
from tenzro_trainer.config import ModelConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "operator" / "examples" / "task_spec.json"


@pytest.fixture(scope="module")
def runtime():
    return TaskRuntime.from_model_config("0x" + "11" * 32, ModelConfig.preset("demo"), 4)


def test_weights_round_trip_is_bit_exact_and_deterministic(runtime):
    state = runtime.initial_state(seed=7)
    blobs = runtime.encode_weights(state, INITIAL_ROUND)
    assert blobs == runtime.encode_weights(runtime.initial_state(seed=7), INITIAL_ROUND)
    assert blobs != runtime.encode_weights(runtime.initial_state(seed=8), INITIAL_ROUND)
    back = runtime.decode_weights(blobs, [hashlib.sha256(b).digest() for b in blobs])
    assert set(back) == set(state) and all(bool((back[k] == state[k]).all()) for k in state)
    assert sum(runtime.sizes) == sum(t.numel() for t in state.values())


def test_decode_names_the_fragment_whose_hash_differs(runtime):
    blobs = runtime.encode_weights(runtime.initial_state(seed=0), 0)
    hashes = [hashlib.sha256(b).digest() for b in blobs]
    hashes[2] = bytes(32)
    with pytest.raises(WeightsError, match="fragment 2: sha256"):
        runtime.decode_weights(blobs, hashes)


def test_decode_refuses_a_blob_of_another_fragment_or_truncated_bytes(runtime):
    blobs = runtime.encode_weights(runtime.initial_state(seed=0), 0)
    with pytest.raises(WeightsError, match="fragment 0"):
        runtime.decode_weights([blobs[1], blobs[1], blobs[2], blobs[3]])
    with pytest.raises(WeightsError, match="fragment 3"):
        runtime.decode_weights(blobs[:3] + [blobs[3][:-10]])
    with pytest.raises(WeightsError, match="expected 4 fragment blobs"):
        runtime.decode_weights(blobs[:3])


def test_spec_with_an_inconsistent_model_is_a_spec_error():
    spec = json.loads(EXAMPLE.read_text())
    spec["architecture"]["metadata"] = {"preset": "demo", "d_model": 65}
    with pytest.raises(SpecError, match="architecture: d_model"):
        TaskRuntime.from_spec(parse_spec(spec))


def _transcript(order):
    subs = [Submission(trainer=t, cid=f"cid-{t}", sha256="0x" + "ab" * 32) for t in order]
    frag = FragmentRecord(fragment=0, accepted=subs, rejected=[], weights=BlobRef(cid="w", sha256="0x" + "cd" * 32),
                          aggregated=True)
    return RoundTranscript(task_id="0x" + "11" * 32, round=3, rule={"name": "Mean"}, outer={"lr": 0.7},
                           input_weights_root="0x01", weights_root="0x02", accepted_count=len(subs), fragments=[frag])


def test_transcript_hash_ignores_submission_order_and_parse_checks_it():
    a, b = _transcript(["0xbb", "0xaa"]), _transcript(["0xaa", "0xbb"])
    assert a.canonical_bytes() == b.canonical_bytes() and a.hash() == b.hash()
    assert RoundTranscript.parse(a.canonical_bytes(), a.hash()).round == 3
    with pytest.raises(TranscriptError, match="sha256"):
        RoundTranscript.parse(a.canonical_bytes(), bytes(32))
    with pytest.raises(TranscriptError, match="malformed"):
        RoundTranscript.parse(b'{"round": 1}')

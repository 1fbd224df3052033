"""Task spec: the docs' shape, every validation error with its field path, canonical bytes and hash."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from tenzro_operator.errors import SpecError
from tenzro_operator.spec import (
    TaskSpec,
    canonical_json,
    load_spec,
    parse_spec,
    spec_hash,
    task_id_bytes32,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "operator/examples/task_spec.json"

# The spec of the Tenzro Train docs, verbatim except the two elided placeholders
# ("0xc0ffee...deadbeef" is not hex; a real hash has 64 digits).
DOCS_SPEC = {
    "task_id": "train-2026-04-25-timesfm-200m", "sponsor_did": "did:tenzro:human:01J2Z7K8...",
    "sponsor_address": "0x7a4bcb13a6b2b384c284b5caa6e5ef3126527f93",
    "architecture": {"family": "timesfm", "param_count": 200000000, "modality": "Timeseries", "fragment_count": 12,
                     "dtype": "bf16", "metadata": {"context_len": 2048, "horizon": 128, "n_quantiles": 10}},
    "tier": "Open", "aggregation": "Mean", "trainer_count": 8, "quorum": 6, "inner_steps": 24, "max_rounds": 1024,
    "grace_window_ms": 30000, "reward_pool": "1000000000000000000000", "dataset_ref": "ipfs://QmXyZ...",
    "dataset_hash": "0xc0ffee" + "00" * 25 + "deadbeef", "min_throughput": None, "created_at": 1761350400,
    "metadata": {"eval_suite": "monash-tsf-v2", "target_mase": 0.8},
}


@pytest.fixture
def raw() -> dict:
    return json.loads(EXAMPLE.read_text())


def test_docs_shape_is_accepted():
    spec = parse_spec(DOCS_SPEC)
    assert spec.trainer_count == 8 and spec.quorum == 6 and spec.architecture.fragment_count == 12
    assert spec.reward_pool_atto == 1000 * 10**18
    assert spec.aggregation_name == "Mean" and spec.aggregation_rule_id == 0
    assert spec.protocol is None
    with pytest.raises(SpecError, match="metadata.protocol"):
        spec.require_protocol()


def test_docs_placeholder_hash_is_rejected_by_name():
    d = dict(DOCS_SPEC, dataset_hash="0xc0ffee...deadbeef")
    with pytest.raises(SpecError) as ei:
        parse_spec(d)
    assert ei.value.path == "dataset_hash"


def test_example_file_loads_with_protocol():
    spec = load_spec(EXAMPLE)
    p = spec.require_protocol()
    assert p.min_stake_atto == 100 * 10**18
    assert sum(p.fragment_sizes) == spec.architecture.param_count
    assert spec.aggregation_name == "TrimmedMean" and spec.aggregation_params == {"alpha_bps": 1250}


@pytest.mark.parametrize("rule,name,rule_id,param", [
    ("Mean", "Mean", 0, 0),
    ({"TrimmedMean": {"alpha_bps": 1250}}, "TrimmedMean", 1, 1250),
    ("CoordinateMedian", "CoordinateMedian", 2, 0),
])
def test_aggregation_forms_round_trip(raw, rule, name, rule_id, param):
    raw.update(aggregation=rule, trainer_count=8, quorum=6)
    spec = parse_spec(raw)
    assert (spec.aggregation_name, spec.aggregation_rule_id, spec.aggregation_param) == (name, rule_id, param)
    assert json.loads(canonical_json(spec))["aggregation"] == rule  # serde external tagging preserved


def _mutate(raw, fn):
    d = copy.deepcopy(raw)
    fn(d)
    return d


@pytest.mark.parametrize("mutation,path,fragment", [
    (lambda d: d.update(quorum=3), "quorum", "exceeds trainer_count"),                      # K > M
    (lambda d: d.update(quorum=0), "quorum", "greater than or equal to 1"),                # K = 0
    (lambda d: d["architecture"].update(fragment_count=0), "architecture.fragment_count", "greater than"),
    (lambda d: d.update(max_rounds=0), "max_rounds", "greater than or equal to 1"),
    (lambda d: d.update(trainer_count=0), "trainer_count", "greater than or equal to 1"),
    (lambda d: d["architecture"].update(family="gpt2"), "architecture.family", "unknown architecture family"),
    (lambda d: d.update(tier="Verified"), "tier", "only 'Open'"),
    (lambda d: d.update(tier="Secret"), "tier", "Input should be"),
    (lambda d: d.update(dataset_hash="0xzz" + "0" * 62), "dataset_hash", "64 hex digits"),
    (lambda d: d.update(sponsor_address="0x1234"), "sponsor_address", "40 hex digits"),
    (lambda d: d.update(reward_pool="1e21"), "reward_pool", "decimal integer string"),
    (lambda d: d.update(reward_pool=1000), "reward_pool", "JSON string"),
    (lambda d: d.update(reward_pool="0"), "reward_pool", "positive"),
    (lambda d: d.update(aggregation="Median"), "aggregation", "unknown aggregation rule"),
    (lambda d: d.update(aggregation={"TrimmedMean": {"alpha_bps": 6000}}), "aggregation.TrimmedMean.alpha_bps",
     "less than 5000"),
    # Krum is not provable coordinate by coordinate: the registry reverts RuleNotProvable in the Open tier
    (lambda d: d.update(aggregation={"Krum": {"f": 1}}, trainer_count=8, quorum=6), "aggregation",
     "Krum cannot be posted in the Open tier"),
    (lambda d: d.update(trainer_count=1025, quorum=1), "trainer_count", "exceeds 2048"),  # M*F = 2050
    (lambda d: d.update(syncer_fee_bps=2001), "syncer_fee_bps", "less than or equal to 2000"),
    (lambda d: d.update(syncer_fee_bps=-1), "syncer_fee_bps", "greater than or equal to 0"),
    (lambda d: d.update(syncer_bond="0"), "syncer_bond", "positive"),
    (lambda d: d.update(syncer_bond=10**19), "syncer_bond", "JSON string"),
    (lambda d: d.update(syncer_bond="ten"), "syncer_bond", "decimal integer string"),
    (lambda d: d.update(enrollment_window_ms=0), "enrollment_window_ms", "greater than 0"),
    (lambda d: d.update(enrollment_window_ms=30 * 86_400_000 + 1), "enrollment_window_ms",
     "less than or equal to 2592000000"),
    (lambda d: d.update(dataset_ref="https://x"), "dataset_ref", "ipfs://"),
    (lambda d: d.update(sponsor_did="alice"), "sponsor_did", "DID"),
    (lambda d: d.pop("quorum"), "quorum", "Field required"),
    (lambda d: d.update(colour="blue"), "colour", "Extra inputs"),
    (lambda d: d["metadata"]["protocol"].update(fragment_sizes=[1000]), "metadata.protocol.fragment_sizes",
     "has 1 entries"),
    (lambda d: d["metadata"]["protocol"].update(fragment_sizes=[500, 400]), "metadata.protocol.fragment_sizes",
     "sum to 900"),
    (lambda d: d["metadata"]["protocol"]["initial_weights"].pop(), "metadata.protocol.initial_weights",
     "has 1 entries"),
    (lambda d: d["metadata"]["protocol"]["initial_weights"][1].update(sha256="0x12"),
     "metadata.protocol.initial_weights[1].sha256", "64 hex digits"),
    (lambda d: d["metadata"]["protocol"].update(min_stake="-5"), "metadata.protocol.min_stake", "decimal"),
    # metadata.outer: the syncer's outer optimizer, so a posted task can always build it
    (lambda d: d["metadata"].update(outer={"lr": 0}), "metadata.outer.lr", "greater than 0"),
    (lambda d: d["metadata"].update(outer={"momentum": 1.0}), "metadata.outer.momentum", "less than 1"),
    (lambda d: d["metadata"].update(outer={"momentum": 0}), "metadata.outer.momentum", "Nesterov needs momentum"),
    (lambda d: d["metadata"].update(outer={"learning_rate": 0.5}), "metadata.outer.learning_rate", "Extra inputs"),
    (lambda d: d["metadata"].update(outer=0.7), "metadata.outer", "valid dictionary"),
])
def test_each_error_names_its_field(raw, mutation, path, fragment):
    with pytest.raises(SpecError) as ei:
        parse_spec(_mutate(raw, mutation))
    assert ei.value.path == path
    assert fragment in str(ei.value)


def test_v2_fields_default_and_are_hashed(raw):
    """A spec without the protocol-v2 fields still parses, with the defaults; its canonical bytes
    (what is pinned and hashed at posting) carry them, so the spec hash covers them."""
    for key in ("enrollment_window_ms", "syncer_fee_bps", "syncer_bond"):
        raw.pop(key, None)
    spec = parse_spec(raw)
    assert (spec.enrollment_window_ms, spec.syncer_fee_bps, spec.syncer_bond_atto) == (3_600_000, 100, 10 * 10**18)
    doc = json.loads(canonical_json(spec))
    assert (doc["enrollment_window_ms"], doc["syncer_fee_bps"], doc["syncer_bond"]) == (3_600_000, 100,
                                                                                       "10000000000000000000")
    assert spec_hash(parse_spec(doc)) == spec_hash(spec)
    assert spec_hash(parse_spec(dict(doc, syncer_fee_bps=200))) != spec_hash(spec)
    # the registry stores the window in whole seconds, rounded up
    assert parse_spec(dict(doc, enrollment_window_ms=1)).enrollment_seconds == 1
    assert parse_spec(dict(doc, enrollment_window_ms=1_001)).enrollment_seconds == 2
    # the pay per round is the registry's integer division: 1000 TNZO * 1 % / 2 rounds
    assert spec.syncer_fee_per_round_atto == 5 * 10**18


def test_error_message_names_the_file(tmp_path, raw):
    raw["quorum"] = 0
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(raw))
    with pytest.raises(SpecError) as ei:
        load_spec(f)
    assert str(f) in str(ei.value) and "quorum" in str(ei.value)


def test_missing_file_and_bad_json(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        load_spec(bad)
    nan = tmp_path / "nan.json"
    nan.write_text(EXAMPLE.read_text().replace('"norm_multiple": 5.0', '"norm_multiple": NaN'))
    with pytest.raises(SpecError, match="NaN is not allowed"):
        load_spec(nan)


def test_canonical_bytes_match_an_independent_encoding(raw):
    # Independent oracle: the stdlib's JSON with the documented options over the raw file.
    expected = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    spec = parse_spec(raw)
    assert canonical_json(spec) == expected
    assert spec_hash(spec) == hashlib.sha256(expected).digest()


def test_canonical_hash_is_stable_under_key_order_and_whitespace(raw):
    h = spec_hash(parse_spec(raw))
    shuffled = json.loads(json.dumps(raw), object_pairs_hook=lambda kv: dict(reversed(kv)))
    assert list(shuffled) != list(raw)
    assert spec_hash(parse_spec(json.dumps(shuffled, indent=4))) == h
    assert spec_hash(parse_spec(canonical_json(parse_spec(raw)))) == h  # canonical bytes re-parse to themselves
    raw["inner_steps"] += 1
    assert spec_hash(parse_spec(raw)) != h


def test_canonical_json_is_utf8_without_escapes(raw):
    raw["metadata"]["notes"] = "Zürich – 東京"
    data = canonical_json(parse_spec(raw))
    assert "Zürich – 東京".encode() in data
    assert b" " not in data.replace("Zürich – 東京".encode(), b"")


def test_task_id_bytes32():
    # keccak256("hello"), a widely published vector.
    assert task_id_bytes32("hello").hex() == "1c8aff950685c2ed4bc3174f3472287b56d9517b9c948127319a09a7a36deac8"
    hex_id = "0x" + "ab" * 32
    assert task_id_bytes32(hex_id) == bytes.fromhex("ab" * 32)
    assert task_id_bytes32(b"\x01" * 32) == b"\x01" * 32
    with pytest.raises(SpecError):
        task_id_bytes32("")
    with pytest.raises(SpecError):
        task_id_bytes32(b"\x01")


def test_task_id_rule_agrees_with_the_receipt_encoder():
    receipt = pytest.importorskip("tenzro_operator.receipt")
    for tid in ("train-2026-04-25-timesfm-200m", "0x" + "cd" * 32, "ü"):
        assert task_id_bytes32(tid) == receipt.task_id_bytes(tid)


def test_spec_is_immutable(raw):
    spec = parse_spec(raw)
    assert isinstance(spec, TaskSpec)
    with pytest.raises(Exception):
        spec.quorum = 2


def test_spec_from_bytes_checks_the_on_chain_hash(raw):
    from tenzro_operator.spec import spec_from_bytes

    spec = parse_spec(raw)
    data = canonical_json(spec)
    assert spec_from_bytes(data, spec_hash(spec)) == spec
    with pytest.raises(SpecError, match="the chain says"):
        spec_from_bytes(data, b"\x00" * 32)
    pretty = json.dumps(raw, indent=2).encode()
    with pytest.raises(SpecError, match="not in canonical form"):
        spec_from_bytes(pretty, hashlib.sha256(pretty).digest())


def test_one_flow_and_scoring_are_spec_fields(raw):
    assert parse_spec(raw).require_protocol().flow == "root"  # a spec without the field
    d = copy.deepcopy(raw)
    d["metadata"]["protocol"].update(score_min=0.0)
    proto = parse_spec(d).require_protocol()
    assert (proto.flow, proto.score_min) == ("root", 0.0)
    d["metadata"]["protocol"]["flow"] = "v1"  # protocol v1's flow is gone: the error says so and what to do
    with pytest.raises(SpecError, match="removed in protocol v3.*set flow: root"):
        parse_spec(d)
    d["metadata"]["protocol"].update(flow="roots", score_min=None)
    with pytest.raises(SpecError, match="flow"):
        parse_spec(d)


def test_a_spec_written_for_v1_evictions_still_parses(raw):
    """``max_missed_rounds`` (protocol v1's eviction threshold) is accepted and ignored: the
    registry's TaskParams has no such field since nobody is evicted."""
    d = copy.deepcopy(raw)
    d["metadata"]["protocol"]["max_missed_rounds"] = 2
    assert parse_spec(d).require_protocol().max_missed_rounds == 2
    assert parse_spec(raw).require_protocol().max_missed_rounds is None  # the example no longer writes it


def test_compression_is_a_spec_field_by_name_or_codec_object(raw):
    from tenzro_trainer.compression import MXCodec, NoCompression, TopKCodec

    proto = parse_spec(raw).require_protocol()  # a spec without the field: dense payloads, hash unchanged
    assert proto.compression is None and proto.codec == NoCompression()
    for value, codec in [("mx_fp4", MXCodec(element="fp4_e2m1")), ("topk", TopKCodec()),
                         ({"kind": "mx", "element": "int8", "error_feedback": True},
                          MXCodec(element="int8", error_feedback=True)),
                         ({"kind": "topk", "k": 8, "chunk": 256, "bits": 32}, TopKCodec(k=8, chunk=256, bits=32)),
                         ("none", NoCompression()), (None, NoCompression())]:
        d = copy.deepcopy(raw)
        d["metadata"]["protocol"]["compression"] = value
        spec = parse_spec(d)
        assert spec.require_protocol().codec == codec
        assert spec_hash(spec) != spec_hash(parse_spec(raw)) or value is None  # the codec is hashed with the spec


@pytest.mark.parametrize("value, fragment", [
    ("mx_fp5", "unknown compression 'mx_fp5'; a name is one of none, mx_int8"),
    (4, "must be a codec name or a codec object, got int"),
    ({"kind": "mx", "element": "fp5"}, "mx.element"),
    ({"kind": "topk", "k": 9000}, "k (9000) must not exceed chunk (4096)"),
    ({"kind": "mx", "elemnt": "fp4_e2m1"}, "elemnt"),
    ({"kind": "zstd"}, "kind"),
])
def test_an_invalid_compression_is_refused_with_its_path(raw, value, fragment):
    d = copy.deepcopy(raw)
    d["metadata"]["protocol"]["compression"] = value
    with pytest.raises(SpecError) as e:
        parse_spec(d)
    assert e.value.path == "metadata.protocol.compression" and fragment in str(e.value), str(e.value)

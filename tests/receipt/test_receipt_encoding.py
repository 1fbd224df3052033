"""Tests of the Python reference of receipt encoding v1 (tenzro_operator.receipt).

Three independent anchors: the committed vectors (tests/vectors/run_root_v1.json),
hand-written hashlib/struct steps that share no code with the module, and
properties (round trips, any bit flip rejected) checked with hypothesis.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenzro_operator import receipt as rc

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "run_root_v1.json"
DATA = json.loads(VECTORS.read_text())
VALID = {c["name"]: c for c in DATA["valid"]}


def b(x: str) -> bytes:
    assert x.startswith("0x")
    return bytes.fromhex(x[2:])


def H(*parts: bytes) -> bytes:
    return hashlib.sha256(b"".join(parts)).digest()


D = b"tenzro/train/run-root/v1"


# ---------------------------------------------------------------- independent hand computation


def test_domain_is_the_24_ascii_bytes():
    assert rc.DOMAIN == D
    assert len(D) == 24
    assert DATA["domain"] == "0x" + D.hex()


def test_r1_case_by_hand():
    """Recompute the whole R=1, F=1 vector with struct and hashlib only."""
    c = VALID["r1_f1"]
    row = c["round_rows"][0]
    (h0,) = [b(x) for x in row["fragment_hashes"]]
    wr = H(D, b"\x03", struct.pack(">I", 1), h0)
    assert wr.hex() == row["weights_root"][2:]
    th = b(row["transcript_hash"])
    digest = H(D, b"\x02", struct.pack(">I", 0), wr, th, struct.pack(">I", row["accepted_count"]))
    assert digest.hex() == row["round_digest"][2:]
    # one transcript leaf: the root is that leaf
    troot = H(D, b"\x00", struct.pack(">I", 0), th)
    assert troot.hex() == c["transcript_root"][2:]
    # task id: keccak256("demo-task") (checked against eth_utils, independent of the module)
    from eth_utils import keccak

    assert b(c["task_id"]) == keccak(text="demo-task")
    header = (
        b"\x01"
        + int(c["chain_id"]).to_bytes(32, "big")
        + b(c["registry"])
        + b(c["task_id"])
        + b(c["spec_hash"])
        + wr
        + troot
        + struct.pack(">II", 1, c["trainer_count"])
    )
    assert len(header) == 189
    receipt = header + digest
    assert receipt.hex() == c["receipt"][2:]
    leaf0 = H(D, b"\x00", header)
    leaf1 = H(D, b"\x00", struct.pack(">I", 0), digest)
    root = H(D, b"\x01", leaf0, leaf1)
    assert root.hex() == c["run_root"][2:]
    assert (receipt + root).hex() == c["verifier_input"][2:]


def test_r4_odd_leaf_count_by_hand():
    """R=4 gives 5 run leaves: ((l0 l1)(l2 l3)) then l4 carried up twice."""
    c = VALID["r4_f2"]
    leaves = [b(x) for x in c["run_leaves"]]
    assert len(leaves) == 5
    n01, n23 = H(D, b"\x01", leaves[0], leaves[1]), H(D, b"\x01", leaves[2], leaves[3])
    root = H(D, b"\x01", H(D, b"\x01", n01, n23), leaves[4])
    assert root.hex() == c["run_root"][2:]


def test_merkle_shapes_by_hand():
    a, bb, cc = (bytes([i]) * 32 for i in (1, 2, 3))
    assert rc.merkle_root([a]) == a
    assert rc.merkle_root([a, bb]) == H(D, b"\x01", a, bb)
    assert rc.merkle_root([a, bb, cc]) == H(D, b"\x01", H(D, b"\x01", a, bb), cc)
    # never duplicated: differs from the Bitcoin-style duplicate-last rule
    assert rc.merkle_root([a, bb, cc]) != H(D, b"\x01", H(D, b"\x01", a, bb), H(D, b"\x01", cc, cc))


# ---------------------------------------------------------------- vectors


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_vector(name):
    c = VALID[name]
    digests, transcripts = [], []
    for row in c["round_rows"]:
        wr = rc.weights_root([b(x) for x in row["fragment_hashes"]])
        assert wr == b(row["weights_root"])
        d = rc.round_digest(row["round"], wr, b(row["transcript_hash"]), row["accepted_count"])
        assert d == b(row["round_digest"])
        digests.append(d)
        transcripts.append(b(row["transcript_hash"]))
    assert rc.transcript_root(transcripts) == b(c["transcript_root"])
    assert b(c["final_model_hash"]) == b(c["round_rows"][-1]["weights_root"])
    data = rc.encode_receipt(
        chain_id=int(c["chain_id"]),
        registry=c["registry"],
        task_id=b(c["task_id"]),
        spec_hash=b(c["spec_hash"]),
        final_model_hash=b(c["final_model_hash"]),
        transcript_root=b(c["transcript_root"]),
        trainer_count=c["trainer_count"],
        round_digests=digests,
    )
    assert data == b(c["receipt"])
    assert len(data) == c["receipt_length"] == 189 + 32 * c["rounds"]
    assert rc.merkle_root([b(x) for x in c["run_leaves"]]) == b(c["run_root"])
    assert rc.run_root(data) == b(c["run_root"])
    assert rc.verify(data, b(c["run_root"]))
    assert rc.verify_raw(b(c["verifier_input"])) == b"\x01"
    dec = rc.decode_receipt(data)
    assert dec.rounds == c["rounds"]
    assert dec.registry_address == c["registry"]
    assert dec.chain_id == int(c["chain_id"])
    assert dec.encode() == data
    assert dec.run_root() == b(c["run_root"])


@pytest.mark.parametrize("case", DATA["invalid"], ids=lambda c: c["name"])
def test_invalid_vector(case):
    raw = b(case["input"])
    assert rc.verify_raw(raw) == b"\x00"
    if len(raw) >= 32:
        assert rc.verify(raw[:-32], raw[-32:]) is False


def test_merkle_vectors():
    for m in DATA["merkle"]:
        assert rc.merkle_root([b(x) for x in m["leaves"]]) == b(m["root"])


def test_status_vectors_by_hand():
    """A round digest folded with its challenge status: sha256(DOMAIN || 0x04 || digest || u8(s)),
    status 0 leaving the digest as it is; bad input is refused with a message."""
    for v in DATA["status"]:
        d, s = b(v["digest"]), v["status"]
        want = d if s == 0 else H(D, b"\x04", d, bytes([s]))
        assert b(v["folded"]) == want == rc.with_status(d, s)
    assert {v["status"] for v in DATA["status"]} == {0, 1, 255}
    with pytest.raises(rc.ReceiptFormatError, match="uint8"):
        rc.with_status(bytes(32), 256)
    with pytest.raises(rc.ReceiptFormatError, match="32 bytes"):
        rc.with_status(bytes(31), 1)


def test_vector_file_is_up_to_date():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_vectors", VECTORS.with_name("make_run_root_vectors.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.render() == VECTORS.read_text(), "run tests/vectors/make_run_root_vectors.py"


# ---------------------------------------------------------------- errors


def test_decode_errors_say_what_is_wrong():
    good = b(VALID["r2_f3"]["receipt"])
    with pytest.raises(rc.ReceiptFormatError, match="at least 221"):
        rc.decode_receipt(good[:200])
    with pytest.raises(rc.ReceiptFormatError, match="version byte is 0x02"):
        rc.decode_receipt(b"\x02" + good[1:])
    with pytest.raises(rc.ReceiptFormatError, match="must be 253 bytes, got 254"):
        rc.decode_receipt(good + b"\x00")
    with pytest.raises(rc.ReceiptFormatError, match="R = 0"):
        rc.decode_receipt(good[:181] + bytes(4) + good[185:])
    with pytest.raises(rc.ReceiptFormatError):
        rc.run_root(good[:-1])


def test_encode_errors():
    z = bytes(32)
    ok = dict(chain_id=1, registry=bytes(20), task_id=z, spec_hash=z, final_model_hash=z, transcript_root=z,
              trainer_count=1, round_digests=[z])
    rc.encode_receipt(**ok)
    for field, bad, msg in [
        ("round_digests", [], "R >= 1"),
        ("task_id", b"\x00" * 31, "task_id must be 32 bytes, got 31"),
        ("registry", "0x1234", "20-byte address"),
        ("registry", "0xzz", "not hex"),
        ("trainer_count", 2**32, "trainer_count must be an integer"),
        ("chain_id", -1, "uint256"),
        ("chain_id", 2**256, "uint256"),
        ("round_digests", [z, b"\x01"], r"round_digests\[1\] must be 32 bytes"),
    ]:
        with pytest.raises(rc.ReceiptFormatError, match=msg):
            rc.encode_receipt(**{**ok, field: bad})
    with pytest.raises(rc.ReceiptFormatError):
        rc.weights_root([])
    with pytest.raises(rc.ReceiptFormatError):
        rc.transcript_root([])
    with pytest.raises(rc.ReceiptFormatError):
        rc.merkle_root([])
    with pytest.raises(rc.ReceiptFormatError, match="round must be"):
        rc.round_digest(-1, z, z, 0)


def test_verify_never_raises_on_bad_input():
    assert rc.verify(b"", bytes(32)) is False
    assert rc.verify(b(VALID["r1_f1"]["receipt"]), b"\x00" * 31) is False
    assert rc.verify(b(VALID["r1_f1"]["receipt"]), "not bytes") is False  # type: ignore[arg-type]
    assert rc.verify_raw(b"") == b"\x00"


def test_task_id_bytes():
    # keccak256("") is a well-known constant (not NIST SHA3-256)
    assert rc.task_id_bytes("").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    hex_id = "0x" + "ab" * 32
    assert rc.task_id_bytes(hex_id) == bytes.fromhex("ab" * 32)
    assert len(rc.task_id_bytes("0x" + "zz" * 32)) == 32  # not hex: hashed as a string


# ---------------------------------------------------------------- properties

h32 = st.binary(min_size=32, max_size=32)


@settings(max_examples=60, deadline=None)
@given(
    chain_id=st.integers(0, 2**256 - 1),
    registry=st.binary(min_size=20, max_size=20),
    task_id=h32,
    trainer_count=st.integers(0, 2**32 - 1),
    digests=st.lists(h32, min_size=1, max_size=20),
)
def test_roundtrip_and_verify(chain_id, registry, task_id, trainer_count, digests):
    data = rc.encode_receipt(chain_id=chain_id, registry=registry, task_id=task_id, spec_hash=task_id,
                             final_model_hash=digests[-1], transcript_root=digests[0],
                             trainer_count=trainer_count, round_digests=digests)
    dec = rc.decode_receipt(data)
    assert (dec.chain_id, dec.registry, dec.task_id, dec.trainer_count) == (chain_id, registry, task_id, trainer_count)
    assert dec.round_digests == tuple(digests)
    root = rc.run_root(data)
    assert rc.verify(data, root)


@settings(max_examples=80, deadline=None)
@given(index=st.integers(0, 253 + 32 - 1), bit=st.integers(0, 7))
def test_any_bit_flip_is_rejected(index, bit):
    raw = bytearray(b(VALID["r2_f3"]["verifier_input"]))
    raw[index] ^= 1 << bit
    assert rc.verify_raw(bytes(raw)) == b"\x00"


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_rejected(raw):
    assert rc.verify_raw(raw) == b"\x00"

"""Generate tests/vectors/run_root_v1.json, the test vectors of receipt encoding v1.

Run from the repository root:

    .venv/bin/python tests/vectors/make_run_root_vectors.py          # rewrite the JSON
    .venv/bin/python tests/vectors/make_run_root_vectors.py --check  # exit 1 if it differs

Everything is derived from a fixed seed with the Python reference
(``tenzro_operator.receipt``), so the file is reproducible byte for byte.
The Solidity side (``contracts/lib/RunRoot.sol``, ``contracts/ReceiptVerifier.sol``)
is tested against this file; see ``contracts/RECEIPT.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

from tenzro_operator import receipt as rc

SEED = 20261120
OUT = Path(__file__).with_name("run_root_v1.json")
ANVIL_CHAIN_ID = 31337


def hx(b: bytes) -> str:
    return "0x" + b.hex()


class Gen:
    """Deterministic 'random-looking' 32-byte values from the fixed seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def h32(self) -> bytes:
        return self.rng.randbytes(32)

    def addr(self) -> bytes:
        return self.rng.randbytes(20)


def make_case(
    gen: Gen,
    name: str,
    description: str,
    *,
    rounds: int,
    fragments: int,
    chain_id: int,
    trainer_count: int,
    task_id_string: str | None = None,
    accepted: list[int] | None = None,
) -> dict:
    registry = gen.addr()
    task_id = rc.task_id_bytes(task_id_string) if task_id_string else gen.h32()
    spec_hash = gen.h32()
    round_rows = []
    digests: list[bytes] = []
    transcripts: list[bytes] = []
    for r in range(rounds):
        frag = [gen.h32() for _ in range(fragments)]
        wr = rc.weights_root(frag)
        th = gen.h32()
        acc = accepted[r] if accepted else gen.rng.randrange(0, trainer_count * fragments + 1)
        rd = rc.round_digest(r, wr, th, acc)
        digests.append(rd)
        transcripts.append(th)
        round_rows.append(
            {
                "round": r,
                "fragment_hashes": [hx(h) for h in frag],
                "weights_root": hx(wr),
                "transcript_hash": hx(th),
                "accepted_count": acc,
                "round_digest": hx(rd),
            }
        )
    final_model_hash = rc.weights_root([bytes.fromhex(h[2:]) for h in round_rows[-1]["fragment_hashes"]])
    troot = rc.transcript_root(transcripts)
    data = rc.encode_receipt(
        chain_id=chain_id,
        registry=registry,
        task_id=task_id,
        spec_hash=spec_hash,
        final_model_hash=final_model_hash,
        transcript_root=troot,
        trainer_count=trainer_count,
        round_digests=digests,
    )
    header = data[: rc.HEADER_LENGTH]
    leaves = [hashlib.sha256(rc.DOMAIN + b"\x00" + header).digest()] + [
        rc.indexed_leaf(r, d) for r, d in enumerate(digests)
    ]
    root = rc.run_root(data)
    assert root == rc.merkle_root(leaves)
    case = {
        "name": name,
        "description": description,
        "chain_id": str(chain_id),
        "registry": hx(registry),
        "task_id": hx(task_id),
        "spec_hash": hx(spec_hash),
        "final_model_hash": hx(final_model_hash),
        "transcript_root": hx(troot),
        "rounds": rounds,
        "trainer_count": trainer_count,
        "round_rows": round_rows,
        "receipt": hx(data),
        "receipt_length": len(data),
        "run_leaves": [hx(x) for x in leaves],
        "run_root": hx(root),
        "verifier_input": hx(data + root),
        "expected": "0x01",
    }
    if task_id_string:
        case["task_id_string"] = task_id_string
    return case


def invalid_cases(base: dict, base3: dict) -> list[dict]:
    """Inputs the verifier must answer 0x00 for, each derived from a valid case."""
    data = bytes.fromhex(base["receipt"][2:])
    root = bytes.fromhex(base["run_root"][2:])
    data3 = bytes.fromhex(base3["receipt"][2:])
    root3 = bytes.fromhex(base3["run_root"][2:])

    def flip(b: bytes, i: int) -> bytes:
        return b[:i] + bytes([b[i] ^ 0x01]) + b[i + 1 :]

    rows = [
        ("empty", "no input at all", b""),
        ("root_only", "32 bytes: a root without a receipt", root),
        ("header_only", "header + root, no round digest", data[:189] + root),
        ("wrong_version_0", "version byte 0x00", b"\x00" + data[1:] + root),
        ("wrong_version_2", "version byte 0x02", b"\x02" + data[1:] + root),
        ("truncated", "last byte of the root missing", data + root[:-1]),
        ("truncated_digest", "last round digest cut by one byte (root intact)", data[:-1] + root),
        ("extra_byte", "one byte appended after the root", data + root + b"\x00"),
        ("wrong_root", "root with its last bit flipped", data + flip(root, 31)),
        ("zero_root", "all-zero root", data + bytes(32)),
        ("other_case_root", "the root of another valid receipt", data + root3),
        ("tampered_task_id", "task id changed, original root", flip(data, 60) + root),
        ("tampered_chain_id", "chain id changed, original root", flip(data, 32) + root),
        ("tampered_digest", "a round digest changed, original root", flip(data, len(data) - 1) + root),
        (
            "rounds_field_zero",
            "R field set to 0 (length then does not match either)",
            data[:181] + (0).to_bytes(4, "big") + data[185:] + root,
        ),
        (
            "rounds_field_too_large",
            "R field one more than the digests present",
            data3[:181] + (base3["rounds"] + 1).to_bytes(4, "big") + data3[185:] + root3,
        ),
        (
            "rounds_field_too_small",
            "R field one less than the digests present",
            data3[:181] + (base3["rounds"] - 1).to_bytes(4, "big") + data3[185:] + root3,
        ),
        (
            "rounds_field_huge",
            "R field 2**32-1 (the length check must not overflow)",
            data3[:181] + (2**32 - 1).to_bytes(4, "big") + data3[185:] + root3,
        ),
        (
            "dropped_digest_recomputed_root_mismatch",
            "last digest dropped, R decreased, old root",
            data3[:181] + (base3["rounds"] - 1).to_bytes(4, "big") + data3[185:-32] + root3,
        ),
    ]
    out = []
    for name, why, raw in rows:
        assert rc.verify_raw(raw) == b"\x00", name
        out.append({"name": name, "description": why, "input": hx(raw), "expected": "0x00"})
    return out


def merkle_cases(gen: Gen) -> list[dict]:
    out = []
    for n in range(1, 10):
        leaves = [gen.h32() for _ in range(n)]
        out.append({"leaves": [hx(x) for x in leaves], "root": hx(rc.merkle_root(leaves))})
    return out


def status_cases(gen: Gen) -> list[dict]:
    """Round digests folded with a challenge status (RECEIPT.md): 0 leaves a digest as it is."""
    out = []
    for status in (0, 1, 255):
        digest = gen.h32()
        out.append({"digest": hx(digest), "status": status, "folded": hx(rc.with_status(digest, status))})
    return out


def build() -> dict:
    gen = Gen(SEED)
    valid = [
        make_case(gen, "r1_f1", "R=1, F=1: two run leaves", rounds=1, fragments=1, chain_id=ANVIL_CHAIN_ID,
                  trainer_count=1, task_id_string="demo-task", accepted=[1]),
        make_case(gen, "r2_f3", "R=2, F=3: three run leaves (odd count, last carried up)", rounds=2, fragments=3,
                  chain_id=ANVIL_CHAIN_ID, trainer_count=4),
        make_case(gen, "r3_f12", "R=3, F=12 (reference fragment count): four run leaves", rounds=3, fragments=12,
                  chain_id=ANVIL_CHAIN_ID, trainer_count=8),
        make_case(gen, "r4_f2", "R=4, F=2: five run leaves (odd, carried up twice)", rounds=4, fragments=2,
                  chain_id=1, trainer_count=3),
        make_case(gen, "r5_f12", "R=5, F=12, M=8: six run leaves", rounds=5, fragments=12, chain_id=ANVIL_CHAIN_ID,
                  trainer_count=8),
        make_case(gen, "r7_edge", "R=7, F=5: eight run leaves; chain id 2**256-1, trainer count 2**32-1, no accepted",
                  rounds=7, fragments=5, chain_id=2**256 - 1, trainer_count=2**32 - 1, accepted=[0] * 7),
        make_case(gen, "r16_f4", "R=16, F=4: seventeen run leaves", rounds=16, fragments=4, chain_id=ANVIL_CHAIN_ID,
                  trainer_count=8),
    ]
    by_name = {c["name"]: c for c in valid}
    return {
        "version": 1,
        "encoding": "contracts/RECEIPT.md",
        "generator": "tests/vectors/make_run_root_vectors.py",
        "seed": SEED,
        "domain": hx(rc.DOMAIN),
        "verifier_address": rc.VERIFIER_ADDRESS,
        "valid": valid,
        "invalid": invalid_cases(by_name["r2_f3"], by_name["r3_f12"]),
        "merkle": merkle_cases(gen),
        "status": status_cases(gen),
    }


def render() -> str:
    return json.dumps(build(), indent=1) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 when the file is stale")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale; regenerate it", file=sys.stderr)
            return 1
        print(f"{OUT} is up to date")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The trainer daemon's answer to a whole-payload availability challenge (contracts/PROTOCOL.md §4
"Whole payload", issue #23 attack 5): chunk index 2^32 - 1 is answered with every chunk of the
committed vector and each leaf's sum (``ChunkOpening.whole``), which the registry rebuilds into
the signed commitment (tests/contracts/test_root_flow_v3.py sends this answer on-chain). Before,
the daemon took the index for a chunk past the end and let the challenge expire: 5 % of its
stake and the submission lost to anyone who asked for the whole payload."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import torch

from tenzro_operator.chain import ChunkOpening
from tenzro_operator.roles.challenges import ChallengeAnswerer
from tenzro_trainer.commitment import ChunkTree


def _answerer(monkeypatch, vec: torch.Tensor) -> ChallengeAnswerer:
    raw = b"the payload's wire bytes"
    ipfs = SimpleNamespace(cat=lambda cid, max_bytes: raw)
    runtime = SimpleNamespace(payload_cap=lambda f: 1 << 20, decode_payload=lambda b, f: ({"w": vec}, None))
    a = ChallengeAnswerer(chain=None, ipfs=ipfs, task_id=b"\x01" * 32, from_block=0, runtime=runtime)
    monkeypatch.setattr(a, "_submitted", lambda r, f: ("bafypayload", hashlib.sha256(raw).digest()))
    return a


def test_a_whole_payload_challenge_is_answered_with_every_chunk(monkeypatch):
    vec = torch.arange(40, dtype=torch.float32) / 7  # 3 chunks, the last one padded
    tree = ChunkTree(vec)
    a = _answerer(monkeypatch, vec)
    o = a._opening(0, 0, ChunkOpening.WHOLE_PAYLOAD, *tree.root)
    assert o is not None and o.chunk_index == 2**32 - 1
    assert o.to_abi() == (2**32 - 1, b"".join(tree.chunk(i) for i in range(3)), [],
                          [tree.leaf(i)[1] for i in range(3)])


def test_a_chunk_past_the_end_or_another_vector_is_still_not_answered(monkeypatch):
    vec = torch.arange(40, dtype=torch.float32)
    tree = ChunkTree(vec)
    a = _answerer(monkeypatch, vec)
    assert a._opening(0, 0, 3, *tree.root) is None
    other = ChunkTree(vec + 1).root
    assert a._opening(0, 0, ChunkOpening.WHOLE_PAYLOAD, *other) is None
    assert a._opening(0, 0, 1, *tree.root).to_abi()[0] == 1  # a chunk is answered as before

"""The syncer's endorsement of forced submissions under ``score_min`` (`RoundCommit.root_score`,
PROTOCOL.md section 5 "Endorsed credit"): an off-chain payload at or below ``score_min`` is left out
(``LossIncrease``); a forced one, which the registry requires accepted, stays accepted and is not
endorsed, so its credit pays nothing beyond its trainer's endorsed credit. The scorer is a
stand-in that returns fixed scores (the scores themselves are tested in tests/trainer)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from tenzro_operator.roles.syncer_commit import RoundCommit
from tenzro_operator.roles.syncer_round import _Sub
from tenzro_operator.roles.syncer_validation import PayloadValidation

SCORES = {0: 0.1, 1: -0.1, 2: -0.1, 3: 0.0, 4: 0.2}  # trainer index -> loss-improvement score
FORCED = {2, 3, 4}


class _Syncer(RoundCommit):
    _reject = PayloadValidation._reject

    def __init__(self):
        self.task_id = b"\x01" * 32
        self.spec = SimpleNamespace(require_protocol=lambda: SimpleNamespace(score_min=0.0))
        self.runtime = SimpleNamespace(fragments=[["w"]])
        self.fault = None
        counter = SimpleNamespace(inc=lambda: None)
        self.metrics = SimpleNamespace(rejections=SimpleNamespace(labels=lambda **kw: counter))
        self._score = SimpleNamespace(score=lambda r, i, state, names, tensors: SCORES[i])

    def _state(self):
        return {"w": torch.zeros(8)}

    def _index(self, s):
        return int(s.trainer[-1])


def test_a_forced_payload_at_or_below_score_min_is_accepted_without_endorsement():
    subs = []
    for i in SCORES:
        s = _Sub(0, f"0x{'0' * 39}{i}", SimpleNamespace(cid=f"c{i}", payload_hash=bytes([i]) * 32))
        s.offchain, s.tensors = i not in FORCED, {"w": torch.ones(8)}
        subs.append(s)
    accepted = {0: list(subs)}
    _Syncer().root_score(3, accepted)
    assert [int(s.trainer[-1]) for s in accepted[0]] == [0, 2, 3, 4]  # only the off-chain liar left out
    assert subs[1].reason == "LossIncrease" and subs[1].unendorsed == ""
    assert [bool(s.unendorsed) for s in accepted[0]] == [False, True, True, False]
    assert subs[3].unendorsed.startswith("LossIncrease: loss-improvement score 0 ") and subs[3].reason is None

"""The syncer's credit gate around a refused commit (`tenzro_operator.roles.syncer_credit`): a
round whose ``commitRound`` is refused ("not yet") is judged again on a later poll; its first
verdicts must leave no trace, or every payload of the retry is a replay of itself and an honest
round is left out. The gate is the real `CreditGate`; its scorer is a stand-in (the contribution
figures are not what is tested here)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from tenzro_operator.roles.syncer_credit import CreditForWork
from tenzro_operator.roles.syncer_round import _Sub
from tenzro_operator.roles.syncer_validation import PayloadValidation
from tenzro_operator.spec import CreditParams
from tenzro_trainer.credit import CreditGate


class _Scorer:
    def contribution(self, r, i, state, names, payload, reveal):
        return 0.2, 0.1, 0.15  # own > other, own > half, no harm: passes


class _Syncer(CreditForWork):
    _reject = PayloadValidation._reject

    def __init__(self):
        self.task_id = b"\x01" * 32
        self.spec = SimpleNamespace(require_protocol=lambda: SimpleNamespace(credit=CreditParams()))
        self.runtime = SimpleNamespace(fragments=[["w"]])
        counter = SimpleNamespace(inc=lambda: None)
        self.metrics = SimpleNamespace(rejections=SimpleNamespace(labels=lambda **kw: counter))
        self._gate, self._credit_saved, self._last_aggregate = CreditGate(_Scorer(), CreditParams().config()), None, {}

    def _state(self):
        return {"w": torch.zeros(64)}

    def _index(self, s):
        return int(s.trainer[-1])


def _round(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    subs = []
    for i in range(3):
        s = _Sub(0, f"0x{'0' * 39}{i}", SimpleNamespace(cid=f"c{i}", payload_hash=bytes([seed, i]) * 16))
        s.offchain, s.tensors = True, {"w": torch.randn(64, generator=g)}
        subs.append(s)
    return {0: subs}


def test_a_refused_commit_leaves_no_trace_in_the_gate():
    syncer = _Syncer()
    accepted = _round(1)
    snap = syncer.credit_snapshot()
    assert syncer.root_credit(0, accepted) == [] and len(accepted[0]) == 3
    syncer.credit_rollback(snap, [])  # commitRound refused: judged again on the next poll
    again = _round(1)
    assert syncer.root_credit(0, again) == [] and len(again[0]) == 3
    assert all(len(v) == 1 for v in syncer._gate.earlier.values())  # one sketch a round, not two


def test_without_the_rollback_the_retry_is_a_replay_of_itself():
    syncer = _Syncer()
    syncer.root_credit(0, _round(1))
    again = _round(1)
    rejected = syncer.root_credit(0, again)
    assert len(rejected) == 3 and again[0] == []
    assert {s.reason for s in rejected} == {"NearCopy"} and all("a replay" in s.detail for s in rejected)


def test_a_rollback_makes_the_subs_it_rejected_valid_again():
    syncer = _Syncer()
    syncer.root_credit(0, _round(1))  # round 0 committed
    accepted = _round(1)  # round 1 replays round 0's payloads
    snap = syncer.credit_snapshot()
    rejected = syncer.root_credit(1, accepted)
    assert len(rejected) == 3 and all(s.tensors is not None for s in rejected)  # kept for the retry
    syncer.credit_rollback(snap, rejected)
    assert all(s.reason is None and s.detail == "" for s in rejected)
    assert all(len(v) == 1 for v in syncer._gate.earlier.values())


def test_a_forced_payload_the_gate_does_not_credit_stays_accepted_without_endorsement():
    """The attack of issue #26 on the forced path: a trainer whose replay the gate leaves out
    off-chain forces the same payload on-chain, which the registry requires accepted. The gate
    judges it alike: it stays in the accepted set (the registry's rule) and is not endorsed
    (PROTOCOL.md section 5 "Endorsed credit"), so its credit pays nothing beyond endorsed credit."""
    syncer = _Syncer()
    syncer.root_credit(0, _round(1))  # round 0 committed
    accepted = _round(1)  # round 1 replays round 0's payloads; trainer 2's came on-chain
    forced = accepted[0][2]
    forced.offchain = False
    rejected = syncer.root_credit(1, accepted)
    assert [syncer._index(s) for s in rejected] == [0, 1] and all(s.unendorsed == "" for s in rejected)
    assert accepted[0] == [forced] and forced.reason is None
    assert forced.unendorsed.startswith("NearCopy: ") and "a replay" in forced.unendorsed


def test_new_spec_credit_writes_the_gate_into_the_spec(real_spec):
    """``tenzro train new-spec --credit`` turns the gate on with its default thresholds; without the
    flag the spec has none (its canonical bytes as before)."""
    gated, _ = real_spec(credit=True)
    assert gated.require_protocol().credit == CreditParams()
    assert gated.require_protocol().credit.config().audit == 0  # no replay audit in a root-flow round yet
    plain, _ = real_spec()
    assert plain.require_protocol().credit is None
    assert "credit" not in plain.metadata["protocol"]

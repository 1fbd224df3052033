"""Credit for work only in a run (issue #26; the checks are `tenzro_trainer.credit`'s): with the
spec's ``metadata.protocol.credit``, the off-chain payloads that passed validation, the norm screen
and ``score_min`` go through the run's `CreditGate` before the commit, and only those it credits are
accepted (aggregated and set in the round's bitmaps: the registry binds the bitmaps to the
aggregated sets, PROTOCOL.md §5 challenge 3, so credit and aggregation are one set here).

A payload is left out (the transcript's rejection names the check) when it is a near-copy of
another payload of the round, of the fragment's last aggregate or of its own earlier payloads
(``NearCopy``), heavier than ``norm_multiple`` x the round's median (``NormOutlier``), or when its
trainer's moving average of passes of the contribution test (own shard versus data it was not
assigned, on batches drawn with the round's reveal, `shard_score.round_reveal` over the payload
hashes of the round's gated payloads) is at or below the credit line (``NoContribution``, with
the figures). Differences from the simulator's gate (`tenzro_trainer.simulate`): no clipping to the
median norm (a watcher replays the aggregate with the task's rule alone) and no exact-replay
audit (trainers do not yet publish the inner state it replays from), so the first round too is
judged by the moving average (`CreditConfig.first_round_replay` needs the audit).

Forced on-chain submissions are gated alike, but the registry requires them accepted unless proven
invalid (PROTOCOL.md §4): one the gate does not credit is accepted without the syncer's endorsement
(``_Sub.unendorsed``, PROTOCOL.md §5 "Endorsed credit"), so the forced path pays a no-work payload
nothing beyond its trainer's endorsed credit. The gate's history (moving averages, count sketches
of earlier payloads) and each fragment's last aggregate are kept in the syncer's state file; a syncer that starts a run
without them (a stand-in, a lost file) starts every trainer's history afresh (logged).

Part of `tenzro_operator.roles.syncer.SyncerDaemon`; imports nothing of the other roles, nor the
syncer's module.
"""

from __future__ import annotations

import logging
from typing import Any

from tenzro_operator.shard_score import round_reveal
from tenzro_trainer.credit import CreditGate

log = logging.getLogger("tenzro.syncer")


def _history(gate) -> dict[str, Any]:
    """A copy of a `CreditGate`'s history: moving averages, earlier payloads' sketches (lists copied,
    the sketches are never changed), barred trainers."""
    return {"average": dict(gate.average), "earlier": {k: list(v) for k, v in gate.earlier.items()},
            "barred": dict(gate.barred)}


class CreditForWork:
    """The run's credit gate at the syncer (see the module docstring)."""

    _gate = None  # the run's CreditGate, built at first use (`credit_gate`)
    _credit_saved: dict | None = None  # the gate's history read from the state file, for the gate when built
    _last_aggregate: dict  # fragment -> the last committed round's aggregate of it ({name: tensor})

    def credit_gate(self) -> CreditGate | None:
        """The run's `CreditGate` over the run's scorer (`RoundCommit.run_scorer`) with the history
        the state file held; None without the spec's ``credit``."""
        params = self.spec.require_protocol().credit
        if params is None:
            return None
        if self._gate is None:
            self._gate = CreditGate(self.run_scorer(), params.config())
            saved, self._credit_saved = self._credit_saved, None
            if saved is None:
                log.info("credit gate: every trainer's moving average of passes starts at %g", self._gate.cfg.start)
            else:
                self._restore_history(saved)
        return self._gate

    def _restore_history(self, history: dict[str, Any]) -> None:
        gate = self._gate
        gate.average, gate.earlier = dict(history["average"]), {k: list(v) for k, v in history["earlier"].items()}
        gate.barred = dict(history.get("barred", {}))

    def root_credit(self, r: int, accepted: dict) -> list:
        """Gate round r's payloads in ``accepted`` (fragment -> subs, changed in place): each
        off-chain one the gate does not credit is rejected with the check it failed (its tensors
        kept, for `credit_rollback`) and left out; each forced one stays, not endorsed. Returns the
        subs it rejected; [] without the spec's ``credit``."""
        gate = self.credit_gate()
        if gate is None:
            return []
        gated = {f: list(subs) for f, subs in accepted.items()}
        reveal = round_reveal(self.task_id, r, [s.payload_hash for subs in gated.values() for s in subs])
        state, rejected = self._state(), []
        for f, subs in gated.items():
            if not subs:
                continue
            verdicts = gate(r, f, state, self.runtime.fragments[f], {self._index(s): s.tensors for s in subs},
                            self._last_aggregate.get(f), reveal)
            for s in subs:
                v = verdicts[self._index(s)]
                if v.credited:
                    continue
                reason = v.reason if v.reason in ("NearCopy", "NormOutlier") else "NoContribution"
                why = (f"{v.detail or 'passed the round checks'}; moving average of passes {v.average:.3f} "
                       f"(credited above {gate.cfg.credit_above:g})")
                if not s.offchain:
                    s.withhold_endorsement(r, f"{reason}: {why}")
                    continue
                self._reject(s, reason, why, keep_tensors=True)
                rejected.append(s)
            accepted[f] = [s for s in accepted[f] if s.reason is None]
        return rejected

    def credit_state(self) -> dict[str, Any]:
        """What `persist` saves of the gate: its history and the last aggregates (tensors, floats)."""
        history = self._credit_saved if self._gate is None else _history(self._gate)
        return {"last_aggregate": dict(self._last_aggregate), "history": history}

    def load_credit_state(self, saved: dict[str, Any] | None) -> None:
        """Take back `credit_state` (None: a state file without one, or no state file: histories
        start afresh and the fragments have no last aggregate until the next commit)."""
        saved = saved or {}
        self._last_aggregate = dict(saved.get("last_aggregate", {}))
        self._gate, self._credit_saved = None, saved.get("history")

    def credit_snapshot(self) -> tuple | None:
        """The gate's history as it stands and its log's length (None: no gate), for
        `credit_rollback` when a commit is refused."""
        gate = self.credit_gate()
        return None if gate is None else (_history(gate), len(gate.log))

    def credit_rollback(self, snap: tuple | None, rejected: list) -> None:
        """Undo round r's verdicts when its commit did not land: the gate's history as `credit_snapshot`
        left it and the ``rejected`` subs (`root_credit`'s) valid again, so the retry judges the same
        payloads afresh (kept, each would count as a replay of itself)."""
        for s in rejected:
            s.reason, s.detail = None, ""
        if snap is None or self._gate is None:
            return
        self._restore_history(snap[0])
        del self._gate.log[snap[1]:]

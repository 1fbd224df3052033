"""The round's commit (contracts/PROTOCOL.md §5; DiLoCo, Douillard et al. 2023, Algorithm 1, lines
10-12): when it is time (`RoundCommit.ready`), the norm screen and the spec's loss-improvement
scoring, the aggregation of each fragment's accepted submissions with the task's rule keyed by
trainer index, the outer Nesterov step, the new weights, momentum and `RoundTranscript` pinned,
``commitRound`` with the fragments root, one accepted bitmap per trainer and the cumulative
credits before the round; and the deliberate lies of `SyncerFaultSettings` (tests and demos only).

Part of `tenzro_operator.roles.syncer.SyncerDaemon`; imports nothing of the other roles, nor the
syncer's module.
"""

from __future__ import annotations

import logging
import copy
import hashlib
import time
from typing import Any

import torch

from tenzro_operator.chain import RunView
from tenzro_operator.credits import credit_word
from tenzro_operator.daemon import append_jsonl
from tenzro_operator.errors import ChainRevert
from tenzro_operator.evidence import bits_to_f32
from tenzro_operator.metrics import task_label
from tenzro_operator.receipt import weights_root
from tenzro_operator.roles.syncer_round import _PROVE, _Sub
from tenzro_operator.root_flow import (
    committed_rounds,
    cumulative_credits,
    fragment_states,
    fragment_weights_roots,
)
from tenzro_operator.shard_score import shard_scorer
from tenzro_operator.task_assets import load_dataset
from tenzro_operator.transcript import BlobRef, FragmentRecord, Rejection, RoundTranscript
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.aggregation import trainer_key
from tenzro_trainer.outer import OuterOptimizer

# commitRound refusals that only mean "not yet": the round is committed on a later poll
NOT_YET = ("Registry__CommitPhaseOpen", "Registry__RevealsPending", "Registry__ChallengesPending")

log = logging.getLogger("tenzro.syncer")


class RoundCommit:
    """The round's scoring, aggregation, outer step and commit (see the module docstring)."""

    _credits: list[int] | None  # cumulative credits before the open round (trainer-index order)
    _score = None  # the run's ShardScorer (loss-improvement scoring), built at first use

    def ready(self, run: RunView) -> bool:
        """Time to commit? (quorum + all in or straggler wait passed; or the deadline passed).

        Never inside the commit phase, and only after a step whose collect began once
        no forced submission could arrive any more (`_root_inputs_settled`) and no availability
        challenge was pending: ``run``, read before the collect, shows none open and the collect
        sent none. An answer mined after the collect read the chain makes a submission left out as
        unavailable live again, and the registry, which then waits for no challenge, would take a
        commit that omits it (an omission anyone proves; issue #23, found by the CI's timing)."""
        rs = self._round
        if not self._root_inputs_settled(run):
            return False
        if (run.open_challenges or rs.challenged or any(s.owes_report for s in rs.subs.values())):
            return False  # a report still to make (a bond it could not pay, a refused transaction) holds it too
        if self.chain_now() > run.round_deadline:
            self.nudge_devnet(run.round_deadline)
            return True
        if not self.config.finalize_early:
            return False
        acc = self._norm_screen()
        if not all(len(v) >= run.quorum for v in acc.values()):
            rs.quorum_since = None
            return False
        if rs.quorum_since is None:
            rs.quorum_since = time.monotonic()
        per_fragment = [sum(1 for s in rs.subs.values() if s.fragment == f) for f in acc]
        if all(n >= run.enrolled_count for n in per_fragment):
            return True
        return time.monotonic() - rs.quorum_since >= float(self.opt("straggler_wait_s", 2.0))

    def _root_inputs_settled(self, run: RunView) -> bool:
        """Whether this step's collect saw every forced submission round r can get. A forced
        reveal is mined after the commit phase, perhaps between a collect and the commit; left out,
        it is an omission anyone proves. None can come once the phase has closed and every
        on-chain commitment is revealed (``commitPhase``'s count is 0), or once the deadline has
        passed: the first step that sees either only notes it, and the next one, whose collect
        read the chain after that, may commit."""
        rs = self._round
        now = self.chain_now()
        if now <= rs.closes:  # the registry refuses a commit in the commit phase
            return False
        self.nudge_devnet(rs.closes)  # a devnet's head may still be stamped inside the phase
        if rs.settled:
            return True
        rs.settled = now > run.round_deadline or self.chain.commit_phase(self.task_id)[1] == 0
        return False

    def finalize(self, run: RunView) -> bool:
        """Norm screen, prove forced outliers, scoring, aggregate + outer step, pin, ``commitRound``
        (`root_commit`), persist. Returns False (state untouched) when the chain refuses for a
        reason that a later poll can mend (not yet, stale credits, quorum, a late submission)."""
        rs, r, F = self._round, self._round.round, len(self.runtime.fragments)
        accepted = self._norm_screen()  # answered challenges were re-checked by collect, just before
        for s in rs.subs.values():
            if s.reason is None and s not in accepted[s.fragment]:
                median = "the fragment's median" if s.offchain else "the median of round %d's accepted sums" % (r - 1)
                self._reject(s, "NormOutlier", f"sum of squares {bits_to_f32(s.signed.payload_sumsq):.6g} exceeds "
                                               f"{self.norm_multiple:g}^2 x {median}")
            if s.reason == "NormOutlier":
                self.report(s)
        if any(s.unprovable and s.reason is None and s not in accepted[s.fragment] for s in rs.subs.values()):
            accepted = self._norm_screen()  # a refused proof: that submission is aggregated
        for s in rs.subs.values():
            s.unendorsed = ""  # judged afresh (a refused commit comes back here)
        self.root_score(r, accepted)  # the spec's score_min, if any
        credit, not_credited = self.credit_snapshot(), []
        try:
            not_credited = self.root_credit(r, accepted)  # the spec's credit gate, if any
        except BaseException:
            self.credit_rollback(credit, not_credited)
            raise
        self._fault_false_report(r, accepted)
        self._fault_drop(r, accepted)
        snapshot = [copy.deepcopy(o.state_dict()) for o in self.outers]
        t0 = time.perf_counter()
        aggregates = {}
        for f in range(F):  # PROTOCOL.md section 1: inputs in trainer-index order, +0 for a fragment without any
            outer = self.outers[f]
            if accepted[f]:
                aggregates[f] = self.rule({trainer_key(self._index(s)): s.tensors for s in accepted[f]})
            outer.step(aggregates[f] if f in aggregates else outer.zero_aggregate())
        self._fault_wrong_aggregate(r)
        blobs = self.runtime.encode_weights(self._state(), r)
        t_agg = time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            cids = [self.ipfs.add(b) for b in blobs]
            shas = [hashlib.sha256(b).digest() for b in blobs]  # the blobs' (the transcript's transport check)
            # the committed fragment hashes: the §2 roots of the new weights (PROTOCOL.md §5, the
            # leaves' weightsRoot)
            hashes = fragment_weights_roots(self._state(), self.runtime.fragments)
            wroot = weights_root(hashes)
            momentum, signed = self.root_extras(r, accepted, run)
            transcript = RoundTranscript(
                task_id="0x" + self.task_id.hex(), round=r,
                rule={"name": self.spec.aggregation_name, "params": dict(self.spec.aggregation_params)},
                outer={"lr": self.outer_cfg.lr, "momentum": self.outer_cfg.momentum,
                       "nesterov": self.outer_cfg.nesterov},
                input_weights_root="0x" + run.weights_root.hex(), weights_root="0x" + wroot.hex(),
                accepted_count=sum(len(v) for v in accepted.values()),
                fragments=[FragmentRecord(
                    fragment=f, accepted=[s.submission(signed.get((f, s.key))) for s in accepted[f]],
                    rejected=[Rejection(**s.submission().model_dump(), reason=s.reason, detail=s.detail[:500])
                              for s in sorted(rs.subs.values(), key=lambda x: x.key)
                              if s.fragment == f and s.reason is not None],
                    weights=BlobRef(cid=cids[f], sha256="0x" + shas[f].hex()), aggregated=bool(accepted[f]),
                    momentum=BlobRef(**momentum[f]) if f in momentum else None)
                    for f in range(F)])
            tbytes = transcript.canonical_bytes()
            tcid = self.ipfs.add(tbytes)
            for b in blobs:
                self.metrics.ipfs_out(len(b))
            t_pin = time.perf_counter() - t1
            trainers = self.chain.trainers_of(self.task_id)
            bitmaps = [0] * len(trainers)
            index = {a.lower(): i for i, a in enumerate(trainers)}
            unendorsed = [0] * len(trainers)
            for f, subs in accepted.items():
                for s in subs:
                    bitmaps[index[s.key]] |= 1 << f
                    unendorsed[index[s.key]] |= (1 << f) if s.unendorsed else 0
            t2 = time.perf_counter()
            res = self.root_commit(run, r, accepted, bitmaps, unendorsed, hashes, transcript, tcid)
            t_chain = time.perf_counter() - t2 + rs.split.get("chain_s", 0.0)
        except ChainRevert as exc:
            self.outers = [OuterOptimizer.from_state_dict(s) for s in snapshot]
            self.credit_rollback(credit, not_credited)
            if exc.error_name in NOT_YET:
                log.info("round %d: not yet (%s): committing on a later poll", r, exc.error_name)
                return False
            if exc.error_name == "Registry__WrongPreviousCredits":
                log.warning("round %d: the credits read from the chain were stale (%s): reading them again", r, exc)
                self._credits = None
                return False
            if exc.error_name == "Registry__QuorumNotMet":
                log.info("round %d: the chain wants more accepted submissions before the deadline (%s)", r, exc)
                rs.quorum_since = None
                return False
            if exc.error_name in ("Registry__WrongRound", "Registry__WrongStatus"):
                log.warning("round %d was already finalized on-chain (%s): catching up", r, exc)
                self.restore()
                return True
            raise
        except BaseException:
            self.outers = [OuterOptimizer.from_state_dict(s) for s in snapshot]
            self.credit_rollback(credit, not_credited)
            raise
        fin = res.event("RoundCommitted")
        self.last_finalized = r
        self._last_aggregate = aggregates  # the public aggregates the next round's copies are checked against
        self.finalized_here += 1
        self._tally("rounds_finalized", 1)
        self.persist()
        self.root_slash_unrevealed(r, rs)
        wall = max(0.0, time.time() - run.round_opened_at)
        self.metrics.round_latency.labels(task=task_label(self.task_id)).observe(wall)
        n_acc = sum(len(v) for v in accepted.values())
        n_rej = sum(1 for s in rs.subs.values() if s.reason is not None)
        rec: dict[str, Any] = {
            "task": "0x" + self.task_id.hex(), "round": r, "wall_s": round(wall, 6),
            "process_s": round(time.perf_counter() - rs.t_start, 6), "fetch_s": round(rs.split["fetch_s"], 6),
            "validate_s": round(rs.split["validate_s"], 6), "aggregate_s": round(t_agg, 6),
            "pin_s": round(t_pin, 6), "chain_s": round(t_chain, 6), "submissions": len(rs.subs),
            "accepted": n_acc, "rejected": n_rej, "quorum_met": bool(fin.get("quorumMet", True)),
            "weights_root": "0x" + wroot.hex(), "tx": res.tx_hash}
        if self._eval is not None:
            t3 = time.perf_counter()
            if self._last_loss is None:  # round 0, or the first round after a restart
                snap_state = {}
                for s in snapshot:
                    snap_state.update(s["weights"])
                self._last_loss = self._eval(snap_state).loss
            rec["heldout_loss_before"] = self._last_loss
            rec["heldout_loss"] = self._last_loss = self._eval(self._state()).loss
            rec["eval_s"] = round(time.perf_counter() - t3, 6)
            self.metrics.heldout_loss.labels(task=rec["task"]).set(rec["heldout_loss"])
        append_jsonl(self.rounds_path, rec)
        self.history.append(rec)
        log.info("finalized round %d: %d accepted, %d rejected, quorum %s, wall %.2f s (fetch %.2f, validate %.2f, "
                 "aggregate %.2f, pin %.2f, chain %.2f)%s", r, n_acc, n_rej, rec["quorum_met"], wall,
                 rec["fetch_s"], rec["validate_s"], t_agg, t_pin, t_chain,
                 f", held-out loss {rec['heldout_loss']:.4f}" if "heldout_loss" in rec else "")
        self._round = None
        return True

    def run_scorer(self):
        """The run's `ShardScorer` (`shard_score.shard_scorer`: the task's model, its training split),
        built once for ``score_min`` and the credit gate alike."""
        if self._score is None:
            df = load_dataset(self.ipfs, self.spec, self.opt("dataset_path", None),
                              max_bytes=self.config.max_dataset_bytes)
            self._score = shard_scorer(self.runtime, self.spec, df)
        return self._score

    def root_score(self, r: int, accepted: dict) -> None:
        """Loss-improvement scoring (the spec's ``score_min``, `tenzro_trainer.scoring`): each
        accepted off-chain payload of round r is scored, against the weights the round started
        from, on a fixed batch of training windows from its trainer's own shard (seeded by the
        task id, the trainer index and the round, so a watcher draws the same): an honest update
        lowers the loss on the data it was trained on, a sign-flipped one raises it, whatever the
        other shards say. An off-chain one at or below ``score_min`` is rejected (``LossIncrease``)
        and left out of ``accepted`` (in place). A forced on-chain submission is never scored out
        (the registry requires it accepted or proven invalid): one at or below ``score_min`` is
        accepted without the syncer's endorsement (``_Sub.unendorsed``; PROTOCOL.md §5 "Endorsed
        credit"), so a no-work payload forced in is paid nothing beyond its trainer's endorsed credit."""
        floor = self.spec.require_protocol().score_min
        if floor is None:
            return
        scorer, state = self.run_scorer(), self._state()
        liar = self.fault.false_loss_increase if self.fault is not None else None
        for f, subs in accepted.items():
            for s in subs:
                i = self._index(s)
                score = scorer.score(r, i, state, self.runtime.fragments[f], s.tensors)
                if i == liar:
                    log.warning("FAULT INJECTION: trainer %d's fragment %d (score %.6g) rejected as LossIncrease", i,
                                f, score)
                    score = floor
                if score <= floor:
                    why = f"loss-improvement score {score:.6g} on its shard <= score_min {floor:g}"
                    if s.offchain:
                        self._reject(s, "LossIncrease", why)
                    else:
                        s.withhold_endorsement(r, f"LossIncrease: {why}")
            accepted[f] = [s for s in subs if s.reason is None]

    def previous_credits(self, run) -> list[int]:
        """Every trainer's cumulative credits before the open round, summed from the run's
        ``RoundCommitted`` events (cached until the next commit)."""
        if self._credits is None:
            rounds = committed_rounds(self.chain, self.task_id, self._run_start, run.current_round)
            self._credits = cumulative_credits(rounds, self.runtime.sizes, run.enrolled_count)
        return self._credits

    def root_extras(self, r: int, accepted: dict, run) -> tuple[dict, dict]:
        """What a root-flow transcript adds: per fragment the pinned momentum (``BlobRef`` fields)
        and, per accepted submission, the signed struct's fields (keyed by (fragment, trainer))."""
        blobs = self.runtime.encode_weights({n: m for o in self.outers for n, m in zip(o.names, o.momentum)}, r,
                                            kind="momentum")
        momentum = {f: {"cid": self.ipfs.add(b), "sha256": "0x" + hashlib.sha256(b).hexdigest()}
                    for f, b in enumerate(blobs)}
        fields = {}
        for f, subs in accepted.items():
            for s in subs:
                p = s.signed
                fields[(f, s.key)] = {"base_root": "0x" + run.weights_root.hex(),
                                      "payload_root": "0x" + p.payload_root.hex(), "payload_sumsq": p.payload_sumsq,
                                      "signature": "0x" + p.signature.hex()}
        return momentum, fields

    def root_commit(self, run, r: int, accepted: dict, bitmaps: list[int], unendorsed: list[int],
                    hashes: list[bytes], transcript: RoundTranscript, tcid: str):
        """``commitRound`` of round r: the fragments root of the outer optimizers' state and the
        accepted sets (struct hashes over the round's input weights root), the accepted and
        unendorsed bitmaps and the credits words before the round. Returns the `TxResult`; a
        refusal that means "not yet" raises `ChainRevert` for `finalize` to retry on a later poll."""
        index = self._trainer_indices()
        sets = {f: {index[s.key]: rc.struct_hash(self.task_id, r, f, run.weights_root, s.signed.payload_root,
                                                s.signed.payload_sumsq, s.cid, s.payload_hash) for s in subs}
                for f, subs in accepted.items()}
        states = fragment_states(self.outers, sets, run.enrolled_count)
        previous = self.previous_credits(run)
        res = self.chain.commit_round(self.task_id, r, rc.fragments_root([s.leaf for s in states]), bitmaps,
                                      previous, hashes, transcript.hash(), tcid, unendorsed)
        self._credits = [c + credit_word(b, u, self.runtime.sizes) for c, b, u in zip(previous, bitmaps, unendorsed)]
        return res

    def _fault_drop(self, r: int, accepted: dict[int, list[_Sub]]) -> None:
        """``drop_submission`` / ``censor_trainer``: take that trainer's submissions out of
        ``accepted`` (in place) for round r."""
        if self.fault is None:
            return
        targets = []  # (fragment, trainer index)
        spec = self.fault.drop_submission
        if spec is not None and spec[0] == r and spec[1] in accepted:
            targets.append((spec[1], spec[2]))
        if self.fault.censor_trainer is not None:
            targets += [(f, self.fault.censor_trainer) for f in accepted]
        for f, i in targets:
            keep = [s for s in accepted[f] if self._index(s) != i]
            if len(keep) == len(accepted[f]):
                log.warning("FAULT INJECTION: trainer %d has no accepted submission of fragment %d in round %d: "
                            "nothing to leave out", i, f, r)
                continue
            accepted[f] = keep
            log.warning("FAULT INJECTION: leaving trainer %d's live submission of fragment %d out of round %d's "
                        "commit", i, f, r)

    def _fault_false_report(self, r: int, accepted: dict[int, list[_Sub]]) -> None:
        """``false_invalid_report``: once, report that trainer's valid submission of round r
        invalid (NonFinite, no defective chunk to open); the registry refuses the evidence and the
        round goes on honestly."""
        spec = self.fault.false_invalid_report if self.fault is not None else None
        if spec is None or self._fault_false_reported or spec[0] != r or spec[1] not in accepted:
            return
        f, i = spec[1], spec[2]
        target = next((s for s in accepted[f] if self._index(s) == i), None)
        if target is None:
            return
        self._fault_false_reported = True
        log.warning("FAULT INJECTION: reporting trainer %d's valid submission of fragment %d in round %d as "
                    "non-finite", i, f, r)
        try:
            self.chain.prove_invalid(self.task_id, r, f, target.trainer, _PROVE["NonFinite"], target.signed)
        except ChainRevert as exc:
            log.error("FAULT INJECTION: the registry refused the false report (%s); finalizing the round honestly", exc)
            return
        log.error("FAULT INJECTION: the registry accepted a false report of trainer %d: this is a registry bug", i)

    def _fault_wrong_aggregate(self, r: int) -> None:
        """``wrong_aggregate_at``: add 1.0 to the first coordinate of the fragment's new weights
        (the outer optimizer's own parameters, so later rounds build on the wrong value)."""
        spec = self.fault.wrong_aggregate_at if self.fault is not None else None
        if spec is None or spec[0] != r or not 0 <= spec[1] < len(self.outers):
            return
        outer = self.outers[spec[1]]
        with torch.no_grad():
            flat = outer.params[0].view(-1)
            before = float(flat[0])
            flat[0] += 1.0
        log.warning("FAULT INJECTION: round %d fragment %d: weight %s[0] committed as %.6g instead of the aggregate's "
                    "%.6g", r, spec[1], outer.names[0], float(flat[0]), before)

"""Credit for work only (issue #26): which of a round's screened payloads the syncer credits and
which it aggregates.

Checks, per payload of one fragment, in this order; the first that fails names the reason (the
transcript's rejection reason):

``NearCopy``       its |cosine| to another payload of the same round and fragment, or to the
                   fragment's last public aggregate, is above ``copy_cosine``: a copy, a replayed or
                   rescaled aggregate, the colluders' shared payload. Every party to a near-copy pair
                   loses the round (the commit phase closes before any reveal, so an honest payload
                   is copied only through the public forced path). So does a payload within
                   ``replay_cosine`` of one of the same trainer's earlier payloads of the fragment
                   (a stale update replayed round after round: computed from old weights, no work
                   since; tighter than ``copy_cosine``, for an honest trainer's consecutive
                   pseudo-gradients are alike: |cosine| 0.77 on average, at most 0.954, in the
                   attackers-absent simulator run at 6 of 8). The earlier payloads are kept as
                   count sketches (Charikar, Chen & Farach-Colton 2002, ``SKETCH_DIM`` buckets),
                   which keep a cosine to about 1 / sqrt(``SKETCH_DIM``) and an exact replay's at 1.
``NormOutlier``    its L2 norm is above ``norm_multiple`` x the round's median (tighter than the
                   validation screen's x10: what a boosted update needs to weigh).
``NoContribution`` the contribution test (Templar's check, `ShardScorer.contribution`), on batches
                   drawn with the round's *reveal*, which no trainer knows before it commits: with
                   ``own`` / ``other`` the loss improvement (loss units) on the trainer's own shard /
                   on the data it was not assigned, and ``half`` the own-shard improvement at half
                   the pseudo-gradient, the payload passes when

                   - ``own > other``: it helps the data it trained on more than the rest (a replayed
                     or rescaled aggregate, noise and harm help both alike or the rest more);
                   - ``own > half``: the own-shard loss is lower at its end than half-way (an honest
                     update is where its training ended; a scaled, extrapolated or boosted one
                     overshoots);
                   - ``other >= -harm x own``: it raises the loss on the others' data by at most
                     ``harm`` times what it gains on its own (score-aware poisoning does not).

Credit (the round's reward share) is by history, so one lucky round pays nothing and one unlucky
one costs an honest trainer nothing: per trainer and fragment a moving average of the passes
(1 when the round's payload passed every check, 0 otherwise; weight ``ema`` on the new round,
starting at ``start``); the payload is *credited* when it passed ``NearCopy`` and ``NormOutlier``
and the average is above ``credit_above``. It is *aggregated* when it is credited and passed the
round's contribution test too; the aggregated ones are clipped to their median L2 norm (``clip``)
before the robust rule, so a boosted update that got through weighs no more than a typical one.

``ReplayMismatch`` the round's *audit* (exact replay, `tenzro_trainer.replay`): after the verdicts,
                   ``audit`` of the trainers credited in some fragment of the round are drawn with the
                   reveal (`CreditGate.audited`; the lower a trainer's moving average of passes, the
                   likelier: one near the credit line is drawn most, and every credited one with
                   weight at least ``audit_floor``), and the syncer recomputes each one's H inner steps
                   from the round's input weights, its shard and the inner state it declared; a
                   trainer whose payloads do not reproduce bit for bit is *barred* (`CreditGate.bar`):
                   nothing of it is credited or aggregated that round or any later one. A trainer
                   cannot tell before it commits whether its round will be replayed, so a lazy,
                   boosted or copied payload is a bet it loses each round it is credited, and for the
                   rest of the run when it does: one that passes every check (so its average is an
                   honest trainer's) is drawn about as often as an honest one (1 in M a round), one
                   that fails them often far more.
                   The cost is ``audit`` trainers' inner steps a round (1/M of the round's compute).

The first round a gate judges (with ``first_round_replay`` and an audit) is judged by exact replay
instead of history: the contribution test cannot tell an honest update of a fresh model from a lazy
one (the first update of a freshly initialized model helps all data alike: at seed 1, 8 of the 24
honest payloads of the attackers-absent run at 2 of 8 failed ``own > other``, and each failure cost
its trainer two more rounds of credit while its average climbed back over the line; 7 of the 12
first payloads of three lazy trainers at 3 of 8, seed 1, passed every check). So in that round
every payload that passed ``NearCopy`` and ``NormOutlier`` is credited, every trainer credited is
replayed (`CreditGate.audited`: M trainers' inner steps once, one round's compute), and the
verdicts stay out of the moving averages. A lazy, boosted or copied first round is then barred
for the run; an adaptive attacker that trains honestly in the first round and cheats from the
second is judged as before.

Everything is a function of the transcript (the payloads, the input weights, the last aggregate,
the reveal, the data, the earlier verdicts), so a watcher recomputes every verdict. Scores are not
provable on-chain: a trainer that disputes a verdict forces its submission on-chain (`scoring`).

Usage::

    gate = CreditGate(scorer, CreditConfig())
    verdicts = {f: gate(r, f, state, names_f, {index: tensors}, previous_aggregate_f, reveal) for f ...}
    for i in gate.audited(reveal, [i for v in verdicts.values() for i, x in v.items() if x.credited], r):
        if not reproduces(...):  # tenzro_trainer.replay, from the inner state trainer i declared
            gate.bar(i, r, [v[i] for v in verdicts.values() if i in v])
    credited = [i for i, v in verdicts[f].items() if v.credited]
    aggregate = rule(gate.clipped({i: payloads[i] for i, v in verdicts[f].items() if v.aggregated}))
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import torch
from torch import Tensor

from tenzro_trainer.aggregation import payload_norm
from tenzro_trainer.scoring import ShardScorer

Payload = Mapping[str, Tensor]
SKETCH_DIM = 1024  # buckets of the count sketch of a trainer's earlier payload (8 KiB per round)


@dataclass(frozen=True)
class CreditConfig:
    """The credit checks' thresholds (see the module docstring).

    Attributes:
        copy_cosine: |cosine| above which two payloads (or one and the last aggregate) are copies.
        replay_cosine: |cosine| to one of its own earlier payloads above which a payload is a replay.
        norm_multiple: a payload's L2 norm at most this multiple of the round's median.
        harm: ``other >= -harm x own`` (loss improvements) for the contribution test.
        ema: weight of the new round in the moving average of passes.
        start: the moving average before a trainer's first payload.
        credit_above: credited while the moving average is above this.
        clip: clip aggregated payloads to their median L2 norm before the rule.
        audit: trainer-rounds replayed exactly per round, drawn with the reveal among the credited
            trainers (0: none).
        audit_floor: every credited trainer's least weight in the audit draw (`CreditGate.audit_weight`).
        first_round_replay: with ``audit`` > 0, the gate's first round is judged by the replay of
            every trainer it credits, not by the moving average (the module docstring).
    """

    copy_cosine: float = 0.95
    replay_cosine: float = 0.99
    norm_multiple: float = 3.0
    harm: float = 2.0
    ema: float = 0.1
    start: float = 0.6
    credit_above: float = 0.6
    clip: bool = True
    audit: int = 1
    audit_floor: float = 0.05
    first_round_replay: bool = True


@dataclass
class Verdict:
    """One payload's verdict: ``reason`` the first check it failed (None: passed all), whether it
    is credited and aggregated, and the figures (loss improvements, the moving average)."""

    reason: str | None
    detail: str = ""
    credited: bool = False
    aggregated: bool = False
    own: float = math.nan
    other: float = math.nan
    half: float = math.nan
    average: float = math.nan
    figures: dict = field(default_factory=dict)


def _flat(p: Payload) -> Tensor:
    return torch.cat([p[n].reshape(-1).to(torch.float64) for n in sorted(p)])


def _cos(a: Tensor, b: Tensor) -> float:
    na, nb = float(torch.linalg.vector_norm(a)), float(torch.linalg.vector_norm(b))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0  # two zero payloads copy each other; zero vs non-zero do not
    return float(torch.dot(a, b)) / (na * nb)


def _count_sketch(x: Tensor, hashes: tuple[Tensor, Tensor]) -> Tensor:
    """float64 (SKETCH_DIM,): coordinate k of ``x`` added, times ``sign[k]``, to bucket ``bucket[k]``."""
    bucket, sign = hashes
    return torch.zeros(SKETCH_DIM, dtype=torch.float64).index_add_(0, bucket, x * sign)


def _median(xs: list[float]) -> float:
    return float(torch.tensor(sorted(xs), dtype=torch.float64).median())  # the lower middle value


class CreditGate:
    """The syncer's credit decision for a run (keeps each trainer's moving average across rounds).

    Args:
        scorer: the run's `ShardScorer` (own shard and the data not assigned, per trainer).
        cfg: thresholds.
    """

    def __init__(self, scorer: ShardScorer, cfg: CreditConfig | None = None):
        self.scorer, self.cfg = scorer, cfg or CreditConfig()
        self.average: dict[tuple[int, int], float] = {}  # (trainer, fragment) -> moving average of passes
        self.earlier: dict[tuple[int, int], list[tuple[int, Tensor]]] = {}  # -> [(round, count sketch)]
        self._hashes: dict[int, tuple[Tensor, Tensor]] = {}  # payload length -> (bucket, sign), fixed
        self.log: list[dict] = []  # every verdict's figures, for the benchmark and the transcript
        self.barred: dict[int, int] = {}  # trainer -> the round whose audit it failed
        self.first_round: int | None = None  # the first round this gate judged

    def near_copy(self, i: int, flats: Mapping[int, Tensor], previous: Tensor | None) -> str:
        """Why payload i is a near-copy ("" when it is not)."""
        others = [(f"trainer {j}", flats[j]) for j in sorted(flats) if j != i]
        if previous is not None:
            others.append(("the last aggregate", previous))
        for who, x in others:
            c = abs(_cos(flats[i], x))
            if c > self.cfg.copy_cosine:
                return f"|cosine| {c:.4f} to {who} > {self.cfg.copy_cosine:g}"
        return ""

    def replay(self, i: int, fragment: int, sketch: Tensor) -> str:
        """Why payload i (its count sketch) replays one of trainer i's earlier payloads of
        ``fragment`` ("" when it does not)."""
        for r, past in self.earlier.get((i, fragment), []):
            c = abs(_cos(sketch, past))
            if c > self.cfg.replay_cosine:
                return f"|cosine| {c:.4f} to its own payload of round {r} > {self.cfg.replay_cosine:g} (a replay)"
        return ""

    def _sketch(self, x: Tensor) -> Tensor:
        n = len(x)
        if n not in self._hashes:  # the same buckets and signs for every payload of this length
            g = torch.Generator().manual_seed(n)
            self._hashes[n] = (torch.randint(0, SKETCH_DIM, (n,), generator=g),
                               torch.randint(0, 2, (n,), generator=g).to(torch.float64) * 2 - 1)
        return _count_sketch(x, self._hashes[n])

    def contribution(self, own: float, other: float, half: float) -> str:
        """Why the contribution test fails ("" when it passes); loss improvements as in the docstring."""
        if not own > other:
            return f"own-shard improvement {own:.6g} <= {other:.6g} on data not assigned"
        if not own > half:
            return f"own-shard improvement {own:.6g} <= {half:.6g} at half the update (overshoots)"
        if not other >= -self.cfg.harm * own:
            return f"raises the loss on data not assigned by {-other:.6g} > {self.cfg.harm:g} x {own:.6g}"
        return ""

    def __call__(self, r: int, fragment: int, state: Mapping[str, Tensor], names: list[str],
                 payloads: Mapping[int, Payload], previous: Payload | None, reveal: str) -> dict[int, Verdict]:
        """Verdicts on round r's screened payloads of one fragment, ``{trainer index: tensors}``,
        against the round's input weights ``state``, the fragment's last public aggregate
        ``previous`` (None in round 1) and the round's ``reveal``. Updates the moving averages of
        the trainers that submitted."""
        cfg, verdicts = self.cfg, {}
        if self.first_round is None:
            self.first_round = r
        by_replay = self.replays_all(r)
        flats = {i: _flat(p) for i, p in payloads.items()}
        prev = _flat(previous) if previous is not None else None
        if prev is not None and float(torch.linalg.vector_norm(prev)) == 0.0:
            prev = None  # an empty round's zero aggregate is nobody's to copy
        norms = {i: float(torch.linalg.vector_norm(x)) for i, x in flats.items()}
        med = _median(list(norms.values())) if norms else 0.0
        sketches = {i: self._sketch(x) for i, x in flats.items()}
        for i in sorted(payloads):
            if i in self.barred:
                verdicts[i] = Verdict("ReplayMismatch", f"barred: its round {self.barred[i]} did not replay")
                continue
            v = Verdict(None)
            why = self.near_copy(i, flats, prev) or self.replay(i, fragment, sketches[i])
            if why:
                v.reason, v.detail = "NearCopy", why
            elif norms[i] > cfg.norm_multiple * med:
                v.reason, v.detail = "NormOutlier", f"L2 norm {norms[i]:.6g} > {cfg.norm_multiple:g} x median {med:.6g}"
            else:
                v.own, v.other, v.half = self.scorer.contribution(r, i, state, names, payloads[i], reveal)
                why = self.contribution(v.own, v.other, v.half)
                if why:
                    v.reason, v.detail = "NoContribution", why
            if by_replay:  # credited subject to the replay of every credited trainer (`audited`)
                v.average = avg = self.average.get((i, fragment), cfg.start)
            else:
                avg = (1.0 - cfg.ema) * self.average.get((i, fragment), cfg.start) + cfg.ema * (v.reason is None)
                self.average[(i, fragment)] = v.average = avg
            v.credited = v.reason in (None, "NoContribution") and (by_replay or avg > cfg.credit_above)
            v.aggregated = v.credited and v.reason is None
            verdicts[i] = v
            self.log.append({"round": r, "fragment": fragment, "trainer": i, "reason": v.reason,
                             "credited": v.credited, "own": v.own, "other": v.other, "half": v.half,
                             "average": avg, "norm": norms[i] / med if med else math.nan})
        for i, sk in sketches.items():
            self.earlier.setdefault((i, fragment), []).append((r, sk))
        return verdicts

    def audit_weight(self, i: int) -> float:
        """Trainer i's weight in the audit draw: ``audit_floor`` + 1 - its lowest moving average
        over the fragments (an honest trainer's history stays near 1, one that fails the checks
        often sits near the credit line)."""
        averages = [a for (j, _), a in self.average.items() if j == i] or [self.cfg.start]
        return self.cfg.audit_floor + 1.0 - min(averages)

    def replays_all(self, r: int) -> bool:
        """Whether round r is judged by the replay of every trainer credited in it: the gate's first
        round, with ``first_round_replay`` and an audit."""
        return r == self.first_round and self.cfg.first_round_replay and self.cfg.audit > 0

    def audited(self, reveal: str, credited: Iterable[int], r: int | None = None) -> list[int]:
        """The trainers of ``credited`` (trainer indices) whose round r is replayed: all of them in a
        round `replays_all`, else ``audit`` of them drawn without replacement with the round's
        ``reveal``, each with probability proportional to its `audit_weight`; sorted."""
        pool, picked = sorted(set(credited)), []
        if r is not None and self.replays_all(r):
            return pool
        weights = [self.audit_weight(i) for i in pool]
        while pool and len(picked) < self.cfg.audit:
            h = hashlib.sha256(f"{reveal}/audit/{len(picked)}".encode()).digest()
            u, k = int.from_bytes(h[:8], "big") / 2.0 ** 64 * sum(weights), 0
            while k < len(pool) - 1 and u >= weights[k]:
                u -= weights[k]
                k += 1
            weights.pop(k)
            picked.append(pool.pop(k))
        return sorted(picked)

    def bar(self, i: int, r: int, verdicts: Iterable[Verdict]) -> None:
        """Bar trainer i for the rest of the run: its round r did not replay. Its round-r
        ``verdicts`` (one per fragment) lose their credit and their place in the aggregate."""
        self.barred[i] = r
        for v in verdicts:
            v.reason, v.detail, v.credited, v.aggregated = "ReplayMismatch", f"round {r} did not replay", False, False
        self.log.append({"round": r, "fragment": None, "trainer": i, "reason": "ReplayMismatch", "credited": False})

    def clipped(self, payloads: Mapping) -> dict:
        """``payloads`` with each scaled down to the median L2 norm of them all (``clip``)."""
        if not self.cfg.clip or not payloads:
            return dict(payloads)
        norms = {k: payload_norm(p) for k, p in payloads.items()}
        med = _median(list(norms.values()))
        return {k: p if norms[k] <= med else {n: t * (med / norms[k]) for n, t in p.items()}
                for k, p in payloads.items()}


__all__ = ["SKETCH_DIM", "CreditConfig", "CreditGate", "Verdict"]

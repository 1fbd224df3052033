"""Loss-improvement scoring of pseudo-gradients (the idea of Templar's validator).

A payload is worth aggregating when applying it alone lowers the loss. For one fragment of the
global weights ``w`` and a trainer's pseudo-gradient ``d`` (``d = w - w_local``, DiLoCo's outer
gradient), the score is

    score(d) = loss(w) - loss(w with the fragment replaced by fragment - d)

on a fixed batch of training windows: positive when the trainer's own update helps, negative when
it hurts (a sign flip, an inner-product attack at large epsilon, a random or stale update). Payloads
with a score at or below ``min_score`` are left out; the others go to the aggregation rule.

Determinism: the batch is drawn by :func:`scoring_batch` from the task's training split with a
seed derived from the round only, the model runs in float32 on the CPU in eval mode, so any
watcher with the same data recomputes every score bit for bit and can check the syncer's choice.
Scores are not provable on-chain (each is a forward pass of the model): the v1 registry does not
take them as grounds to leave a live submission out (PROTOCOL.md section 4: only evidence or a
pending challenge does). In the root flow a syncer may leave an off-chain submission out on its
score (the spec's ``score_min``, scored on the trainer's own shard: `unique_ids`); a trainer that
disputes it forces its submission on-chain, which no score can leave out. A score-challenge game
(bisection over the forward pass) would be needed to make scores binding.

Usage::

    batch = scoring_batch(split, round_index=r, size=64)
    scores = loss_improvement(model, state, names, deltas, batch)   # {submitter: float}
    kept = {k: deltas[k] for k in deltas if scores[k] > 0.0}
"""

from __future__ import annotations

import hashlib
from typing import Callable, Mapping

import torch
from torch import Tensor

from tenzro_trainer.data.windows import Split, WindowDataset
from tenzro_trainer.evaluate import window_loss
from tenzro_trainer.models import PatchForecaster


def scoring_batch(split: Split, round_index: int, size: int = 64, salt: str = "",
                  unique_ids: list[str] | None = None) -> Tensor:
    """The round's fixed scoring windows: ``size`` windows of the split's training parts (of the
    series ``unique_ids`` only, e.g. one trainer's shard; None = every series), sampled with a seed
    from sha256(salt, round_index) (salt: e.g. the task id and the trainer), so every party draws
    the same batch. Returns (size, context_len + horizon) float32."""
    seed = int.from_bytes(hashlib.sha256(f"{salt}/{round_index}".encode()).digest()[:8], "big") >> 1
    return WindowDataset(split, unique_ids, seed=seed).sample(size)


@torch.no_grad()
def loss_improvement(model: PatchForecaster, state: Mapping[str, Tensor], names: list[str],
                     deltas: Mapping[str, Mapping[str, Tensor]], batch: Tensor) -> dict[str, float]:
    """Scores (see the module docstring) of each submitter's pseudo-gradient of one fragment.

    Args:
        model: a model of the task's architecture (its weights are overwritten).
        state: the global weights ``{name: fp32 tensor}`` the round started from.
        names: the fragment's tensor names; each delta holds exactly these.
        deltas: ``{submitter: {name: fp32 tensor}}`` pseudo-gradients (global - local).
        batch: scoring windows, (n, context_len + horizon) float32.

    Returns:
        ``{submitter: loss(w) - loss(w - delta)}`` (float, loss units of ``model.loss``).
    """
    model.load_state_dict(dict(state))
    base = window_loss(model, batch)
    scores = {}
    live = model.state_dict()  # shares storage with the model's parameters and buffers
    for key in sorted(deltas):
        d = deltas[key]
        for n in names:
            live[n].copy_(state[n] - d[n].to(torch.float32))
        scores[key] = base - window_loss(model, batch)
        for n in names:
            live[n].copy_(state[n])
    return scores


class ShardScorer:
    """Scores of a run's payloads, each on its trainer's own shard: the one computation of the
    simulator, the root-flow syncer and a trainer checking the syncer's verdict.

    Args:
        model: a model of the task's architecture (its weights are overwritten at each score).
        split: the task's train / held-out split.
        shard_of: trainer index -> the series ids of its shard.
        salt: the batches' salt (the task id); trainer i's batch of round r is seeded by
            ``salt/i`` and r (`scoring_batch`).
        size: windows per batch.
    """

    def __init__(self, model: PatchForecaster, split: Split, shard_of: Callable[[int], list[str]], salt: str,
                 size: int = 64):
        self.model, self.split, self.shard_of, self.salt, self.size = model, split, shard_of, salt, size
        self._batches: dict[tuple, Tensor] = {}

    def score(self, r: int, index: int, state: Mapping[str, Tensor], names: list[str],
              tensors: Mapping[str, Tensor]) -> float:
        """``loss(w) - loss(w - delta)`` of trainer ``index``'s pseudo-gradient ``tensors`` of the
        fragment ``names`` (``{name: fp32 tensor}``) against round r's input weights ``state``, on
        round r's batch of that trainer's shard; positive when the update lowers the loss."""
        key = (r, index)
        if key not in self._batches:
            if len(self._batches) > 64:  # rounds go by: keep the cache small
                self._batches.clear()
            self._batches[key] = scoring_batch(self.split, r, self.size, salt=f"{self.salt}/{index}",
                                               unique_ids=self.shard_of(index))
        return loss_improvement(self.model, state, list(names), {"p": tensors}, self._batches[key])["p"]

    def _batch(self, key: tuple, make: Callable[[], Tensor]) -> Tensor:
        if key not in self._batches:
            if len(self._batches) > 256:  # rounds go by: keep the cache small
                self._batches.clear()
            self._batches[key] = make()
        return self._batches[key]

    def contribution(self, r: int, index: int, state: Mapping[str, Tensor], names: list[str],
                     tensors: Mapping[str, Tensor], reveal: str) -> tuple[float, float, float]:
        """The contribution test's scores of trainer ``index``'s pseudo-gradient (Templar's check):
        ``(own, other, half)``, the loss improvement (`loss_improvement`, loss units) on a batch of its
        own shard, on a batch of the series it was *not* assigned, and on the own batch with half the
        pseudo-gradient applied (where an update that did not end its own training overshoots), drawn with a seed from
        sha256(salt, index, r, ``reveal``): ``reveal`` is a value the trainer cannot know before it
        submits (the round's reveal, recorded in the transcript), so it cannot tune its payload to
        the batch; a watcher with the transcript draws the same. Raises DataError when every series
        is the trainer's (no data it was not assigned)."""
        mine = self.shard_of(index)
        own = self._batch(("own", r, index, reveal), lambda: scoring_batch(
            self.split, r, self.size, salt=f"{self.salt}/{index}/own/{reveal}", unique_ids=mine))
        rest = set(mine)
        others = [u for u in self.split.unique_ids if u not in rest]
        other = self._batch(("other", r, index, reveal), lambda: scoring_batch(
            self.split, r, self.size, salt=f"{self.salt}/{index}/other/{reveal}", unique_ids=others))
        half = {n: t * 0.5 for n, t in tensors.items()}
        s_own = loss_improvement(self.model, state, list(names), {"p": tensors, "q": half}, own)
        s_other = loss_improvement(self.model, state, list(names), {"p": tensors}, other)["p"]
        return s_own["p"], s_other, s_own["q"]


__all__ = ["ShardScorer", "loss_improvement", "scoring_batch"]

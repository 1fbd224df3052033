"""Loss-improvement scores of root-flow payloads on their trainers' own shards (the spec's ``score_min``).

One computation for both sides of the verdict: the syncer scores each off-chain payload before it
aggregates and rejects one at or below ``score_min`` (``LossIncrease`` in the transcript); the
trainer it rejected scores its own payload the same way (same model, batch and arithmetic:
`tenzro_trainer.scoring`) and, when its score is above ``score_min``, takes the verdict for
censorship and delivers on-chain from the next round on, where no score can leave it out
(`RootTrainerMixin.check_left_out`). Scores are not provable on-chain; this makes a false
``LossIncrease`` cost the lying syncer the trainer's off-chain path, not the trainer its credit.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd
from torch import Tensor

from tenzro_operator.task_runtime import TaskRuntime

SCORING_WINDOWS = 64  # windows of a trainer's shard in a round's scoring batch


class ShardScorer:
    """Scores of one run's payloads (model and training split built once, batches per round and trainer).

    Args:
        runtime: the run's `TaskRuntime`; spec: its `TaskSpec`; df: its dataset frame.
    """

    def __init__(self, runtime: TaskRuntime, spec, df: pd.DataFrame) -> None:
        from tenzro_trainer.models import build_model

        self.runtime, self.proto = runtime, spec.require_protocol()
        self.salt = spec.task_id_bytes.hex()
        self.model = build_model(runtime.model_cfg).eval()
        self.split = runtime.split(df)
        self._batches: dict[tuple[int, int], Tensor] = {}

    def score(self, r: int, index: int, state: Mapping[str, Tensor], fragment: int,
              tensors: Mapping[str, Tensor]) -> float:
        """``loss(w) - loss(w - delta)`` of trainer ``index``'s pseudo-gradient ``tensors`` (the
        fragment's ``{name: fp32 tensor}``) against round r's input weights ``state``, on the round's
        `SCORING_WINDOWS` windows of that trainer's shard (seeded by the task id, the index and the
        round, so every party draws the same); positive when the update lowers the loss."""
        from tenzro_trainer.scoring import loss_improvement, scoring_batch

        key = (r, index)
        if key not in self._batches:
            if len(self._batches) > 64:  # rounds go by: keep the cache small
                self._batches.clear()
            self._batches[key] = scoring_batch(self.split, r, size=SCORING_WINDOWS, salt=f"{self.salt}/{index}",
                                               unique_ids=TaskRuntime.shard_ids(self.split, self.proto, index))
        return loss_improvement(self.model, state, list(self.runtime.fragments[fragment]), {"p": tensors},
                                self._batches[key])["p"]


__all__ = ["SCORING_WINDOWS", "ShardScorer"]

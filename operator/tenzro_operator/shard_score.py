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

import pandas as pd

from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.scoring import ShardScorer

SCORING_WINDOWS = 64  # windows of a trainer's shard in a round's scoring batch


def shard_scorer(runtime: TaskRuntime, spec, df: pd.DataFrame) -> ShardScorer:
    """The run's `ShardScorer` (`tenzro_trainer.scoring`): the task's model in eval mode, its
    training split of ``df``, trainer i's shard as `TaskRuntime.shard_ids` assigns it, batches
    salted with the task id; ``.score(r, index, state, runtime.fragments[f], tensors)``."""
    from tenzro_trainer.models import build_model

    proto, split = spec.require_protocol(), runtime.split(df)
    return ShardScorer(build_model(runtime.model_cfg).eval(), split, lambda i: TaskRuntime.shard_ids(split, proto, i),
                       salt=spec.task_id_bytes.hex(), size=SCORING_WINDOWS)


__all__ = ["SCORING_WINDOWS", "shard_scorer"]

"""Loss-improvement scores of root-flow payloads on their trainers' own shards (the spec's ``score_min``).

One computation for both sides of the verdict: the syncer scores each off-chain payload before it
aggregates and rejects one at or below ``score_min`` (``LossIncrease`` in the transcript); the
trainer it rejected scores its own payload the same way (same model, batch and arithmetic:
`tenzro_trainer.scoring`) and, when its score is above ``score_min``, takes the verdict for
censorship and delivers on-chain from the next round on, where no score can leave it out
(`ForcedPath.check_left_out`). Scores are not provable on-chain; this makes a false
``LossIncrease`` cost the lying syncer the trainer's off-chain path, not the trainer its credit.

Credit for work only (issue #26, `tenzro_trainer.credit`): the syncer's gate runs over the same
scorer (`RoundCommit.run_scorer`), and `round_reveal` the seed of its contribution batches, which no trainer knows
before the commit phase closes; the syncer applies it when the spec sets ``metadata.protocol.credit``
(`tenzro_operator.roles.syncer_credit`).
"""

from __future__ import annotations

import hashlib
from typing import Iterable

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


def round_reveal(task_id: bytes, round_index: int, commitments: Iterable[bytes]) -> str:
    """The seed of round r's contribution batches: sha256 over the task id, the round (8 bytes, big
    endian) and ``commitments`` in ascending byte order (hex string). The syncer passes the payload
    hashes of the round's gated payloads (`syncer_credit`), bound by each trainer's commitment in
    the commit phase and listed in the transcript, so no trainer knows the seed before the commit
    phase closes and a watcher recomputes it. Caveat: the last trainer to commit can grind its own
    payload against it; a value the syncer commits to before the round and reveals after the commit
    phase (or a later block hash) closes that."""
    h = hashlib.sha256(b"tenzro/train/credit-reveal/v1" + bytes(task_id) + int(round_index).to_bytes(8, "big"))
    for c in sorted(bytes(c) for c in commitments):
        h.update(c)
    return h.hexdigest()


__all__ = ["SCORING_WINDOWS", "round_reveal", "shard_scorer"]

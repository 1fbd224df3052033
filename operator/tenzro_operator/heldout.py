"""Held-out evaluation of a task's global weights (rolling origins over each series' tail).

Used by the demo's loss curve and the end-to-end tests: the same windows for
every round, so the curve compares like with like (see ../shared/EVALUATION.md).
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd
from torch import Tensor

from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.data.collection import seasonality
from tenzro_trainer.data.windows import heldout_windows
from tenzro_trainer.evaluate import EvalResult, evaluate
from tenzro_trainer.models import build_model

WINDOWS_PER_SERIES = 12


class HeldoutEvaluator:
    """`evaluator(state) -> EvalResult` (loss = normalized MSE, MASE geometric mean, sMAPE mean)."""

    def __init__(self, runtime: TaskRuntime, df: pd.DataFrame, windows_per_series: int = WINDOWS_PER_SERIES):
        self.split = runtime.split(df)
        self.windows = heldout_windows(self.split, windows_per_series)
        self.seasons = seasonality(self.split.unique_ids)
        self.model = build_model(runtime.model_cfg)

    def __call__(self, state: Mapping[str, Tensor]) -> EvalResult:
        self.model.load_state_dict(dict(state))
        return evaluate(self.model, self.split, self.windows, self.seasons)

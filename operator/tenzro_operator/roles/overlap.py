"""Overlap for the trainer daemon: round r+1's first inner steps run while round r is settled.

A spec with ``metadata.protocol.overlap_steps = d > 0`` lets a trainer that has delivered round r
keep training instead of idling until the syncer commits: up to d of round r+1's H inner steps run
from its own round-r weights during its waits. When round r's committed weights ``theta_r`` arrive,
the steps taken are kept as an offset from them (`InnerTrainer.rebase`: ``local += theta_r -
local_end_r``) and the other H - (steps taken) run as usual. The round's pseudo-gradient is still
``theta_r - local_end_{r+1}``, signed over round r+1's input weights root, so nothing about the
protocol changes: the one-step-delayed outer update of Streaming DiLoCo (Douillard et al. 2025,
arXiv:2501.18512, Sec. 2.3), its loss cost measured in ``trainer/benchmarks/results/overlap.md``.

The early steps live in memory only: a restarted trainer (or a run sent back by a fraud proof to
another round) trains its round from the committed weights, as without overlap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from torch import Tensor

from tenzro_trainer.inner import InnerResult, InnerTrainer


@dataclass
class EarlySteps:
    """The early inner steps of round ``round``, taken from the worker's round ``round - 1`` end
    weights ``base`` (``{name: fp32 CPU tensor}``), at most ``limit`` of them, one `InnerResult` each."""

    round: int
    base: dict[str, Tensor]
    limit: int
    taken: list[InnerResult] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.taken)

    @property
    def seconds(self) -> float:
        """Seconds spent in the early steps."""
        return sum(t for x in self.taken for t in x.step_times)

    def run_for(self, worker: InnerTrainer, budget_s: float, check_stop: Callable[[], None]) -> None:
        """Take early steps, one at a time, until ``limit`` are done or ``budget_s`` seconds have
        passed (at least one step when any is left; ``check_stop`` between steps)."""
        deadline = time.monotonic() + budget_s
        while self.steps < self.limit:
            check_stop()
            self.taken.append(worker.run(None, steps=1))
            if time.monotonic() >= deadline:
                return

    def finish(self, worker: InnerTrainer, global_state: Mapping[str, Tensor],
               on_step: Callable[[int, int], None] | None = None) -> InnerResult:
        """Rebase the early steps on the round's committed weights ``global_state`` and run the
        rest of the worker's H steps (`InnerTrainer.finish_round`): the whole round's result."""
        return worker.finish_round(self.taken, self.base, global_state, on_step)


__all__ = ["EarlySteps"]

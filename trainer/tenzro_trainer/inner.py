"""The inner loop of one DiLoCo worker (Douillard et al. 2023, Algorithm 1, lines 4-8).

Each round the worker loads the global weights, runs H AdamW steps on batches from its own
shards, and returns its local weights. The AdamW state persists across rounds, as in DiLoCo.
CPU runs in fp32 and is bit-for-bit reproducible for the same seed (no dropout by default, a
seeded sampler, deterministic kernels); CUDA runs under bf16 autocast with fp32 master weights.

Usage::

    worker = InnerTrainer(model_cfg, inner_cfg, WindowDataset(split, shard_ids, seed=inner_cfg.seed))
    for r in range(rounds):
        result = worker.run(global_state)        # {name: fp32 tensor}
        delta = pseudo_gradient(global_state, result.state)
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data.windows import WindowDataset
from tenzro_trainer.models import build_model


@dataclass
class InnerResult:
    """What one round of inner steps returns.

    Attributes:
        state: local weights after H steps, {name: fp32 CPU tensor}.
        mean_loss: mean training loss over the H steps (normalized MSE).
        step_times: wall time of each step, seconds.
        samples: windows processed (H * batch_size).
    """

    state: dict[str, Tensor]
    mean_loss: float
    step_times: list[float] = field(default_factory=list)
    samples: int = 0

    @property
    def samples_per_second(self) -> float:
        return self.samples / max(sum(self.step_times), 1e-12)


class InnerTrainer:
    """H inner AdamW steps per round on one worker's data, optimizer state kept across rounds."""

    def __init__(self, model_cfg: ModelConfig, cfg: InnerConfig, data: WindowDataset, init_seed: int = 0):
        self.model_cfg, self.cfg, self.data = model_cfg, cfg, data
        self.device = self._join()
        torch.manual_seed(init_seed)  # initial weights are overwritten by the global ones each round
        self.model = self._place(build_model(model_cfg).to(self.device))
        self.model.gradient_checkpointing = cfg.gradient_checkpointing
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=tuple(cfg.betas),
        )

    def _join(self) -> torch.device:
        """The device the loop runs on (a sharded loop joins its job here)."""
        return torch.device(self.cfg.device)

    def _place(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model as the optimizer will see it (a sharded loop shards it here)."""
        return model

    def _autocast(self):
        if self.cfg.dtype == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def load_global(self, global_state: Mapping[str, Tensor]) -> None:
        """Copy global weights into the local model (strict: every parameter must be present)."""
        self.model.load_state_dict({k: v for k, v in global_state.items()}, strict=True)

    def run(self, global_state: Mapping[str, Tensor] | None = None, steps: int | None = None,
            on_step: Callable[[int, int], None] | None = None) -> InnerResult:
        """Load ``global_state`` (if given), run ``steps`` (default H) AdamW steps, return local weights.

        ``on_step(done, total)`` is called after every step (progress bars); it must not touch the model.
        """
        if global_state is not None:
            self.load_global(global_state)
        model, opt, cfg = self.model, self.optimizer, self.cfg
        model.train()
        steps = cfg.steps if steps is None else steps
        losses = torch.zeros(steps, device=self.device)
        times = []
        for i in range(steps):
            t0 = time.perf_counter()
            loss, recorded = self._batch_loss(self.data.sample(cfg.batch_size))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            losses[i] = recorded
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            times.append(time.perf_counter() - t0)
            if on_step is not None:
                on_step(i + 1, steps)
        return InnerResult(self.local_state(), self._mean_loss(losses), times, steps * cfg.batch_size)

    def _batch_loss(self, batch: Tensor) -> tuple[Tensor, Tensor]:
        """(loss to back-propagate, loss to record) of one sampled batch (B, context_len + horizon) on
        the CPU: here both the model's loss on the whole batch."""
        with self._autocast():
            loss = self.model.loss(batch.to(self.device, non_blocking=True))
        return loss, loss.detach()

    def _mean_loss(self, losses: Tensor) -> float:
        """The round's mean loss from the H recorded step losses."""
        return float(losses.mean())

    def local_state(self) -> dict[str, Tensor]:
        """The local weights now, ``{name: fp32 CPU tensor}`` (copies)."""
        return {k: v.detach().to("cpu", torch.float32, copy=True) for k, v in self.model.state_dict().items()}

    @torch.no_grad()
    def rebase(self, old_base: Mapping[str, Tensor], new_base: Mapping[str, Tensor]) -> None:
        """The overlap correction: shift the local weights by ``new_base - old_base``, elementwise, for
        every tensor of the state (fp32).

        With overlap a worker starts round r+1's inner steps from its own round-r weights
        ``old_base`` before round r's global weights ``new_base`` arrive; once they do, the steps
        taken so far are kept as an offset from them (``local - old_base``), so the round's
        pseudo-gradient ``new_base - local_end`` is exactly the sum of its inner updates, measured
        from the weights the syncer committed (the one-step-delayed outer update of Streaming
        DiLoCo, Douillard et al. 2025, arXiv:2501.18512, Sec. 2.3, with a full correction).

        Raises:
            KeyError: a tensor of the model is missing from either base.
        """
        live = self.model.state_dict()
        for k, v in live.items():
            v.add_((new_base[k].to(v.device, torch.float32) - old_base[k].to(v.device, torch.float32)).to(v.dtype))

    def finish_round(self, early: Sequence[InnerResult], old_base: Mapping[str, Tensor],
                     new_base: Mapping[str, Tensor],
                     on_step: Callable[[int, int], None] | None = None) -> InnerResult:
        """Overlap: the steps of ``early`` were taken from ``old_base`` (this worker's previous end
        weights) before the round's global weights ``new_base`` came; `rebase` them on it and run
        the rest of the H steps. Returns the whole round's result: every step's time, the mean loss
        over the H steps, the local weights at the end (``on_step(done, H)`` counts from the early
        steps on)."""
        self.rebase(old_base, new_base)
        h, done = self.cfg.steps, sum(len(x.step_times) for x in early)
        parts = list(early)
        if done < h:
            parts.append(self.run(None, steps=h - done,
                                  on_step=(lambda i, n: on_step(done + i, h)) if on_step else None))
        n = sum(len(x.step_times) for x in parts)
        return InnerResult(parts[-1].state if done < h else self.local_state(),
                           sum(x.mean_loss * len(x.step_times) for x in parts) / n,
                           [t for x in parts for t in x.step_times], sum(x.samples for x in parts))

    def state_dict(self) -> dict:
        """Worker state for a restart: model, AdamW moments, sampler generator (a deep copy: later
        steps do not change it)."""
        return copy.deepcopy({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "data": self.data.state_dict()})

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.data.load_state_dict(state["data"])

"""The outer step of DiLoCo (Douillard et al. 2023, Algorithm 1, lines 10-12).

``delta = theta_global - theta_local`` per fragment (fp32); the aggregated delta is treated as a
gradient for SGD with Nesterov momentum (lr 0.7, momentum 0.9), using ``torch.optim.SGD``'s
update (Sutskever et al. 2013 form): ``buf = mu * buf + g; theta -= lr * (g + mu * buf)``.
Outer state stays on the CPU in fp32 and can be saved and restored, so a restarted syncer
resumes exactly.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor

from tenzro_trainer.config import OuterConfig
from tenzro_trainer.errors import AggregationError


def pseudo_gradient(global_frag: Mapping[str, Tensor], local_frag: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``global - local`` per tensor, fp32 on the CPU.

    Raises:
        KeyError: the fragments hold different names.
    """
    if set(global_frag) != set(local_frag):
        raise KeyError(f"fragments differ: {sorted(set(global_frag) ^ set(local_frag))}")
    return {n: global_frag[n].detach().to("cpu", torch.float32) - local_frag[n].detach().to("cpu", torch.float32)
            for n in sorted(global_frag)}


class OuterOptimizer:
    """Outer Nesterov SGD over one fragment's global weights.

    Usage::

        opt = OuterOptimizer(global_frag, OuterConfig())
        new_global = opt.step(aggregate)          # aggregate: {name: fp32 tensor}
        saved = opt.state_dict(); opt2 = OuterOptimizer.from_state_dict(saved)
    """

    def __init__(self, global_frag: Mapping[str, Tensor], cfg: OuterConfig = OuterConfig()):
        self.cfg = cfg
        self.names = sorted(global_frag)
        self.params = [torch.nn.Parameter(global_frag[n].detach().to("cpu", torch.float32).clone()) for n in self.names]
        self.opt = torch.optim.SGD(self.params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov)

    def weights(self) -> dict[str, Tensor]:
        """Current global weights of the fragment (fp32 copies)."""
        return {n: p.detach().clone() for n, p in zip(self.names, self.params)}

    @torch.no_grad()
    def step(self, aggregate: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """Apply one outer step with the aggregated pseudo-gradient; returns the new weights.

        Raises:
            AggregationError: names or shapes of ``aggregate`` differ from the fragment's.
        """
        if sorted(aggregate) != self.names:
            raise AggregationError(f"aggregate names {sorted(aggregate)} differ from fragment {self.names}")
        for n, p in zip(self.names, self.params):
            g = aggregate[n].detach().to("cpu", torch.float32)
            if g.shape != p.shape:
                raise AggregationError(f"aggregate {n!r} has shape {tuple(g.shape)}, weights {tuple(p.shape)}")
            p.grad = g.clone()
        self.opt.step()
        for p in self.params:
            p.grad = None
        return self.weights()

    def state_dict(self) -> dict:
        """Weights, momentum buffers and config: everything a restarted syncer needs."""
        return {"names": list(self.names), "weights": self.weights(), "optimizer": self.opt.state_dict(),
                "config": {"lr": self.cfg.lr, "momentum": self.cfg.momentum, "nesterov": self.cfg.nesterov}}

    @classmethod
    def from_state_dict(cls, state: dict) -> "OuterOptimizer":
        obj = cls(state["weights"], OuterConfig(**state["config"]))
        obj.opt.load_state_dict(state["optimizer"])
        return obj

"""The outer step of DiLoCo (Douillard et al. 2023, Algorithm 1, lines 10-12).

``delta = theta_global - theta_local`` per fragment (fp32); the aggregated delta is treated as a
gradient for SGD with Nesterov momentum (lr 0.7, momentum 0.9), in ``torch.optim.SGD``'s form
(Sutskever et al. 2013): ``buf = mu * buf + g; theta -= lr * (g + mu * buf)``. The step is the
canonical binary32 arithmetic of ``contracts/PROTOCOL.md`` section 1
(:func:`tenzro_trainer.canonical.nesterov_step`: one rounding per operation, no fused
multiply-add, ``lr`` and ``mu`` rounded to binary32), so the CPU, CUDA and the on-chain referee
agree bit for bit. The optimizer keeps its own fp32 weights and momentum buffers (on the CPU unless
told otherwise); they can be saved and restored, so a restarted syncer resumes exactly.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor

from tenzro_trainer.canonical import nesterov_step
from tenzro_trainer.config import ConfigError, OuterConfig
from tenzro_trainer.errors import AggregationError

STATE_FORMAT = "canonical-v1"
"""``state_dict()['format']``; a dict without it is the torch.optim.SGD layout of earlier versions."""


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
    """Outer Nesterov SGD over one fragment's global weights (PROTOCOL.md section 1).

    Usage::

        opt = OuterOptimizer(global_frag, OuterConfig())
        new_global = opt.step(aggregate)          # aggregate: {name: fp32 tensor}
        saved = opt.state_dict(); opt2 = OuterOptimizer.from_state_dict(saved)

    Attributes:
        names: the fragment's tensor names, ascending.
        params: fp32 weights, one tensor per name in ``names`` order (the live state: copying into
            one, under ``torch.no_grad()``, resets that tensor's weights and keeps its momentum).
        momentum: fp32 momentum buffers in the same order, +0 before the first step.
        device: where ``params`` and ``momentum`` live (the CPU by default).
    """

    def __init__(self, global_frag: Mapping[str, Tensor], cfg: OuterConfig = OuterConfig(), *,
                 device: torch.device | str = "cpu"):
        self.cfg = cfg
        self.device = torch.device(device)
        self.names = sorted(global_frag)
        self.params = [global_frag[n].detach().to(self.device, torch.float32).clone() for n in self.names]
        self.momentum = [torch.zeros_like(p) for p in self.params]  # +0

    def weights(self) -> dict[str, Tensor]:
        """Current global weights of the fragment: ``{name: fp32 copy}`` on ``self.device``."""
        return {n: p.detach().clone() for n, p in zip(self.names, self.params)}

    def zero_aggregate(self) -> dict[str, Tensor]:
        """``+0`` for every coordinate: the aggregate of a round in which the fragment had no
        accepted submission (PROTOCOL.md section 1), ``{name: fp32 zeros}`` on ``self.device``."""
        return {n: torch.zeros_like(p) for n, p in zip(self.names, self.params)}

    @torch.no_grad()
    def step(self, aggregate: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """Apply one outer step with the aggregated pseudo-gradient; returns the new weights.

        Args:
            aggregate: ``{name: tensor}`` with the fragment's names and shapes (cast to fp32 and
                moved to ``self.device``). A fragment without accepted submissions steps with
                ``+0`` everywhere (PROTOCOL.md section 1): its weights still move by the momentum.
        Raises:
            AggregationError: names or shapes of ``aggregate`` differ from the fragment's.
        """
        if sorted(aggregate) != self.names:
            raise AggregationError(f"aggregate names {sorted(aggregate)} differ from fragment {self.names}")
        grads = []
        for n, p in zip(self.names, self.params):
            g = aggregate[n].detach().to(self.device, torch.float32)
            if g.shape != p.shape:
                raise AggregationError(f"aggregate {n!r} has shape {tuple(g.shape)}, weights {tuple(p.shape)}")
            grads.append(g)
        for i, g in enumerate(grads):
            self.params[i], self.momentum[i] = nesterov_step(self.params[i], self.momentum[i], g, self.cfg.lr,
                                                             self.cfg.momentum, self.cfg.nesterov)
        return self.weights()

    def state_dict(self) -> dict:
        """Weights, momentum buffers and config (CPU tensors): everything a restarted syncer needs.

        ``{"format": "canonical-v1", "names": [...], "weights": {name: fp32}, "momentum": {name: fp32},
        "config": {"lr", "momentum", "nesterov"}}``.
        """
        cpu = lambda ts: {n: t.detach().to("cpu").clone() for n, t in zip(self.names, ts)}  # noqa: E731
        return {"format": STATE_FORMAT, "names": list(self.names), "weights": cpu(self.params),
                "momentum": cpu(self.momentum),
                "config": {"lr": self.cfg.lr, "momentum": self.cfg.momentum, "nesterov": self.cfg.nesterov}}

    @classmethod
    def from_state_dict(cls, state: Mapping, *, device: torch.device | str = "cpu") -> "OuterOptimizer":
        """Rebuild an optimizer from `state_dict`'s output.

        Also reads the layout of earlier versions, which stepped with ``torch.optim.SGD``: no
        ``"format"`` and ``"momentum"``, but ``"optimizer"``, the SGD state dict whose
        ``state[i]["momentum_buffer"]`` is the buffer of the i-th parameter of its param group, the
        parameters in ``names`` order; a missing (or ``None``) buffer means +0 (no step yet).

        Raises:
            ConfigError: unknown format, or names / shapes that do not match the weights.
        """
        fmt = state.get("format")
        if fmt not in (None, STATE_FORMAT):
            raise ConfigError(f"outer optimizer state has format {fmt!r}; this version reads {STATE_FORMAT!r}")
        obj = cls(state["weights"], OuterConfig(**state["config"]), device=device)
        if list(state["names"]) != obj.names:
            raise ConfigError(f"outer state names {list(state['names'])} differ from its weights' {obj.names}")
        if fmt == STATE_FORMAT:
            bufs = [state["momentum"].get(n) for n in obj.names]
        else:
            bufs = _sgd_buffers(state["optimizer"], len(obj.names))
        for i, (n, b) in enumerate(zip(obj.names, bufs)):
            if b is None:
                continue  # +0
            if tuple(b.shape) != tuple(obj.params[i].shape):
                raise ConfigError(f"outer state momentum {n!r} has shape {tuple(b.shape)}, weights "
                                  f"{tuple(obj.params[i].shape)}")
            obj.momentum[i] = b.detach().to(obj.device, torch.float32).clone()
        return obj


def _sgd_buffers(opt_state: Mapping, count: int) -> list[Tensor | None]:
    """The momentum buffers of a ``torch.optim.SGD.state_dict()`` over ``count`` parameters, in
    parameter order (``None`` where SGD has none yet)."""
    ids = [pid for group in opt_state["param_groups"] for pid in group["params"]]
    if len(ids) != count:
        raise ConfigError(f"old outer state: the SGD state holds {len(ids)} parameters, the weights {count}")
    return [opt_state["state"].get(pid, {}).get("momentum_buffer") for pid in ids]

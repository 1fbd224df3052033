"""The inner loop of one DiLoCo worker on several devices of one host: FSDP2 over a torch.distributed job.

A trainer host with N devices (GPUs, or CPU processes for tests) runs its H inner AdamW steps as one
``torchrun`` job of N ranks. Each block of the model and the model itself are wrapped with FSDP2
(``torch.distributed.fsdp.fully_shard``, PyTorch's per-parameter sharding, Zhao et al. 2023,
"PyTorch FSDP", VLDB, Sec. 3): parameters, gradients and AdamW moments are sharded over the ranks,
gathered for a block's forward and backward, and gradients are reduce-scattered (averaged).

Data. Every rank holds the same ``WindowDataset`` (same shards, same seed) and draws the same
global batch of ``batch_size`` windows; rank r trains on the r-th contiguous slice of it
(``torch.tensor_split``). Its loss is weighted by ``N * n_r / n`` (``n_r``: target values in its
slice, ``n``: in the global batch), so the averaged gradient is the gradient of the global batch's
loss, and the job computes the same round as one process on the same global batch, up to the order
of floating-point reductions (the reduce-scatter sums N partial gradients where one process sums the
whole batch in one kernel). The sampler's state is the same on every rank, so a restart needs only one
copy of it.

The result is the host's one pseudo-gradient: ``run`` returns the full fp32 weights on rank 0 (an
empty dict elsewhere). `state_dict` gathers a checkpoint (full model, full AdamW state keyed by
parameter name, sampler) on rank 0; `load_state_dict` takes one on every rank, so a job with any N
resumes it.

Backends: NCCL on CUDA, gloo on the CPU. CUDA runs under bf16 autocast with fp32 master weights, as
`tenzro_trainer.inner.InnerTrainer`.

Usage (inside ``torchrun --nproc-per-node N``)::

    worker = ShardedInnerTrainer(model_cfg, inner_cfg, WindowDataset(split, shard_ids, seed=s))
    result = worker.run(global_state)    # rank 0: InnerResult with the full state; others: state == {}
"""

from __future__ import annotations

import os
from typing import Mapping

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from tenzro_trainer.errors import ConfigError
from tenzro_trainer.inner import InnerTrainer

_FULL = StateDictOptions(full_state_dict=True)
_FULL_ON_RANK0 = StateDictOptions(full_state_dict=True, cpu_offload=True)


def init_distributed(device: str) -> torch.device:
    """Join the torch.distributed job this process was started in (``torchrun`` sets RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) and return this rank's device.

    NCCL and ``cuda:LOCAL_RANK`` when ``device`` is CUDA, gloo and the CPU otherwise. Idempotent.

    Raises:
        ConfigError: not started by torchrun (no RANK / WORLD_SIZE), or CUDA asked for and a rank
            has no GPU of its own.
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise ConfigError("a sharded inner loop runs inside torchrun (RANK and WORLD_SIZE are not set)")
    cuda = device.startswith("cuda")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        if local >= torch.cuda.device_count():
            raise ConfigError(f"rank {os.environ['RANK']} wants cuda:{local} but this host has "
                              f"{torch.cuda.device_count()} GPU(s)")
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        if cuda:
            dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        else:
            dist.init_process_group("gloo")
    return torch.device("cuda", local) if cuda else torch.device("cpu")


def shard_model(model: nn.Module, mesh) -> nn.Module:
    """FSDP2 on every block of every ``nn.ModuleList`` of the model (its transformer / mixer layers),
    then on the model itself (embeddings, head, norms). Parameters become DTensors sharded on dim 0."""
    for module in list(model.modules()):
        if isinstance(module, nn.ModuleList):
            for block in module:
                fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def target_count(model: nn.Module, window: Tensor) -> Tensor:
    """Target values the model's loss averages over for ``window`` (B, context_len + horizon):
    the observed (non-NaN) ones for a masked model, all of them otherwise. A 0-dim int64 tensor."""
    targets = model.training_targets(window)
    if model.masked:
        return (~torch.isnan(targets)).sum()
    return torch.tensor(targets.numel())


class ShardedInnerTrainer(InnerTrainer):
    """H inner AdamW steps per round on one trainer's data, the model sharded over a torch.distributed
    job's ranks (FSDP2); AdamW state and sampler kept across rounds, as `InnerTrainer`, whose ``run``
    (the step loop: on rank 0 the full local weights, the global batch's mean loss, the step times;
    on other ranks the same with ``state == {}``) and ``finish_round`` it keeps.

    Every method is collective: every rank calls it, in the same order, with the same arguments
    (``global_state`` on every rank; a rank other than 0 may pass the same state or ``None`` only where
    the docstring says so).

    Raises (constructor):
        ConfigError: ``batch_size`` smaller than the job's world size (a rank would have no windows).
    """

    def _join(self) -> torch.device:
        """Join the job (`init_distributed`); refuse a batch smaller than its world size."""
        device = init_distributed(self.cfg.device)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if self.cfg.batch_size < self.world:
            raise ConfigError(f"batch_size {self.cfg.batch_size} is smaller than the {self.world} ranks of the job")
        return device

    def _place(self, model: nn.Module) -> nn.Module:
        """FSDP2 over the job's ranks (`shard_model`); every rank built the same initial weights."""
        return shard_model(model, init_device_mesh(self.device.type, (self.world,)))

    def load_global(self, global_state: Mapping[str, Tensor]) -> None:
        """Global weights into the sharded model ({name: fp32 tensor}, every parameter, on every rank)."""
        set_model_state_dict(self.model, dict(global_state), options=_FULL)

    def _batch_loss(self, batch: Tensor) -> tuple[Tensor, Tensor]:
        """This rank's slice of the global batch (the same on every rank): its loss scaled by
        ``N * n_r / n`` to back-propagate (the reduce-scatter averages over ranks), and by ``n_r / n``
        to record (`_mean_loss` sums the ranks'). `InnerTrainer.run` does the rest of the step."""
        total = target_count(self.model, batch).clamp_min(1)
        part = torch.tensor_split(batch, self.world)[self.rank]
        share = float(target_count(self.model, part).double() / total.double())
        with self._autocast():
            loss = self.model.loss(part.to(self.device, non_blocking=True))
        return loss * (share * self.world), loss.detach().float() * share

    def _mean_loss(self, losses: Tensor) -> float:
        """The global batch's mean loss: the ranks' share-weighted step losses summed, then averaged."""
        dist.all_reduce(losses)
        return float(losses.mean())

    def local_state(self) -> dict[str, Tensor]:
        """The full local weights, ``{name: fp32 CPU tensor}`` on rank 0, ``{}`` on the others."""
        full = get_model_state_dict(self.model, options=_FULL_ON_RANK0)
        return {k: v.to(torch.float32, copy=True) for k, v in full.items()}

    @torch.no_grad()
    def rebase(self, old_base: Mapping[str, Tensor], new_base: Mapping[str, Tensor]) -> None:
        """The overlap correction of `InnerTrainer.rebase`: local weights += ``new_base - old_base``
        (both full, on every rank).

        Raises:
            KeyError: a tensor of the model is missing from either base.
        """
        full = get_model_state_dict(self.model, options=_FULL)
        shifted = {k: v.float() + (new_base[k].to(v.device, torch.float32) - old_base[k].to(v.device, torch.float32))
                   for k, v in full.items()}
        set_model_state_dict(self.model, shifted, options=_FULL)

    def state_dict(self) -> dict:
        """A restart checkpoint on rank 0 (``{}`` elsewhere): the full model, the full AdamW state
        keyed by parameter name, the sampler's generator state. Any world size can load it."""
        model = get_model_state_dict(self.model, options=_FULL_ON_RANK0)
        optim = get_optimizer_state_dict(self.model, self.optimizer, options=_FULL_ON_RANK0)
        if self.rank != 0:
            return {}
        return {"format": "fsdp2-full", "model": model, "optimizer": optim, "data": self.data.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Resume from `state_dict`'s checkpoint (the same dict on every rank).

        Raises:
            ConfigError: the checkpoint is not one of this class (``format`` is not ``fsdp2-full``).
        """
        if state.get("format") != "fsdp2-full":
            raise ConfigError("not a sharded inner checkpoint (written by ShardedInnerTrainer.state_dict)")
        set_model_state_dict(self.model, state["model"], options=_FULL)
        set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"], options=_FULL)
        self.data.load_state_dict(state["data"])


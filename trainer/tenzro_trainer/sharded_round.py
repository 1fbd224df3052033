"""One inner round of a sharded (FSDP2) worker, run under torchrun: the check that N ranks compute
what one process computes, and the GPU host's throughput figure.

    torchrun --nproc-per-node 2 -m tenzro_trainer.sharded_round --preset cpu-test --steps 4 --batch 16 --out /tmp/r
    torchrun --nproc-per-node 1 -m tenzro_trainer.sharded_round --preset gpu-ref --device cuda --dtype bf16 --out /tmp/g

Every rank builds the model from ``--init-seed`` (the round's global weights), the data from
``--data`` (a long-format file, default the built-in collection) split as the trainer daemon does
(``train_heldout_split``), one `WindowDataset` seeded ``--seed`` over all series, and runs
``--steps`` inner steps of `ShardedInnerTrainer`. Rank 0 writes ``OUT/state.safetensors`` (the
local weights, fp32) and ``OUT/result.json`` (world size, device, mean loss, samples/s, peak device
memory in bytes). ``--checkpoint PATH`` saves the restart checkpoint after the steps, ``--resume PATH``
starts from one (any world size).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.data import WindowDataset, default_collection, load_long_format, train_heldout_split
from tenzro_trainer.errors import TrainerError
from tenzro_trainer.models import build_model
from tenzro_trainer.sharded import ShardedInnerTrainer


def initial_state(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """The model's initial weights for ``seed`` ({name: fp32 CPU tensor}): the round's global weights."""
    torch.manual_seed(seed)
    return {k: v.float() for k, v in build_model(cfg).state_dict().items()}


def build_split(cfg: ModelConfig, data: str | None):
    """The split a trainer of this model trains on: ``data`` (long-format file) or the built-in collection."""
    df = load_long_format(data) if data else default_collection()
    return train_heldout_split(df, cfg.context_len, cfg.horizon, min_context=cfg.effective_min_context)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="cpu-test")
    ap.add_argument("--family", default="timesfm")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16, help="global batch: windows per step over all ranks")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    ap.add_argument("--init-seed", type=int, default=0, help="seed of the initial (global) weights")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--data", help="long-format CSV/Parquet (default: the built-in collection)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per rank")
    ap.add_argument("--resume", help="restart checkpoint to start from")
    ap.add_argument("--checkpoint", help="write the restart checkpoint here after the steps")
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        cfg = ModelConfig.preset(args.preset, args.family)
        inner = InnerConfig(steps=args.steps, batch_size=args.batch, lr=args.lr, device=args.device,
                            dtype=args.dtype, seed=args.seed)
        worker = ShardedInnerTrainer(cfg, inner, WindowDataset(build_split(cfg, args.data), seed=args.seed),
                                     init_seed=args.init_seed)
        if args.resume:
            worker.load_state_dict(torch.load(args.resume, weights_only=False))
            res = worker.run(None)
        else:
            res = worker.run(initial_state(cfg, args.init_seed))
        ckpt = worker.state_dict() if args.checkpoint else None
    except TrainerError as exc:
        print(f"sharded round: {exc}", file=sys.stderr)
        return 2
    if worker.rank == 0:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in res.state.items()}, str(out / "state.safetensors"))
        if ckpt is not None:
            torch.save(ckpt, args.checkpoint)
        steady = res.step_times[1:] or res.step_times  # the first step compiles kernels / warms caches
        cuda = worker.device.type == "cuda"
        (out / "result.json").write_text(json.dumps({
            "world": worker.world, "device": torch.cuda.get_device_name(worker.device) if cuda else "cpu",
            "preset": args.preset, "dtype": args.dtype, "steps": len(res.step_times), "global_batch": args.batch,
            "mean_loss": res.mean_loss, "samples_per_s": args.batch / statistics.median(steady),
            "peak_memory_bytes": torch.cuda.max_memory_allocated(worker.device) if cuda else None,
        }, indent=1) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    code = main()
    # Every rank has passed the barrier and destroyed its process group, and rank 0 has written its
    # files: leave without the interpreter's finalization, where gloo's worker threads can still be
    # alive and abort the process ("terminate called without an active exception", SIGABRT; seen
    # once in CI on 2 CPU cores, pytorch/pytorch#179291 describes the finalization race).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

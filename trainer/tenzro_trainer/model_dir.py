"""A trained model on disk: ``model.safetensors`` (fp32 weights) + ``config.json`` (model config and
provenance). Written by ``tenzro train export-model``, read by ``tenzro forecast --model DIR``.

``config.json``::

    {"format": "tenzro-model/v1",
     "model": {ModelConfig fields},
     "weights_sha256": hex sha256 of model.safetensors,
     "provenance": {free-form: task id, final model hash, spec hash, ...}}

A model may be the average of several rounds' global weights (``tenzro train export-model
--average-last K``, :func:`average_weights`): a tail average of the iterates (Polyak & Juditsky
1992; the stochastic weight averaging of Izmailov et al. 2018). The outer step moves the
zero-shot score by about ±0.01 relative MASE from one round to the next; an average of the last
rounds does not depend on where the last step landed (over 2 seeds of the CPU reference recipe,
rounds 20, 25 and 30 averaged: MASE 0.890 against the final 0.894, WQL 0.849 against 0.859;
trainer/benchmarks/results/zero_shot_levers.md).

Usage::

    save_model_dir(out, state, model_cfg, provenance={"task_id": "0x..."})
    model, info = load_model_dir(out)              # eval mode, CPU
    state = average_weights([state_r28, state_r29, state_r30])
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from safetensors.torch import load_file, save_file

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.errors import ConfigError
from tenzro_trainer.models import PatchForecaster, build_model

FORMAT = "tenzro-model/v1"
WEIGHTS = "model.safetensors"
CONFIG = "config.json"


def average_weights(states: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The elementwise mean of several global weights, summed in float64 in the order given and
    rounded to float32 once (the same bits on every machine).

    Args:
        states: one or more ``{name: tensor}`` with the same names and shapes.
    Returns:
        ``{name: float32 CPU tensor}``.
    Raises:
        ConfigError: no states, or states whose names or shapes differ.
    """
    if not states:
        raise ConfigError("average_weights: no weights to average")
    first = states[0]
    for i, st in enumerate(states[1:], 1):
        if set(st) != set(first) or any(tuple(st[k].shape) != tuple(first[k].shape) for k in first):
            raise ConfigError(f"average_weights: weights {i} differ from weights 0 in their tensors' names or shapes")
    out = {}
    for k in sorted(first):
        acc = torch.zeros(first[k].shape, dtype=torch.float64)
        for st in states:
            acc += st[k].detach().to("cpu", torch.float64)
        out[k] = (acc / len(states)).to(torch.float32)
    return out


def save_model_dir(out: str | Path, state: Mapping[str, torch.Tensor], cfg: ModelConfig,
                   provenance: Mapping[str, Any] | None = None) -> Path:
    """Write ``state`` (checked against ``cfg``'s model: same names and shapes) and ``cfg`` to ``out``.

    Raises:
        ConfigError: ``state`` does not fit ``cfg``.
    """
    out = Path(out)
    model = build_model(cfg)
    try:
        model.load_state_dict(dict(state), strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"weights do not fit the model config: {exc}") from exc
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in sorted(state.items())}
    save_file(tensors, str(out / WEIGHTS))
    digest = hashlib.sha256((out / WEIGHTS).read_bytes()).hexdigest()
    meta = {"format": FORMAT, "model": cfg.to_dict(), "weights_sha256": digest, "provenance": dict(provenance or {})}
    (out / CONFIG).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out


def load_model_dir(path: str | Path) -> tuple[PatchForecaster, dict]:
    """The model saved in ``path`` (eval mode, CPU, fp32) and its ``config.json``.

    Raises:
        ConfigError: missing files, an unknown format, a weights file whose sha256 differs from
            the recorded one, or weights that do not fit the config.
    """
    path = Path(path)
    if not (path / CONFIG).is_file() or not (path / WEIGHTS).is_file():
        raise ConfigError(f"{path} is not a model directory: it needs {CONFIG} and {WEIGHTS}")
    try:
        meta = json.loads((path / CONFIG).read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path / CONFIG}: not JSON ({exc})") from exc
    if meta.get("format") != FORMAT:
        raise ConfigError(f"{path / CONFIG}: format {meta.get('format')!r}, expected {FORMAT!r}")
    digest = hashlib.sha256((path / WEIGHTS).read_bytes()).hexdigest()
    if meta.get("weights_sha256") != digest:
        raise ConfigError(f"{path / WEIGHTS}: sha256 {digest} differs from config.json's {meta.get('weights_sha256')}")
    known = {f.name for f in fields(ModelConfig)}
    cfg = ModelConfig(**{k: v for k, v in meta["model"].items() if k in known})
    model = build_model(cfg)
    try:
        model.load_state_dict(load_file(str(path / WEIGHTS)), strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"{path / WEIGHTS} does not fit the model config: {exc}") from exc
    return model.eval(), meta


__all__ = ["CONFIG", "FORMAT", "WEIGHTS", "average_weights", "load_model_dir", "save_model_dir"]

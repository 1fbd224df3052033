"""Configuration dataclasses: the model's hyperparameters, the inner loop's and the outer optimizer's.

The model config is separate from the run's settings (nanoGPT habit); checkpoints store both.
Defaults follow the reference run of DESIGN.md (inner AdamW lr 3e-4, wd 0.01, betas 0.9/0.95,
batch 64, H=24; outer Nesterov SGD lr 0.7, momentum 0.9).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from tenzro_trainer.errors import ConfigError

FAMILIES = ("timesfm", "ttm", "chronos_bolt")


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of a patch model.

    Attributes:
        family: catalog key, ``"timesfm"`` (decoder-only patch transformer, Das et al. 2024,
            arXiv:2310.10688), ``"ttm"`` (Granite-TTM-class patch mixer, Ekambaram et al. 2024,
            arXiv:2401.03955) or ``"chronos_bolt"`` (patch encoder-decoder with a direct
            multi-quantile head, Ansari et al. 2024, arXiv:2403.07815, Chronos-Bolt).
        context_len: input length in time steps; a multiple of ``patch_len``.
        horizon: forecast length in time steps (the output patch length).
        patch_len: input patch length in time steps.
        d_model: width of the token embeddings.
        n_layers: transformer blocks (timesfm) or mixer blocks (ttm).
        n_heads: attention heads (timesfm only); ``d_model % n_heads == 0``.
        d_ff: hidden width of the MLPs.
        dropout: dropout probability (0 keeps the inner loop bit-for-bit reproducible).
        quantiles: levels of the multi-quantile head, ascending in (0, 1) and including 0.5 (the
            point forecast); trained with the quantile (pinball) loss. Empty: a point head trained
            with MSE (the original presets). ``chronos_bolt`` always has a quantile head.
        masked: inputs may hold NaN (missing values, left padding of short histories): the patch
            embedding sees a mask channel, normalization statistics and the loss skip missing points.
        min_context: shortest observed context a training window may have when ``masked``
            (shorter ones are left-padded up to ``context_len``); 0 means ``context_len`` (full
            windows only, the original behaviour).
    """

    family: str = "timesfm"
    context_len: int = 64
    horizon: int = 16
    patch_len: int = 16
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 128
    dropout: float = 0.0
    quantiles: tuple[float, ...] = ()
    masked: bool = False
    min_context: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "quantiles", tuple(float(q) for q in self.quantiles))
        if self.family not in FAMILIES:
            raise ConfigError(f"unknown architecture family {self.family!r}; known: {', '.join(FAMILIES)}")
        for name in ("context_len", "horizon", "patch_len", "d_model", "n_layers", "n_heads", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        if self.context_len % self.patch_len:
            raise ConfigError(
                f"context_len ({self.context_len}) must be a multiple of patch_len ({self.patch_len})"
            )
        if self.family == "timesfm" and self.d_model % self.n_heads:
            raise ConfigError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        q = self.quantiles
        if q and (list(q) != sorted(set(q)) or not all(0.0 < x < 1.0 for x in q) or 0.5 not in q):
            raise ConfigError(f"quantiles must be distinct, ascending, in (0, 1) and include 0.5, got {q}")
        if self.family == "chronos_bolt" and not q:
            raise ConfigError("the chronos_bolt family needs quantiles (it has a multi-quantile head)")
        if not isinstance(self.min_context, int) or not 0 <= self.min_context <= self.context_len:
            raise ConfigError(f"min_context must be in [0, context_len], got {self.min_context!r}")
        if self.min_context and not self.masked:
            raise ConfigError("min_context < context_len pads short contexts: it needs masked=True")

    @property
    def n_patches(self) -> int:
        """Number of input patches (tokens): ``context_len // patch_len``."""
        return self.context_len // self.patch_len

    @property
    def n_quantiles(self) -> int:
        """Outputs per forecast step: ``len(quantiles)``, or 1 for a point head."""
        return len(self.quantiles) or 1

    @property
    def effective_min_context(self) -> int:
        """Shortest training context: ``min_context`` when set, else ``context_len``."""
        return self.min_context or self.context_len

    @classmethod
    def preset(cls, name: str, family: str = "timesfm") -> "ModelConfig":
        """A named size: ``"cpu-test"`` (~1M params), ``"demo"`` (~0.1M, a round in seconds on
        1-2 CPU cores), ``"reference-200m"`` (~200M params, the Phase-1 reference; GPU only),
        ``"cpu-ref"`` (~0.85M for timesfm, context 512, quantile head: the CPU reference recipe of the
        zero-shot benchmark) or ``"gpu-ref"`` (~29M for timesfm, the same on one GPU).

        Raises:
            ConfigError: unknown preset name or family.
        """
        if name not in PRESETS:
            raise ConfigError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}")
        return cls(family=family, **PRESETS[name])

    @classmethod
    def from_metadata(cls, family: str, metadata: dict[str, Any] | None) -> "ModelConfig":
        """Build from a task spec's ``architecture.family`` and ``architecture.metadata``.

        ``metadata`` may name a ``"preset"`` (see :meth:`preset`) and override any field
        (``context_len``, ``horizon``, ``patch_len``, ``d_model``, ``n_layers``, ``n_heads``,
        ``d_ff``, ``dropout``, ``quantiles`` as a list or a comma-separated string, ``masked``,
        ``min_context``). Integer fields given as strings are converted.

        Raises:
            ConfigError: unknown keys, wrong types, or an inconsistent configuration.
        """
        metadata = dict(metadata or {})
        preset = metadata.pop("preset", None)
        metadata.pop("family", None)  # the spec's architecture.family wins
        if preset is not None and preset not in PRESETS:
            raise ConfigError(f"unknown model preset {preset!r} in architecture.metadata; known: {', '.join(PRESETS)}")
        base: dict[str, Any] = dict(PRESETS[preset]) if preset is not None else {}
        known = {f.name: f.type for f in fields(cls)}
        extra = set(metadata) - set(known) - IGNORED_METADATA_KEYS
        if extra:
            raise ConfigError(
                f"architecture.metadata has unknown keys {sorted(extra)}; model fields are {sorted(known)}"
            )
        for key, value in metadata.items():
            if key in IGNORED_METADATA_KEYS:
                continue
            default = getattr(cls, key, None)
            try:
                if key == "quantiles":
                    base[key] = tuple(float(x) for x in (value.split(",") if isinstance(value, str) else value))
                elif key == "masked":
                    if str(value).lower() not in ("true", "false", "1", "0"):
                        raise ValueError(value)
                    base[key] = str(value).lower() in ("true", "1")
                else:
                    base[key] = float(value) if isinstance(default, float) else int(value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"architecture.metadata[{key!r}] = {value!r} is not a number") from exc
        return cls(family=family, **base)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON-serialisable)."""
        return dataclasses.asdict(self)


# Metadata keys a task spec may carry that do not shape the model (recorded, not used here).
IGNORED_METADATA_KEYS = frozenset({"frequency", "freq", "dataset", "notes"})

# The nine quantile levels of Chronos / Chronos-Bolt (Ansari et al. 2024) and of WQL.
QUANTILE_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)

PRESETS: dict[str, dict[str, Any]] = {
    # ~0.85M parameters: for CPU tests.
    "cpu-test": dict(context_len=64, horizon=16, patch_len=16, d_model=128, n_layers=4, n_heads=4, d_ff=512),
    # ~0.1M parameters: trains a round of H=24 steps in seconds on 1-2 CPU cores.
    "demo": dict(context_len=64, horizon=16, patch_len=16, d_model=64, n_layers=2, n_heads=4, d_ff=128),
    # ~200M parameters: the Phase-1 reference (TimesFM-200M-like sizes); CUDA bf16.
    "reference-200m": dict(
        context_len=512, horizon=128, patch_len=32, d_model=1024, n_layers=16, n_heads=16, d_ff=4096
    ),
    # ~0.85M parameters (timesfm; ttm 1.5M, chronos_bolt 1.1M): the CPU reference recipe of the
    # zero-shot benchmark (context 512, quantile head, short histories padded).
    "cpu-ref": dict(context_len=512, horizon=64, patch_len=32, d_model=128, n_layers=4, n_heads=4, d_ff=256,
                    quantiles=QUANTILE_LEVELS, masked=True, min_context=8),
    # ~29M parameters (timesfm; ttm 22M, chronos_bolt 42M): the single-GPU reference recipe (CUDA bf16).
    "gpu-ref": dict(context_len=512, horizon=64, patch_len=32, d_model=512, n_layers=8, n_heads=8, d_ff=2048,
                    quantiles=QUANTILE_LEVELS, masked=True, min_context=8),
}


@dataclass(frozen=True)
class InnerConfig:
    """Settings of the inner loop (DiLoCo's inner optimizer, Douillard et al. 2023, Alg. 1).

    Attributes:
        steps: H, AdamW steps per round.
        lr, weight_decay, betas: AdamW hyperparameters.
        batch_size: windows per step per worker.
        device: ``"cpu"`` or ``"cuda"`` (or ``"cuda:N"``).
        dtype: ``"fp32"`` or ``"bf16"`` (bf16 autocast, CUDA only).
        gradient_checkpointing: recompute block activations in backward (saves memory).
        seed: seeds the worker's data sampler; same seed -> same batches.
        grad_clip: max global gradient norm (``None`` or 0 disables clipping).
    """

    steps: int = 24
    lr: float = 3e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    batch_size: int = 64
    device: str = "cpu"
    dtype: str = "fp32"
    gradient_checkpointing: bool = False
    seed: int = 0
    grad_clip: float | None = 1.0

    def __post_init__(self) -> None:
        if self.steps <= 0 or self.batch_size <= 0:
            raise ConfigError(f"steps and batch_size must be positive, got {self.steps}, {self.batch_size}")
        if self.dtype not in ("fp32", "bf16"):
            raise ConfigError(f"InnerConfig.dtype must be 'fp32' or 'bf16', got {self.dtype!r}")
        if self.dtype == "bf16" and not self.device.startswith("cuda"):
            raise ConfigError("bf16 autocast is for CUDA; use dtype='fp32' on the CPU")
        if self.lr <= 0:
            raise ConfigError(f"InnerConfig.lr must be positive, got {self.lr}")


@dataclass(frozen=True)
class OuterConfig:
    """The outer optimizer: SGD with Nesterov momentum on the aggregated pseudo-gradient
    (Douillard et al. 2023, Sec. 2: lr 0.7, momentum 0.9 worked best)."""

    lr: float = 0.7
    momentum: float = 0.9
    nesterov: bool = True

    def __post_init__(self) -> None:
        if self.lr <= 0 or not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"outer lr must be > 0 and momentum in [0, 1), got {self.lr}, {self.momentum}")
        if self.nesterov and self.momentum == 0:
            raise ConfigError("outer Nesterov momentum needs momentum > 0; set nesterov=False for plain SGD")


ROBUST_DEFAULTS: dict = {
    "rule": "TrimmedMean",
    "rule_params": {"alpha_bps": 2500},
    "norm_multiple": 10.0,
    "scoring": True,
}
"""The defence a new task spec gets unless its sponsor chooses another (``tenzro train new-spec``):
the aggregation rule and its parameters, the norm screen (a payload's L2 norm at most this multiple
of the round's median is kept) and loss-improvement scoring on the trainer's own shard (which
needs the root flow). Chosen by ``trainer/benchmarks/attacks.py``: the rows of
``trainer/benchmarks/results/attacks.md`` are the evidence."""

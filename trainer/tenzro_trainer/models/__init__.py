"""Model catalog keyed by the task spec's ``architecture.family``.

- ``"timesfm"``: :class:`~tenzro_trainer.models.timesfm.TimesFMModel` (Das et al. 2024, arXiv:2310.10688)
- ``"ttm"``: :class:`~tenzro_trainer.models.ttm.TTMModel` (Ekambaram et al. 2024, arXiv:2401.03955)
- ``"chronos_bolt"``: :class:`~tenzro_trainer.models.chronos_bolt.ChronosBoltModel` (Ansari et al. 2024,
  arXiv:2403.07815; the patch-based Chronos-Bolt)

Every model is a pure ``nn.Module`` built from a :class:`~tenzro_trainer.config.ModelConfig`.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.errors import ConfigError
from tenzro_trainer.models.chronos_bolt import ChronosBoltModel
from tenzro_trainer.models.common import PatchForecaster, context_stats, normalize_window
from tenzro_trainer.models.timesfm import TimesFMModel
from tenzro_trainer.models.ttm import TTMModel

CATALOG: dict[str, Callable[[ModelConfig], PatchForecaster]] = {
    "timesfm": TimesFMModel,
    "ttm": TTMModel,
    "chronos_bolt": ChronosBoltModel,
}


def build_model(cfg: ModelConfig) -> PatchForecaster:
    """Instantiate the model of ``cfg.family`` (fp32 parameters on the current default device).

    Raises:
        ConfigError: the family is not in :data:`CATALOG`.
    """
    try:
        factory = CATALOG[cfg.family]
    except KeyError:
        raise ConfigError(f"no model for family {cfg.family!r}; catalog: {sorted(CATALOG)}") from None
    return factory(cfg)


def count_parameters(cfg: ModelConfig) -> int:
    """Number of trainable parameters of ``cfg``'s model, computed on the meta device
    (allocates no memory, so it works for the 200M reference configuration)."""
    with torch.device("meta"):
        model = build_model(cfg)
    return sum(p.numel() for p in model.parameters())


__all__ = [
    "CATALOG",
    "ChronosBoltModel",
    "PatchForecaster",
    "TimesFMModel",
    "TTMModel",
    "build_model",
    "context_stats",
    "count_parameters",
    "normalize_window",
]

"""Pieces shared by the model families: per-window normalization, residual MLP, the base class.

Per-input normalization (EVALUATION.md): every window is normalized by the mean and standard
deviation of its own context (the RevIN idea, Kim et al. 2022, ICLR; TimesFM normalizes by its
first patch), so that trending series that end outside their training range are still in range.
The standard deviation is floored at ``STD_FLOOR`` in the per-series-scaled units of
:mod:`tenzro_trainer.data.windows` (each series is first scaled by its training mean/std), so a
flat context (a week without rain) does not blow the targets up.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

STD_FLOOR = 0.1


def context_stats(context: Tensor, floor: float = STD_FLOOR) -> tuple[Tensor, Tensor]:
    """Mean and floored std of each context.

    Args:
        context: (B, L) float.
    Returns:
        (mu, sigma), each (B, 1) float, ``sigma >= floor``.
    """
    mu = context.mean(dim=1, keepdim=True)
    sigma = context.std(dim=1, keepdim=True, unbiased=False).clamp_min(floor)
    return mu, sigma


def normalize_window(window: Tensor, context_len: int, floor: float = STD_FLOOR) -> tuple[Tensor, Tensor, Tensor]:
    """Normalize whole windows (context + target) by their context's statistics.

    Args:
        window: (B, context_len + horizon) float.
    Returns:
        (z, mu, sigma): z (B, context_len + horizon), mu and sigma (B, 1).
    """
    mu, sigma = context_stats(window[:, :context_len], floor)
    return (window - mu) / sigma, mu, sigma


class ResidualMLP(nn.Module):
    """Residual MLP block of TimesFM's input/output layers (Das et al. 2024, Sec. 4):
    ``Linear(d_in, d_hidden) -> SiLU -> Linear(d_hidden, d_out)`` plus a linear skip."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int):
        super().__init__()
        self.hidden = nn.Linear(d_in, d_hidden)
        self.out = nn.Linear(d_hidden, d_out)
        self.skip = nn.Linear(d_in, d_out)

    def forward(self, x: Tensor) -> Tensor:  # (..., d_in) -> (..., d_out)
        return self.out(torch.nn.functional.silu(self.hidden(x))) + self.skip(x)


class PatchForecaster(nn.Module):
    """Base class: ``forward(z_context)`` maps normalized contexts (B, context_len) to forecasts
    (B, n_outputs, horizon) in normalized units; output ``i`` of ``n_outputs`` forecasts the
    ``horizon`` steps that follow input patch ``n_patches - n_outputs + i``.
    """

    n_outputs: int
    context_len: int
    horizon: int
    patch_len: int

    def training_targets(self, z: Tensor) -> Tensor:
        """Targets matching ``forward``'s outputs.

        Args:
            z: normalized windows (B, context_len + horizon).
        Returns:
            (B, n_outputs, horizon): for output i, the horizon steps after its last input patch.
        """
        # windows of length horizon starting after each input patch: starts p, 2p, ..., context_len
        starts = z[:, self.patch_len :].unfold(1, self.horizon, self.patch_len)  # (B, n_patches, h)
        return starts[:, -self.n_outputs :, :]

    def loss(self, window: Tensor) -> Tensor:
        """Mean squared error on per-window-normalized targets over all outputs.

        Args:
            window: (B, context_len + horizon) float, per-series-scaled values.
        Returns:
            scalar loss tensor.
        """
        z, _, _ = normalize_window(window, self.context_len)
        pred = self(z[:, : self.context_len])
        return torch.nn.functional.mse_loss(pred.float(), self.training_targets(z).float())

    @torch.no_grad()
    def forecast(self, context: Tensor) -> Tensor:
        """Point forecast in the input's units.

        Args:
            context: (B, context_len) float.
        Returns:
            (B, horizon) float32.
        """
        mu, sigma = context_stats(context)
        z = (context - mu) / sigma
        return self(z)[:, -1, :].float() * sigma + mu

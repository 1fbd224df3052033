"""Pieces shared by the model families: per-window normalization, residual MLP, the base class.

Per-input normalization (EVALUATION.md): every window is normalized by the mean and standard
deviation of its own context (the RevIN idea, Kim et al. 2022, ICLR; TimesFM normalizes by its
first patch), so that trending series that end outside their training range are still in range.
The standard deviation is floored at ``STD_FLOOR`` in the per-series-scaled units of
:mod:`tenzro_trainer.data.windows` (each series is first scaled by its training mean/std), so a
flat context (a week without rain) does not blow the targets up.

Masked models (``ModelConfig.masked``) take NaN as "missing": left padding of histories shorter
than the context, or gaps. Their statistics skip missing points, their patch embeddings see the
values (NaN replaced by 0) concatenated with the observed-mask (Chronos-Bolt's input, Ansari et al.
2024), and their loss skips missing targets. Quantile models (``ModelConfig.quantiles``) output
``n_quantiles`` forecasts per step and train with the quantile (pinball) loss averaged over levels
(TimesFM-2 / Chronos-Bolt); their point forecast is the 0.5 quantile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from tenzro_trainer.config import ModelConfig

STD_FLOOR = 0.1


def context_stats(context: Tensor, floor: float = STD_FLOOR, masked: bool = False) -> tuple[Tensor, Tensor]:
    """Mean and floored std of each context.

    Args:
        context: (B, L) float; with ``masked``, NaN entries are missing and skipped (a context
            with no observed point gets mu 0, sigma ``floor``).
    Returns:
        (mu, sigma), each (B, 1) float, ``sigma >= floor``.
    """
    if masked:
        obs = ~torch.isnan(context)
        n = obs.sum(dim=1, keepdim=True).clamp_min(1)
        x = torch.where(obs, context, torch.zeros_like(context))
        mu = x.sum(dim=1, keepdim=True) / n
        var = (torch.where(obs, context - mu, torch.zeros_like(context)) ** 2).sum(dim=1, keepdim=True) / n
        return mu, var.sqrt().clamp_min(floor)
    mu = context.mean(dim=1, keepdim=True)
    sigma = context.std(dim=1, keepdim=True, unbiased=False).clamp_min(floor)
    return mu, sigma


def normalize_window(window: Tensor, context_len: int, floor: float = STD_FLOOR,
                     masked: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """Normalize whole windows (context + target) by their context's statistics.

    Args:
        window: (B, context_len + horizon) float (NaN = missing when ``masked``; stays NaN).
    Returns:
        (z, mu, sigma): z (B, context_len + horizon), mu and sigma (B, 1).
    """
    mu, sigma = context_stats(window[:, :context_len], floor, masked)
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


def patch_inputs(z: Tensor, patch_len: int, masked: bool) -> Tensor:
    """Cut normalized contexts into patches: (B, L) -> (B, N, p), or (B, N, 2p) = [values, mask]
    with NaN replaced by 0 when ``masked``."""
    B = z.shape[0]
    if not masked:
        return z.reshape(B, -1, patch_len)
    obs = ~torch.isnan(z)
    vals = torch.where(obs, z, torch.zeros_like(z))
    return torch.cat([vals.reshape(B, -1, patch_len), obs.to(z.dtype).reshape(B, -1, patch_len)], dim=-1)


def quantile_loss(pred: Tensor, target: Tensor, quantiles: Tensor) -> Tensor:
    """Mean pinball loss over quantile levels and observed (non-NaN) targets.

    Args:
        pred: (..., n_q, h); target: (..., h), NaN = missing; quantiles: (n_q,).
    Returns:
        scalar: ``mean over observed (..., h) of mean_q max(q d, (q - 1) d)``, ``d = target - pred``.
    """
    obs = ~torch.isnan(target)
    d = torch.where(obs, target, torch.zeros_like(target)).unsqueeze(-2) - pred  # (..., n_q, h)
    q = quantiles.view(-1, 1)
    loss = torch.maximum(q * d, (q - 1) * d).mean(dim=-2)  # (..., h)
    return (loss * obs).sum() / obs.sum().clamp_min(1)


class PatchForecaster(nn.Module):
    """Base class: ``forward(z_context)`` maps normalized contexts (B, context_len) to forecasts
    (B, n_outputs, horizon) in normalized units, or (B, n_outputs, n_quantiles, horizon) for a
    quantile head; output ``i`` of ``n_outputs`` forecasts the ``horizon`` steps that follow input
    patch ``n_patches - n_outputs + i``.
    """

    n_outputs: int
    context_len: int
    horizon: int
    patch_len: int
    cfg: "ModelConfig"

    @property
    def masked(self) -> bool:
        return self.cfg.masked

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        """The head's quantile levels (empty for a point head)."""
        return self.cfg.quantiles

    def _head_shape(self, out: Tensor) -> Tensor:
        """(B, N, n_q * h) -> (B, N, n_q, h) for quantile heads; point heads unchanged."""
        if not self.cfg.quantiles:
            return out
        return out.unflatten(-1, (len(self.cfg.quantiles), self.horizon))

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
        """Training loss on per-window-normalized targets over all outputs: MSE for a point head,
        the quantile loss for a quantile head; missing (NaN) targets are skipped when ``masked``.

        Args:
            window: (B, context_len + horizon) float, per-series-scaled values.
        Returns:
            scalar loss tensor.
        """
        z, _, _ = normalize_window(window, self.context_len, masked=self.masked)
        pred = self(z[:, : self.context_len])
        target = self.training_targets(z).float()
        if self.cfg.quantiles:
            levels = torch.tensor(self.cfg.quantiles, device=pred.device)
            return quantile_loss(pred.float(), target, levels)
        if self.masked:
            obs = ~torch.isnan(target)
            err = torch.where(obs, pred.float() - target, torch.zeros_like(target))
            return (err**2).sum() / obs.sum().clamp_min(1)
        return torch.nn.functional.mse_loss(pred.float(), target)

    @torch.no_grad()
    def forecast_quantiles(self, context: Tensor) -> Tensor:
        """Quantile forecasts in the input's units (sorted along the quantile axis, so they never cross).

        Args:
            context: (B, context_len) float (NaN = missing when ``masked``).
        Returns:
            (B, n_quantiles, horizon) float32; n_quantiles = 1 for a point head.
        """
        mu, sigma = context_stats(context, masked=self.masked)
        out = self((context - mu) / sigma)[:, -1].float()
        if not self.cfg.quantiles:
            return (out * sigma + mu).unsqueeze(1)
        return out.sort(dim=1).values * sigma.unsqueeze(1) + mu.unsqueeze(1)

    @torch.no_grad()
    def forecast(self, context: Tensor) -> Tensor:
        """Point forecast in the input's units (the 0.5 quantile of a quantile head).

        Args:
            context: (B, context_len) float.
        Returns:
            (B, horizon) float32.
        """
        if self.cfg.quantiles:
            return self.forecast_quantiles(context)[:, self.cfg.quantiles.index(0.5)]
        mu, sigma = context_stats(context)
        z = (context - mu) / sigma
        return self(z)[:, -1, :].float() * sigma + mu

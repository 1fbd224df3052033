"""Granite-TTM-class patch mixer (Ekambaram et al. 2024, "Tiny Time Mixers (TTMs)",
arXiv:2401.03955; its backbone is TSMixer, Ekambaram et al. 2023, KDD).

Patches are embedded linearly; ``n_layers`` mixer blocks alternate an MLP across patches
(time mixing) and an MLP across features (feature mixing), each pre-norm and residual; a linear
head maps the flattened tokens to the ``horizon`` (``n_quantiles x horizon`` with a quantile
head). Univariate (channel-independent), one output. With ``cfg.masked`` each patch carries its
observed-mask.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.models.common import PatchForecaster, patch_inputs


class MixerBlock(nn.Module):
    def __init__(self, n_patches: int, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.ln_t = nn.LayerNorm(d_model)
        self.time_mlp = nn.Sequential(
            nn.Linear(n_patches, 2 * n_patches), nn.GELU(), nn.Linear(2 * n_patches, n_patches), nn.Dropout(dropout)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.feat_mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model), nn.Dropout(dropout))

    def forward(self, x: Tensor) -> Tensor:  # (B, N, C)
        x = x + self.time_mlp(self.ln_t(x).transpose(1, 2)).transpose(1, 2)
        return x + self.feat_mlp(self.ln_f(x))


class TTMModel(PatchForecaster):
    """Patch mixer; ``forward(z)``: (B, context_len) -> (B, 1, horizon), or (B, 1, n_quantiles, horizon)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.context_len, self.horizon, self.patch_len = cfg.context_len, cfg.horizon, cfg.patch_len
        self.n_outputs = 1
        self.gradient_checkpointing = False
        self.embed = nn.Linear(cfg.patch_len * (2 if cfg.masked else 1), cfg.d_model)
        self.blocks = nn.ModuleList(
            MixerBlock(cfg.n_patches, cfg.d_model, cfg.d_ff, cfg.dropout) for _ in range(cfg.n_layers)
        )
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.n_patches * cfg.d_model, cfg.horizon * len(cfg.quantiles or (0,)))

    def forward(self, z: Tensor) -> Tensor:
        x = self.embed(patch_inputs(z, self.patch_len, self.cfg.masked))  # (B, N, C)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self._head_shape(self.head(self.ln(x).flatten(1)).unsqueeze(1))  # (B, 1, h) or (B, 1, n_q, h)

"""TimesFM-class decoder-only patch transformer (Das et al. 2024, "A decoder-only foundation
model for time-series forecasting", arXiv:2310.10688, Sec. 4).

Input patches go through a residual MLP to tokens, get a learned position embedding, pass
``n_layers`` pre-norm causal self-attention blocks, and each output token maps through a
residual MLP to a forecast of the next ``horizon`` steps (the output patch). Training uses every
token's forecast (decoder-only, as in the paper); inference reads the last one. With
``cfg.quantiles`` the output MLP emits ``n_quantiles x horizon`` values per token (TimesFM-2's
quantile head); with ``cfg.masked`` each input patch carries its observed-mask (TimesFM's
padding mask).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.models.common import PatchForecaster, ResidualMLP, patch_inputs


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention, causal unless ``causal=False`` (Chronos-Bolt's encoder)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, causal: bool = True):
        super().__init__()
        self.n_heads = n_heads
        self.causal = causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape  # (B, T, C)
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=self.causal, dropout_p=self.dropout if self.training else 0.0
        )
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Pre-norm transformer block: self-attention then MLP, both residual."""

    def __init__(self, cfg: ModelConfig, causal: bool = True):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg.d_model, cfg.n_heads, cfg.dropout, causal)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model), nn.Dropout(cfg.dropout)
        )

    def forward(self, x: Tensor) -> Tensor:  # (B, T, C)
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TimesFMModel(PatchForecaster):
    """Decoder-only patch transformer; ``forward(z)``: (B, context_len) -> (B, n_patches, horizon),
    or (B, n_patches, n_quantiles, horizon) with a quantile head."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.context_len, self.horizon, self.patch_len = cfg.context_len, cfg.horizon, cfg.patch_len
        self.n_outputs = cfg.n_patches
        self.gradient_checkpointing = False
        self.input_mlp = ResidualMLP(cfg.patch_len * (2 if cfg.masked else 1), cfg.d_ff, cfg.d_model)
        self.pos = nn.Parameter(torch.zeros(1, cfg.n_patches, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.output_mlp = ResidualMLP(cfg.d_model, cfg.d_ff, cfg.horizon * len(cfg.quantiles or (0,)))
        self.apply(_init_weights)
        nn.init.normal_(self.pos, std=0.02)

    def forward(self, z: Tensor) -> Tensor:
        patches = patch_inputs(z, self.patch_len, self.cfg.masked)  # (B, N, p) or (B, N, 2p)
        x = self.input_mlp(patches) + self.pos  # (B, N, C)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self._head_shape(self.output_mlp(self.ln_f(x)))  # (B, N, h) or (B, N, n_q, h)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)

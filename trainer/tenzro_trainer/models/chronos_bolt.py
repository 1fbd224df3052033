"""Chronos-Bolt-class patch encoder-decoder with a direct multi-quantile head (Ansari et al. 2024,
"Chronos: Learning the Language of Time Series", arXiv:2403.07815; Chronos-Bolt, Amazon 2024:
the T5 encoder-decoder of Chronos fed with patches instead of tokens).

- Input: normalized context (RevIN-style, :mod:`tenzro_trainer.models.common`) cut into patches;
  each patch is concatenated with its observed-mask and embedded by a residual MLP.
- Encoder: ``n_layers`` pre-norm *bidirectional* transformer blocks over the patch tokens plus a
  learned ``[REG]`` token appended at the end (as in Chronos-Bolt), with learned positions.
- Decoder: ``max(1, n_layers // 2)`` blocks of cross-attention (one learned query token attending
  to the encoder outputs) and MLP, pre-norm and residual.
- Head: a residual MLP from the query token to ``n_quantiles x horizon`` values (direct
  multi-step quantile forecast; no autoregressive decoding inside one horizon).

Differences from the published model: learned absolute positions instead of T5's relative
attention bias, LayerNorm instead of RMSNorm, one query token per forecast instead of T5's decoder
start token; sizes are the catalog's presets. ``forward(z)``: (B, context_len) -> (B, 1, n_q, h).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.models.common import PatchForecaster, ResidualMLP, patch_inputs
from tenzro_trainer.models.timesfm import Block, _init_weights


class CrossAttention(nn.Module):
    """Multi-head attention of query tokens (B, Tq, C) over memory tokens (B, Tm, C)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, memory: Tensor) -> Tensor:
        B, Tq, C = x.shape
        Tm, hs = memory.shape[1], C // self.n_heads
        q = self.q(x).view(B, Tq, self.n_heads, hs).transpose(1, 2)  # (B, nh, Tq, hs)
        k, v = (t.view(B, Tm, self.n_heads, hs).transpose(1, 2) for t in self.kv(memory).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, Tq, C))


class DecoderBlock(nn.Module):
    """Pre-norm cross-attention then MLP, both residual (a single query token needs no self-attention)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.ln_mem = nn.LayerNorm(cfg.d_model)
        self.cross = CrossAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model), nn.Dropout(cfg.dropout)
        )

    def forward(self, x: Tensor, memory: Tensor) -> Tensor:  # (B, 1, C), (B, T, C)
        x = x + self.cross(self.ln1(x), self.ln_mem(memory))
        return x + self.mlp(self.ln2(x))


class ChronosBoltModel(PatchForecaster):
    """Patch encoder-decoder with a direct quantile head; ``forward(z)``: (B, context_len) -> (B, 1, n_q, h)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.context_len, self.horizon, self.patch_len = cfg.context_len, cfg.horizon, cfg.patch_len
        self.n_outputs = 1
        self.gradient_checkpointing = False
        self.input_mlp = ResidualMLP(cfg.patch_len * (2 if cfg.masked else 1), cfg.d_ff, cfg.d_model)
        self.reg = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.pos = nn.Parameter(torch.zeros(1, cfg.n_patches + 1, cfg.d_model))
        self.encoder = nn.ModuleList(Block(cfg, causal=False) for _ in range(cfg.n_layers))
        self.ln_enc = nn.LayerNorm(cfg.d_model)
        self.query = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.decoder = nn.ModuleList(DecoderBlock(cfg) for _ in range(max(1, cfg.n_layers // 2)))
        self.ln_dec = nn.LayerNorm(cfg.d_model)
        self.output_mlp = ResidualMLP(cfg.d_model, cfg.d_ff, cfg.horizon * cfg.n_quantiles)
        self.apply(_init_weights)
        for p in (self.reg, self.pos, self.query):
            nn.init.normal_(p, std=0.02)

    def _run(self, block: nn.Module, *args: Tensor) -> Tensor:
        if self.gradient_checkpointing and self.training:
            return checkpoint(block, *args, use_reentrant=False)
        return block(*args)

    def forward(self, z: Tensor) -> Tensor:
        B = z.shape[0]
        tokens = self.input_mlp(patch_inputs(z, self.patch_len, self.cfg.masked))  # (B, N, C)
        x = torch.cat([tokens, self.reg.expand(B, -1, -1)], dim=1) + self.pos  # (B, N+1, C)
        for block in self.encoder:
            x = self._run(block, x)
        memory = self.ln_enc(x)
        q = self.query.expand(B, -1, -1)  # (B, 1, C)
        for block in self.decoder:
            q = self._run(block, q, memory)
        return self._head_shape(self.output_mlp(self.ln_dec(q)))  # (B, 1, n_q, h)

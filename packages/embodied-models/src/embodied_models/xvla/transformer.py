"""X-VLA's soft-prompted transformer: domain-aware action layers, pre-LN blocks and per-domain soft prompts.

Port of lerobot ``policies/xvla/soft_transformer.py`` (X-VLA's ``SoftPromptedTransformer``). The sequence is
``[action tokens | VLM tokens | auxiliary-view tokens] + pos_emb`` followed by the domain's soft prompts (no
position embedding); full attention without a mask; only the first T positions are decoded. Parameter names
follow the reference, so lerobot and X-VLA checkpoints load with the identity map.

Shapes: B batch, T action horizon, S sequence, W hidden width, D action width, P state width.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["DomainAwareLinear", "SoftPromptedTransformer", "XvlaBlock", "timestep_embedding"]


def timestep_embedding(t: torch.Tensor, dim: int, *, max_period: float) -> torch.Tensor:
    """``[cos(t f_k) | sin(t f_k)]`` with ``f_k = max_period^(-k / half)`` (cos half first), zero-padded to ``dim``."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=t.dtype, device=t.device) / half)
    args = t[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class DomainAwareLinear(nn.Module):
    """A linear layer with one weight and bias per domain: ``y = x @ W[d] + b[d]``.

    ``fc.weight`` row d holds W[d] flattened **[in, out]** (in-major), transposed relative to ``nn.Linear``;
    ``bias.weight`` row d holds b[d]. Stored as embeddings so each sample gathers its own domain's weights.
    """

    def __init__(self, in_features: int, out_features: int, num_domains: int) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.fc = nn.Embedding(num_domains, in_features * out_features)
        self.bias = nn.Embedding(num_domains, out_features)
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.bias.weight)

    def forward(self, x: torch.Tensor, domain_id: torch.Tensor) -> torch.Tensor:
        """``x`` [B, S, in] (or [B, in]) with one domain id per sample -> [B, S, out] (or [B, out])."""
        squeeze = x.ndim == 2
        if squeeze:
            x = x[:, None]
        b = domain_id.shape[0]
        weight = self.fc(domain_id).view(b, self.in_features, self.out_features)
        y = torch.matmul(x, weight) + self.bias(domain_id).view(b, 1, self.out_features)
        return y[:, 0] if squeeze else y


class _Attention(nn.Module):
    def __init__(self, width: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = width // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, w = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        return self.proj(out.transpose(1, 2).reshape(b, s, w))


class _Mlp(nn.Module):
    def __init__(self, width: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc2(self.dropout(F.gelu(self.fc1(x), approximate="tanh"))))


class XvlaBlock(nn.Module):
    """Pre-LN block: ``x += proj(MHSA(LN1 x))``, ``x += fc2(tanh-GELU(fc1(LN2 x)))`` (dropout in training)."""

    def __init__(self, width: int, num_heads: int, mlp_ratio: float, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = _Attention(width, num_heads, dropout)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = _Mlp(width, int(width * mlp_ratio), dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def _xavier(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        nn.init.zeros_(module.bias)


class SoftPromptedTransformer(nn.Module):
    """The action head of X-VLA.

    Args:
        width, depth, num_heads, mlp_ratio, dropout: block sizes.
        vlm_width: width of the VLM / auxiliary-view tokens (Florence-2's projection_dim).
        num_domains: domain slots (soft prompts and action layers per domain).
        dim_action, dim_proprio, dim_time: widths of the three parts of an action token.
        len_soft_prompts: soft-prompt tokens per domain (0: none).
        max_len_seq: learned positions (action + VLM + auxiliary tokens).
        time_max_period: the time embedding's longest period.
        hetero_proj: per-domain projections of the VLM and auxiliary tokens.
        gradient_checkpointing: recompute each block in backward.
    """

    def __init__(self, *, width: int, depth: int, num_heads: int, mlp_ratio: float, dropout: float, vlm_width: int,
                 num_domains: int, dim_action: int, dim_proprio: int, dim_time: int, len_soft_prompts: int,
                 max_len_seq: int, time_max_period: float, hetero_proj: bool = False,
                 gradient_checkpointing: bool = False) -> None:
        super().__init__()
        self.width = width
        self.dim_time = dim_time
        self.len_soft_prompts = len_soft_prompts
        self.time_max_period = time_max_period
        self.hetero_proj = hetero_proj
        self.gradient_checkpointing = gradient_checkpointing
        self.blocks = nn.ModuleList(XvlaBlock(width, num_heads, mlp_ratio, dropout) for _ in range(depth))
        proj = (lambda: DomainAwareLinear(vlm_width, width, num_domains)) if hetero_proj else (
            lambda: nn.Linear(vlm_width, width))
        self.vlm_proj = proj()
        self.aux_visual_proj = proj()
        self.pos_emb = nn.Parameter(torch.zeros(1, max_len_seq, width))
        self.norm = nn.LayerNorm(width)
        self.action_encoder = DomainAwareLinear(dim_action + dim_time + dim_proprio, width, num_domains)
        self.action_decoder = DomainAwareLinear(width, dim_action, num_domains)
        if len_soft_prompts > 0:
            self.soft_prompt_hub = nn.Embedding(num_domains, len_soft_prompts * width)
        self.apply(_xavier)
        nn.init.normal_(self.pos_emb, std=0.02)
        if len_soft_prompts > 0:
            nn.init.normal_(self.soft_prompt_hub.weight, std=0.02)

    def _project(self, module: nn.Module, x: torch.Tensor, domain_id: torch.Tensor) -> torch.Tensor:
        return module(x, domain_id) if self.hetero_proj else module(x)

    def embed(self, *, domain_id: torch.Tensor, vlm_features: torch.Tensor, aux_visual_inputs: torch.Tensor,
              x_t: torch.Tensor, proprio: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The sequence entering block 0 [B, T + S_vlm + S_aux + soft prompts, W]."""
        b, horizon = x_t.shape[:2]
        time = timestep_embedding(t, self.dim_time, max_period=self.time_max_period)
        tokens = torch.cat([x_t, proprio[:, None].expand(b, horizon, -1), time[:, None].expand(b, horizon, -1)],
                           dim=-1)
        x = torch.cat([self.action_encoder(tokens, domain_id),
                       self._project(self.vlm_proj, vlm_features, domain_id),
                       self._project(self.aux_visual_proj, aux_visual_inputs, domain_id)], dim=1)
        if x.shape[1] > self.pos_emb.shape[1]:
            raise ValueError(f"X-VLA sequence of {x.shape[1]} tokens exceeds model.max_len_seq {self.pos_emb.shape[1]}")
        x = x + self.pos_emb[:, : x.shape[1]]
        if self.len_soft_prompts > 0:
            prompts = self.soft_prompt_hub(domain_id).view(b, self.len_soft_prompts, self.width)
            x = torch.cat([x, prompts.to(x.dtype)], dim=1)
        return x

    def forward(self, *, domain_id: torch.Tensor, vlm_features: torch.Tensor, aux_visual_inputs: torch.Tensor,
                x_t: torch.Tensor, proprio: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The clean-action prediction [B, T, D] for noisy actions ``x_t`` [B, T, D] at flow times ``t`` [B], with
        the (preprocessed) state ``proprio`` [B, P], the VLM tokens and the auxiliary-view tokens."""
        x = self.embed(domain_id=domain_id, vlm_features=vlm_features, aux_visual_inputs=aux_visual_inputs, x_t=x_t,
                       proprio=proprio, t=t)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.action_decoder(self.norm(x[:, : x_t.shape[1]]), domain_id)

"""pi0.5 attention pattern and kernel: block-causal masks over [images | language | actions].

Conventions follow big_vision / openpi ``make_attn_mask``: every token has a validity flag and an
"autoregressive" flag; ``ar = 1`` starts a new block. Query q may attend to key k when
``cumsum(ar)[k] <= cumsum(ar)[q]`` and both are valid. pi0.5 uses ar = 0 for the whole prefix and for the
actions after the first, so the prefix is bidirectional and never sees actions, and the actions see the
valid prefix and each other.

Shape legend: B batch, Q queries, K keys (also K key/value heads where a tensor is [B, K, L, D]),
N query heads, L tokens, D head_dim.
"""
# ruff: noqa: N803 - shape-suffixed tensor names (x_BSW) follow the legend above


from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.models.gemma.modeling_gemma import repeat_kv

from embodied_models.vla.masks import block_mask, position_ids  # the block-causal rule pi05 shares with smolvla

__all__ = ["MASK_VALUE", "attend", "attention_bias", "block_mask", "position_ids"]

MASK_VALUE = -2.3819763e38
"""Additive bias of a masked pair (openpi's value): finite, so a fully masked (padded) query row still
gives finite numbers instead of NaN, and it never reaches a valid output."""


def attention_bias(allowed_BQK: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Boolean pattern [B, Q, K] -> additive bias [B, 1, Q, K] (0 where allowed, MASK_VALUE elsewhere)."""
    zero = torch.zeros((), dtype=dtype, device=allowed_BQK.device)
    masked = torch.full((), MASK_VALUE, dtype=dtype, device=allowed_BQK.device)
    return torch.where(allowed_BQK[:, None], zero, masked)


def attend(q_BNQD: torch.Tensor, k_BKLD: torch.Tensor, v_BKLD: torch.Tensor, bias_B1QL: torch.Tensor, *,
           scaling: float, implementation: str = "eager") -> torch.Tensor:
    """Grouped-query attention with an additive bias; returns [B, Q, N, D].

    ``eager`` reproduces the reference op order (transformers' Gemma eager path: scaled scores + bias,
    float32 softmax, cast back); ``sdpa`` uses torch's fused kernel with the same bias.
    """
    groups = q_BNQD.shape[1] // k_BKLD.shape[1]
    if implementation == "sdpa":
        bias = bias_B1QL.to(q_BNQD.dtype)
        out = F.scaled_dot_product_attention(q_BNQD, k_BKLD, v_BKLD, attn_mask=bias, scale=scaling,
                                             enable_gqa=groups > 1)
        return out.transpose(1, 2)
    if implementation != "eager":
        raise ValueError(f"attention implementation must be 'eager' or 'sdpa' (got {implementation!r})")
    k = repeat_kv(k_BKLD, groups)
    v = repeat_kv(v_BKLD, groups)
    scores = torch.matmul(q_BNQD, k.transpose(2, 3)) * scaling + bias_B1QL
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q_BNQD.dtype)
    return torch.matmul(probs, v).transpose(1, 2)

"""Attention of the Wan family: mask-aware SDPA / flex dispatch and qk RMSNorm over the full attention width.

- :func:`attention` runs one scaled dot-product attention (scale head_dim**-0.5) under an explicit mask: None
  (full), a boolean tensor (True = attend) for SDPA, or a flex-attention ``BlockMask``.
- :class:`WanRMSNorm` is Wan's q/k norm: over the *whole* attention width (all heads together), computed in
  float32, with a learned weight.
- :class:`GridRopeAttnProcessor` plugs the two (and :mod:`.rope`) into diffusers' ``WanAttention``.

Legend: B batch, L tokens, H heads, K head_dim.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional

from embodied_models.wan.rope import apply_rope

__all__ = ["GridRopeAttnProcessor", "WanRMSNorm", "attention"]

_compiled_flex: Any = None


def _flex_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: Any) -> torch.Tensor:
    # Compiled once per process: eager flex attention materializes the full score matrix and is slow.
    global _compiled_flex
    if _compiled_flex is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex(q, k, v, block_mask=block_mask)


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              mask: torch.Tensor | Any | None) -> torch.Tensor:
    """Scaled dot-product attention of q [B, Lq, H, K] over k, v [B, Lk, H, K] with scale K**-0.5; [B, Lq, H*K].

    ``mask`` is None (full attention), a boolean tensor broadcastable to [B, H, Lq, Lk] (True = attend), or
    a flex-attention ``BlockMask``.
    """
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [B, L, H, K] -> [B, H, L, K]
    if mask is not None and not isinstance(mask, torch.Tensor):
        out = _flex_attention(q, k, v, mask)
    else:
        out = functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).flatten(2)


class WanRMSNorm(nn.Module):
    """``x * rsqrt(mean(x^2) + eps) * weight`` over the last dim (the full attention width), in float32.

    Args:
        dim: normalized width (heads * head_dim for Wan's q/k norm).
        eps: epsilon inside the root.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., dim] -> normalized x in x's dtype."""
        h = x.float()
        h = h * torch.rsqrt(h.square().mean(dim=-1, keepdim=True) + self.eps)
        return (h * self.weight.float()).type_as(x)

    def reset_parameters(self) -> None:
        """Weight 1 (what building does; used by ``--init-on-meta``)."""
        nn.init.ones_(self.weight)


class GridRopeAttnProcessor:
    """Attention processor for diffusers' ``WanAttention``: qk RMSNorm over the full width, grid RoPE, mask.

    ``attention_mask`` may also be a KV cache (an object with ``attend(layer, q, k, v)``); ``layer_index`` (set by
    the owning transformer) tells it which block's cache to use.
    """

    layer_index: int = 0

    def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor | None = None,
                 attention_mask: Any = None, rotary_emb: torch.Tensor | None = None) -> torch.Tensor:
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        query = attn.norm_q(attn.to_q(hidden_states)).unflatten(2, (attn.heads, -1))
        key = attn.norm_k(attn.to_k(context)).unflatten(2, (attn.heads, -1))
        value = attn.to_v(context).unflatten(2, (attn.heads, -1))
        if rotary_emb is not None:
            query = apply_rope(query, rotary_emb)
            key = apply_rope(key, rotary_emb)
        if hasattr(attention_mask, "attend"):  # duck-typed KV cache
            out = attention_mask.attend(self.layer_index, query, key, value).type_as(query)
        else:
            out = attention(query, key, value, attention_mask).type_as(query)
        return attn.to_out[1](attn.to_out[0](out))

"""Transformer block and attention of LingBot-VA, built on diffusers' Wan2.2 modules.

The parameters (and their names) are diffusers' ``WanTransformerBlock``/``WanAttention``, so Wan2.2 and
LingBot-VA checkpoints map key for key. What differs from diffusers is the computation we own:

- attention takes an explicit mask (a dense boolean ``[L, L]`` for SDPA, or a flex ``BlockMask``), which
  diffusers' block does not pass to its self-attention;
- RoPE angles come from explicit grid ids (see :mod:`.rope`), not from the latent grid's shape;
- modulation is per token (``timestep_proj`` [B, L, 6, D]) because every frame has its own timestep.

Legend: B batch, L tokens, T text tokens, D width, H heads, K head_dim.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.models.transformers.transformer_wan import WanAttention, WanTransformerBlock
from torch.nn import functional

from embodied_models.lingbot_va.rope import apply_rope

__all__ = ["LingBotAttnProcessor", "LingBotBlock", "attention"]

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
    """Scaled dot-product attention with scale K**-0.5; returns [B, L, H*K].

    ``mask`` is None (full attention), a boolean tensor broadcastable to [B, H, L, L] (True = attend), or
    a flex-attention ``BlockMask``.
    """
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [B, L, H, K] -> [B, H, L, K]
    if mask is not None and not isinstance(mask, torch.Tensor):
        out = _flex_attention(q, k, v, mask)
    else:
        out = functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).flatten(2)


class LingBotAttnProcessor:
    """Attention processor for diffusers' ``WanAttention``: qk RMSNorm over the full width, grid RoPE, mask.

    ``attention_mask`` may also be a KV cache (an object with ``attend(layer, q, k, v)``, see :mod:`.streaming`);
    ``layer_index`` (set by the transformer) tells it which block's cache to use.
    """

    layer_index: int = 0

    def __call__(self, attn: WanAttention, hidden_states: torch.Tensor,
                 encoder_hidden_states: torch.Tensor | None = None, attention_mask: Any = None,
                 rotary_emb: torch.Tensor | None = None) -> torch.Tensor:
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        query = attn.norm_q(attn.to_q(hidden_states)).unflatten(2, (attn.heads, -1))
        key = attn.norm_k(attn.to_k(context)).unflatten(2, (attn.heads, -1))
        value = attn.to_v(context).unflatten(2, (attn.heads, -1))
        if rotary_emb is not None:
            query = apply_rope(query, rotary_emb)
            key = apply_rope(key, rotary_emb)
        if hasattr(attention_mask, "attend"):  # duck-typed: streaming imports this module
            out = attention_mask.attend(self.layer_index, query, key, value).type_as(query)
        else:
            out = attention(query, key, value, attention_mask).type_as(query)
        return attn.to_out[1](attn.to_out[0](out))


class LingBotBlock(WanTransformerBlock):
    """One Wan2.2 block (self-attention, text cross-attention, FFN) with per-token adaLN modulation.

    Args:
        dim: model width D.
        ffn_dim: FFN hidden width.
        num_heads: attention heads.
        cross_attn_norm: LayerNorm with affine before the cross-attention.
        eps: norm epsilon.
    """

    def __init__(self, dim: int, ffn_dim: int, num_heads: int, *, cross_attn_norm: bool, eps: float) -> None:
        super().__init__(dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=cross_attn_norm,
                         eps=eps)
        self.attn1.set_processor(LingBotAttnProcessor())
        self.attn2.set_processor(LingBotAttnProcessor())

    def forward(self, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor, temb: torch.Tensor,
                rotary_emb: torch.Tensor, attention_mask: Any = None) -> torch.Tensor:
        """x [B, L, D], text [B, T, D], temb (timestep_proj) [B, L, 6, D], rope [B, L, 1, K/2] complex, mask."""
        x = hidden_states
        # Modulation in fp32 as diffusers and the reference do; order (shift, scale, gate) x (attn, ffn).
        mods = (self.scale_shift_table.unsqueeze(0) + temb.float()).unbind(dim=2)
        shift, scale, gate, c_shift, c_scale, c_gate = mods
        h = (self.norm1(x.float()) * (1 + scale) + shift).type_as(x)
        x = (x.float() + self.attn1(h, None, attention_mask, rotary_emb) * gate).type_as(x)
        h = self.norm2(x.float()).type_as(x)
        x = x + self.attn2(h, encoder_hidden_states, None, None)
        h = (self.norm3(x.float()) * (1 + c_scale) + c_shift).type_as(x)
        return (x.float() + self.ffn(h).float() * c_gate).type_as(x)

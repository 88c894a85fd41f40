"""Transformer block and attention of LingBot-VA, built on diffusers' Wan2.2 modules.

The parameters (and their names) are diffusers' ``WanTransformerBlock``/``WanAttention``, so Wan2.2 and
LingBot-VA checkpoints map key for key. What differs from diffusers is the computation we own:

- attention (:mod:`embodied_models.wan.attention`) takes an explicit mask (a dense boolean ``[L, L]`` for SDPA,
  or a flex ``BlockMask``), which diffusers' block does not pass to its self-attention;
- RoPE angles come from explicit grid ids (see :mod:`.rope`, :mod:`embodied_models.wan.rope`), not from the
  latent grid's shape;
- modulation is per token (``timestep_proj`` [B, L, 6, D]) because every frame has its own timestep.

Legend: B batch, L tokens, T text tokens, D width, H heads, K head_dim.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.models.transformers.transformer_wan import WanTransformerBlock

from embodied_models.wan.attention import GridRopeAttnProcessor, attention
from embodied_models.wan.modulation import modulate, modulation_chunks

__all__ = ["LingBotAttnProcessor", "LingBotBlock", "attention"]

LingBotAttnProcessor = GridRopeAttnProcessor
"""The shared Wan processor (:class:`embodied_models.wan.attention.GridRopeAttnProcessor`) under its old name."""


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
        shift, scale, gate, c_shift, c_scale, c_gate = modulation_chunks(self.scale_shift_table, temb)
        h = modulate(self.norm1(x.float()), shift, scale).type_as(x)
        x = (x.float() + self.attn1(h, None, attention_mask, rotary_emb) * gate).type_as(x)
        h = self.norm2(x.float()).type_as(x)
        x = x + self.attn2(h, encoder_hidden_states, None, None)
        h = modulate(self.norm3(x.float()), c_shift, c_scale).type_as(x)
        return (x.float() + self.ffn(h).float() * c_gate).type_as(x)

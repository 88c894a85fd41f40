"""The transformer blocks of the GR00T action heads (N1.6 and N1.7): the AlternateVL DiT and N1.7's VL
self-attention stack.

Built on diffusers' ``Attention`` (SDPA, biases on q/k/v/out, a boolean key mask broadcast over heads and queries),
``FeedForward`` (tanh-GELU, width 4x), ``Timesteps`` and ``TimestepEmbedding``; the block loop, the alternating
masks and the modulation are written here. Parameter names follow lerobot 0.6.1's ``cross_attention_dit.py`` (N1.7)
and LoongForge's ``groot_n1_6/modules/dit.py`` (N1.6), which agree, so that checkpoints load through the identity
map.

Two modulation orders (both from the reference, easy to swap by mistake): a block's ``norm1`` chunks its
projection as ``(scale, shift)``, the output layer ``proj_out_1`` as ``(shift, scale)``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from diffusers.models.attention import FeedForward
from diffusers.models.attention_processor import Attention
from diffusers.models.embeddings import TimestepEmbedding, Timesteps
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["AdaLayerNorm", "AlternateVLDiT", "GrootBlock", "SelfAttentionStack", "TimestepEncoder", "block_kinds"]

TIME_CHANNELS = 256


class TimestepEncoder(nn.Module):
    """Discrete timestep bucket -> embedding: a 256-channel ``[cos | sin]`` sinusoid, then Linear-SiLU-Linear."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.time_proj = Timesteps(num_channels=TIME_CHANNELS, flip_sin_to_cos=True, downscale_freq_shift=1)
        self.timestep_embedder = TimestepEmbedding(in_channels=TIME_CHANNELS, time_embed_dim=width)

    def forward(self, buckets: torch.Tensor) -> torch.Tensor:
        """``buckets`` int64 [B] -> [B, width]."""
        proj = self.time_proj(buckets).to(self.timestep_embedder.linear_1.weight.dtype)
        return self.timestep_embedder(proj)


class AdaLayerNorm(nn.Module):
    """``LN(x) * (1 + scale) + shift`` with ``(scale, shift)`` (in that order) projected from SiLU(temb)."""

    def __init__(self, width: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.linear = nn.Linear(width, 2 * width)
        self.norm = nn.LayerNorm(width, eps=eps, elementwise_affine=False)

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        scale, shift = self.linear(F.silu(temb)).chunk(2, dim=1)
        return self.norm(x) * (1 + scale[:, None]) + shift[:, None]


class GrootBlock(nn.Module):
    """``h += attn(norm1(h))`` (self- or cross-attention, no gate), then ``h += FFN(norm3(h))``.

    Args:
        width: token width (heads x head_dim).
        num_heads, head_dim: attention layout.
        dropout: attention-output, FFN and final dropout probability.
        cross_attention_dim: width of the context for a cross-attention block; None: self-attention.
        time_conditioned: AdaLayerNorm on the timestep embedding and affine-free norm3 (DiT blocks); else affine
            LayerNorms (VL self-attention blocks).
    """

    def __init__(self, width: int, num_heads: int, head_dim: int, *, dropout: float,
                 cross_attention_dim: int | None = None, time_conditioned: bool) -> None:
        super().__init__()
        self.time_conditioned = time_conditioned
        self.norm1: nn.Module = AdaLayerNorm(width) if time_conditioned else nn.LayerNorm(width, eps=1e-5)
        self.attn1 = Attention(query_dim=width, heads=num_heads, dim_head=head_dim, dropout=dropout, bias=True,
                               cross_attention_dim=cross_attention_dim, out_bias=True)
        self.norm3 = nn.LayerNorm(width, eps=1e-5, elementwise_affine=not time_conditioned)
        self.ff = FeedForward(width, dropout=dropout, activation_fn="gelu-approximate", final_dropout=True)
        self.final_dropout = nn.Dropout(dropout)

    def forward(self, hidden: torch.Tensor, temb: torch.Tensor | None = None, context: torch.Tensor | None = None,
                context_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``hidden`` [B, T, W]; ``context`` [B, S, C] with boolean ``context_mask`` [B, S] (True: attend)."""
        normed = self.norm1(hidden, temb) if self.time_conditioned else self.norm1(hidden)
        attended = self.attn1(normed, encoder_hidden_states=context,
                              attention_mask=context_mask if context is not None else None)
        hidden = hidden + self.final_dropout(attended)
        return hidden + self.ff(self.norm3(hidden))


def block_kinds(num_layers: int, attend_text_every_n_blocks: int) -> list[str]:
    """``"self"`` for odd blocks; even blocks attend ``"text"`` when ``i % (2 n) == 0``, else ``"image"``."""
    return ["self" if i % 2 else ("text" if i % (2 * attend_text_every_n_blocks) == 0 else "image")
            for i in range(num_layers)]


def _run(block: nn.Module, use_checkpoint: bool, *args: Any) -> torch.Tensor:
    if use_checkpoint and torch.is_grad_enabled():
        return checkpoint(block, *args, use_reentrant=False)
    return block(*args)


class AlternateVLDiT(nn.Module):
    """GR00T's AlternateVL DiT (N1.6 and N1.7): self-attention over the state/action tokens alternating with
    cross-attention to the text tokens (``~image_mask & attention_mask``) or the image tokens
    (``image_mask & attention_mask``).

    Args:
        num_layers, num_heads, head_dim: block layout (width = heads x head_dim).
        output_dim: width of ``proj_out_2``.
        cross_attention_dim: width of the backbone features.
        attend_text_every_n_blocks: see :func:`block_kinds`.
        dropout: block dropout.
    """

    def __init__(self, *, num_layers: int, num_heads: int, head_dim: int, output_dim: int, cross_attention_dim: int,
                 attend_text_every_n_blocks: int, dropout: float) -> None:
        super().__init__()
        width = num_heads * head_dim
        self.kinds = block_kinds(num_layers, attend_text_every_n_blocks)
        self.gradient_checkpointing = False
        self.timestep_encoder = TimestepEncoder(width)
        self.transformer_blocks = nn.ModuleList(
            GrootBlock(width, num_heads, head_dim, dropout=dropout, time_conditioned=True,
                       cross_attention_dim=None if kind == "self" else cross_attention_dim)
            for kind in self.kinds)
        self.norm_out = nn.LayerNorm(width, eps=1e-6, elementwise_affine=False)
        self.proj_out_1 = nn.Linear(width, 2 * width)
        self.proj_out_2 = nn.Linear(width, output_dim)

    def forward(self, hidden: torch.Tensor, context: torch.Tensor, buckets: torch.Tensor, *, image_mask: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        """``hidden`` [B, T, W] tokens, ``context`` [B, S, C] VL embeddings, ``buckets`` int64 [B]; the masks are
        boolean [B, S]. Returns [B, T, output_dim]."""
        temb = self.timestep_encoder(buckets)
        masks = {"text": ~image_mask & attention_mask, "image": image_mask & attention_mask}
        hidden = hidden.contiguous()
        for kind, block in zip(self.kinds, self.transformer_blocks, strict=True):
            if kind == "self":
                hidden = _run(block, self.gradient_checkpointing and self.training, hidden, temb)
            else:
                hidden = _run(block, self.gradient_checkpointing and self.training, hidden, temb, context,
                              masks[kind])
        shift, scale = self.proj_out_1(F.silu(temb)).chunk(2, dim=1)
        hidden = self.norm_out(hidden) * (1 + scale[:, None]) + shift[:, None]
        return self.proj_out_2(hidden)


class SelfAttentionStack(nn.Module):
    """The VL self-attention over the backbone features: plain (affine-LayerNorm) blocks, **no attention mask**
    (padded backbone tokens take part, as in the reference), no final norm."""

    def __init__(self, *, num_layers: int, num_heads: int, head_dim: int, dropout: float) -> None:
        super().__init__()
        width = num_heads * head_dim
        self.gradient_checkpointing = False
        self.transformer_blocks = nn.ModuleList(
            GrootBlock(width, num_heads, head_dim, dropout=dropout, time_conditioned=False) for _ in range(num_layers))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden.contiguous()
        for block in self.transformer_blocks:
            hidden = _run(block, self.gradient_checkpointing and self.training, hidden)
        return hidden

"""The Wan DiT block of both FastWAM experts, split around the joint self-attention, and one MoT layer.

Parameter names are original Wan's (``self_attn.{q,k,v,o}``, ``norm_q``/``norm_k`` over the whole attention width,
``norm3`` = the affine cross-attention norm, ``norm1``/``norm2`` without parameters, ``ffn.{0,2}``,
``modulation`` [1, 6, D]), as in lerobot's and LoongForge's FastWAM, so their checkpoints map key for key.

One block, per expert (width D, attention width H*K which may differ from D in the action expert):

1. ``(shift, scale, gate, c_shift, c_scale, c_gate) = modulation + t_mod``;
2. ``q, k, v`` of ``LN(x) (1 + scale) + shift`` (q/k RMSNorm, then RoPE);
3. one attention over the concatenated q/k/v of every expert of the layer (:class:`MoTLayer`), split back;
4. ``x += gate * o(y)``; ``x += cross_attn(norm3(x), text)`` (no gate); ``x += c_gate * ffn(LN(x) (1 + c_scale) +
   c_shift)``.

With ``fp32_attention`` (lerobot's default) both attentions run on float32 q/k/v outside autocast, whatever the
compute dtype; off, in the compute dtype.

Legend: B batch, L tokens, Lc context tokens, D width, H heads, K head_dim.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.models.normalization import FP32LayerNorm
from torch import nn

from embodied_models.wan.attention import WanRMSNorm, attention
from embodied_models.wan.modulation import modulate, modulation_chunks
from embodied_models.wan.rope import apply_rope

__all__ = ["DiTBlock", "MoTLayer", "WanAttention", "attend"]

Stream = dict[str, Any]
"""One expert's inputs to a layer: ``x`` [B, L, D], ``t_mod`` [B, 6, D] or [B, L, 6, D], ``rope`` complex
[B|1, L, 1, K/2], ``context`` [B, Lc, D] (the expert's own text embedding) and ``context_mask`` [B, Lc] bool."""


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, *,
           fp32: bool) -> torch.Tensor:
    """:func:`~embodied_models.wan.attention.attention`, on float32 q/k/v outside autocast when ``fp32`` (lerobot's
    ``fp32_attention``: the softmax of a bf16 model in float32); the result is float32 then."""
    if not fp32:
        return attention(q, k, v, mask)
    with torch.autocast(device_type=q.device.type, enabled=False):
        return attention(q.float(), k.float(), v.float(), mask)


class WanAttention(nn.Module):
    """q/k/v/o projections with RMSNorm on q and k over the whole attention width.

    Args:
        dim: width of the expert (input of q/k/v, output of o).
        num_heads, head_dim: attention geometry (H*K may differ from ``dim``).
        eps: RMSNorm epsilon.
        fp32_attention: attention on float32 q/k/v (:func:`attend`).
    """

    def __init__(self, dim: int, num_heads: int, head_dim: int, eps: float, *, fp32_attention: bool = True) -> None:
        super().__init__()
        width = num_heads * head_dim
        self.num_heads = num_heads
        self.fp32_attention = fp32_attention
        self.q = nn.Linear(dim, width)
        self.k = nn.Linear(dim, width)
        self.v = nn.Linear(dim, width)
        self.o = nn.Linear(width, dim)
        self.norm_q = WanRMSNorm(width, eps)
        self.norm_k = WanRMSNorm(width, eps)

    def project(self, x: torch.Tensor, context: torch.Tensor | None = None,
                rope: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q from x, k/v from ``context`` (default x), each [B, L, H, K]; RoPE on q and k when given."""
        src = x if context is None else context
        q = self.norm_q(self.q(x)).unflatten(-1, (self.num_heads, -1))
        k = self.norm_k(self.k(src)).unflatten(-1, (self.num_heads, -1))
        v = self.v(src).unflatten(-1, (self.num_heads, -1))
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        return q, k, v

    def cross(self, x: torch.Tensor, context: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Cross-attention of x over ``context`` (key mask [B, Lc], True = attend) -> [B, L, D]."""
        q, k, v = self.project(x, context)
        key_mask = None if mask is None else mask[:, None, None, :]
        return self.o(attend(q, k, v, key_mask, fp32=self.fp32_attention).type_as(x))


class DiTBlock(nn.Module):
    """One Wan block (see the module docstring), used by both experts.

    Args:
        dim: expert width D.
        ffn_dim: FFN hidden width.
        num_heads, head_dim: attention geometry shared by the experts of a layer.
        eps: norm epsilon.
        fp32_attention: both attentions on float32 q/k/v (:func:`attend`).
    """

    def __init__(self, dim: int, ffn_dim: int, num_heads: int, head_dim: int, eps: float, *,
                 fp32_attention: bool = True) -> None:
        super().__init__()
        self.self_attn = WanAttention(dim, num_heads, head_dim, eps, fp32_attention=fp32_attention)
        self.cross_attn = WanAttention(dim, num_heads, head_dim, eps, fp32_attention=fp32_attention)
        # float32 norms (also with bf16 parameters under FSDP mixed precision)
        self.norm1 = FP32LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.norm2 = FP32LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.norm3 = FP32LayerNorm(dim, eps=eps)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def pre_attention(self, stream: Stream) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple]:
        """q, k, v [B, L, H, K] of the modulated input, and the six modulation tensors."""
        x = stream["x"]
        mods = modulation_chunks(self.modulation, stream["t_mod"])
        h = modulate(self.norm1(x.float()), mods[0], mods[1]).type_as(x)
        q, k, v = self.self_attn.project(h, rope=stream["rope"])
        return q, k, v, mods

    def post_attention(self, stream: Stream, attn_out: torch.Tensor, mods: tuple) -> torch.Tensor:
        """Residuals of the self-attention output [B, L, H*K], the text cross-attention and the FFN."""
        x = stream["x"]
        _, _, gate, c_shift, c_scale, c_gate = mods
        x = (x.float() + gate * self.self_attn.o(attn_out.type_as(x)).float()).type_as(x)
        h = self.norm3(x.float()).type_as(x)
        x = x + self.cross_attn.cross(h, stream["context"], stream["context_mask"])
        h = modulate(self.norm2(x.float()), c_shift, c_scale).type_as(x)
        return (x.float() + c_gate * self.ffn(h).float()).type_as(x)

    def reset_parameters(self) -> None:
        """The modulation table as building draws it (``randn / sqrt(D)``; for ``--init-on-meta``)."""
        with torch.no_grad():
            self.modulation.normal_(std=self.modulation.shape[-1] ** -0.5)


class MoTLayer(nn.Module):
    """One mixture-of-transformers layer: a :class:`DiTBlock` per expert joined by one self-attention.

    Args:
        blocks: expert name -> block, in token order (video first).
    """

    def __init__(self, blocks: dict[str, DiTBlock]) -> None:
        super().__init__()
        self.blocks = nn.ModuleDict(blocks)

    def forward(self, streams: dict[str, Stream], mask: torch.Tensor | None = None,
                prefix_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
                keep_kv: bool = False) -> tuple[dict[str, torch.Tensor], tuple[torch.Tensor, torch.Tensor] | None]:
        """Runs the experts in ``streams`` (a subset of the layer's, in the layer's order) jointly.

        Args:
            streams: expert name -> :data:`Stream`.
            mask: boolean [Lq, Lk] over [prefix | streams' tokens] keys (True = attend); None: full attention.
            prefix_kv: cached (k, v) [B, Lp, H, K] put before the streams' keys (the KV-cache path).
            keep_kv: also return the (k, v) of this call's tokens (to cache them).

        Returns:
            (expert name -> new x, the (k, v) of the streams' tokens when ``keep_kv``).
        """
        names = [name for name in self.blocks if name in streams]
        parts = {name: self.blocks[name].pre_attention(streams[name]) for name in names}
        q = torch.cat([parts[n][0] for n in names], dim=1)
        k = torch.cat([parts[n][1] for n in names], dim=1)
        v = torch.cat([parts[n][2] for n in names], dim=1)
        kv = (k, v) if keep_kv else None
        if prefix_kv is not None:
            k = torch.cat([prefix_kv[0].to(k.dtype), k], dim=1)
            v = torch.cat([prefix_kv[1].to(v.dtype), v], dim=1)
        # one setting per model (model.fp32_attention), as lerobot's MoT requires of its experts
        out = attend(q, k, v, mask, fp32=self.blocks[names[0]].self_attn.fp32_attention)
        sizes = [streams[n]["x"].shape[1] for n in names]
        pieces = out.split(sizes, dim=1)
        result = {n: self.blocks[n].post_attention(streams[n], piece, parts[n][3])
                  for n, piece in zip(names, pieces, strict=True)}
        return result, kv

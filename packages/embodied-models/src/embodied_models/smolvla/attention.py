"""SmolVLA's attention pattern, RoPE and kernel.

Masks follow big_vision's block-causal rule: each token has a validity flag and a block-start flag, and query q
may attend to key k when ``cumsum(flags)[k] <= cumsum(flags)[q]`` and both are valid. SmolVLA flags the state
token and **every** action token (pi0 flags only the first action), so the prefix [images | language] is
bidirectional, the state sees it, and the actions see the valid prefix and the earlier actions (causal).

RoPE is lerobot's ``apply_rope``: rotate-half over the two halves of head_dim, angles ``pos / theta^(2i/d)``
computed in float32 (a division, not Llama's multiplication by the inverse frequency).

Shape legend: B batch, Q queries, L keys, N query heads, K key/value heads, D head_dim.
"""
# ruff: noqa: N803 - shape-suffixed tensor names (x_BQD) follow the legend above

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from embodied_models.vla.masks import block_mask, position_ids  # the block-causal rule smolvla shares with pi05

__all__ = ["Rope", "attend", "block_mask", "position_ids", "rope", "rotate"]


class Rope(NamedTuple):
    """cos and sin of the rotation angles, [B, 1, L, D/2] each (float32)."""

    cos: torch.Tensor
    sin: torch.Tensor

    def narrow(self, start: int, length: int) -> Rope:
        """The tables of tokens ``start .. start + length``."""
        return Rope(self.cos[:, :, start:start + length], self.sin[:, :, start:start + length])


def rope(pos_BL: torch.Tensor, head_dim: int, theta: float) -> Rope:
    """Angles ``pos / theta^(2i / head_dim)`` for i < head_dim / 2, in float32 (lerobot's ``apply_rope``)."""
    exponents = (2.0 / head_dim) * torch.arange(head_dim // 2, dtype=torch.float32, device=pos_BL.device)
    timescale = theta ** exponents
    radians = pos_BL.to(torch.float32)[..., None] / timescale
    return Rope(torch.cos(radians)[:, None], torch.sin(radians)[:, None])


def rotate(x_BNLD: torch.Tensor, table: Rope) -> torch.Tensor:
    """Rotates the two halves of head_dim by the table's angles (float32 math, result in x's dtype)."""
    dtype = x_BNLD.dtype
    first, second = x_BNLD.float().chunk(2, dim=-1)
    out = torch.cat([first * table.cos - second * table.sin, second * table.cos + first * table.sin], dim=-1)
    return out.to(dtype)


def attend(q_BNQD: torch.Tensor, k_BKLD: torch.Tensor, v_BKLD: torch.Tensor, allowed_BQL: torch.Tensor, *,
           implementation: str) -> torch.Tensor:
    """Grouped-query attention under a boolean pattern; returns [B, Q, N * D].

    ``eager`` is lerobot's ``eager_attention_forward``: query head h reads key/value head ``h // (N / K)``,
    scores in float32 scaled by ``D^-0.5``, masked scores **replaced** by ``finfo(float32).min``, float32 softmax,
    probabilities cast to the values' dtype. ``sdpa`` runs torch's fused kernel with the same pattern as an
    additive bias of ``finfo.min`` (finite, so a fully masked row such as a padded language token gives a uniform
    row instead of NaN, as the replacement does).
    """
    b, n, q_len, d = q_BNQD.shape
    groups = n // k_BKLD.shape[1]
    if implementation == "sdpa":
        bias = torch.zeros(allowed_BQL.shape, dtype=q_BNQD.dtype, device=q_BNQD.device)
        bias.masked_fill_(~allowed_BQL, torch.finfo(q_BNQD.dtype).min)
        out = F.scaled_dot_product_attention(q_BNQD, k_BKLD, v_BKLD, attn_mask=bias[:, None], scale=d ** -0.5,
                                             enable_gqa=groups > 1)
    elif implementation == "eager":
        k = k_BKLD.repeat_interleave(groups, dim=1) if groups > 1 else k_BKLD
        v = v_BKLD.repeat_interleave(groups, dim=1) if groups > 1 else v_BKLD
        scores = torch.matmul(q_BNQD.float(), k.float().transpose(2, 3)) * d ** -0.5
        scores = torch.where(allowed_BQL[:, None], scores, torch.finfo(torch.float32).min)
        probs = F.softmax(scores, dim=-1).to(v.dtype)
        out = torch.matmul(probs, v)
    else:
        raise ValueError(f"attention implementation must be 'eager' or 'sdpa' (got {implementation!r})")
    return out.transpose(1, 2).reshape(b, q_len, n * d)

"""adaLN modulation of Wan blocks: timestep sinusoids, the embedders, and shift/scale/gate from a table.

A Wan block holds a learned table ``modulation`` [1, 6, D]; the timestep embedding projected to ``t_mod``
[..., 6, D] is added to it and the sum is chunked into ``(shift, scale, gate, c_shift, c_scale, c_gate)``
(self-attention, then FFN). The output head does the same with a [1, 2, D] table and the un-projected time
embedding: ``(shift, scale)``. Everything is added in float32 as Wan does.

The module layouts here are original Wan's (``time_embedding.{0,2}``, ``time_projection.1``,
``text_embedding.{0,2}``); diffusers' ``WanTimeTextImageEmbedding`` holds the same weights under other names.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["modulate", "modulation_chunks", "sinusoidal_embedding", "text_embedding", "time_embedding",
           "time_projection"]


def sinusoidal_embedding(timesteps: torch.Tensor, dim: int, *, theta: float = 10000.0) -> torch.Tensor:
    """``[cos(t f_k), sin(t f_k)]`` (cos half first), ``f_k = theta ** (-k / (dim/2))``; float64 math, float32 out.

    ``timesteps`` [...] on the 0..1000 scale -> [..., dim].
    """
    half = dim // 2
    freqs = torch.pow(theta, -torch.arange(half, dtype=torch.float64, device=timesteps.device) / half)
    angles = timesteps.to(torch.float64)[..., None] * freqs
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1).float()


def time_embedding(freq_dim: int, dim: int) -> nn.Sequential:
    """Wan's ``time_embedding``: Linear(freq_dim, D) -> SiLU -> Linear(D, D)."""
    return nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))


def time_projection(dim: int, num_chunks: int = 6) -> nn.Sequential:
    """Wan's ``time_projection``: SiLU -> Linear(D, num_chunks * D) (the block modulation offsets)."""
    return nn.Sequential(nn.SiLU(), nn.Linear(dim, num_chunks * dim))


def text_embedding(text_dim: int, dim: int) -> nn.Sequential:
    """Wan's ``text_embedding``: Linear(text_dim, D) -> tanh-GELU -> Linear(D, D)."""
    return nn.Sequential(nn.Linear(text_dim, dim), nn.GELU(approximate="tanh"), nn.Linear(dim, dim))


def modulation_chunks(table: torch.Tensor, t_mod: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``table`` [1, n, D] + ``t_mod`` [B, n, D] or [B, L, n, D] (float32) -> n tensors [B, 1 or L, D]."""
    if t_mod.dim() == 3:  # one timestep per element: broadcast over the tokens
        mods = table.float() + t_mod.float()
        return tuple(m.unsqueeze(1) for m in mods.unbind(dim=1))
    return (table.float().unsqueeze(0) + t_mod.float()).unbind(dim=2)


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x * (1 + scale) + shift`` (x is normally a float32 LayerNorm output)."""
    return x * (1 + scale) + shift


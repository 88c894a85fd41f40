"""Per-embodiment state / action encoders and the action decoder of DreamZero (category-specific MLPs).

Each layer holds one weight slice per embodiment (``W`` [E, in, out], ``b`` [E, out]) and applies the slice of
each sample's embodiment id with a batched matmul. Names and shapes follow LoongForge's ``CategorySpecificLinear``
/ ``MultiEmbodimentActionEncoder`` so its checkpoints load unchanged (``state_encoder.layer1.W`` ...).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional

__all__ = ["ActionEncoder", "CategoryLinear", "CategoryMLP", "sinusoid_features"]


class CategoryLinear(nn.Module):
    """``x @ W[id] + b[id]`` per sample.

    Args:
        num_categories: embodiments.
        in_dim, out_dim: widths.
    """

    def __init__(self, num_categories: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.empty(num_categories, in_dim, out_dim))
        self.b = nn.Parameter(torch.empty(num_categories, out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``W ~ 0.02 N(0, 1)``, ``b = 0`` (the reference's init)."""
        nn.init.normal_(self.W, std=0.02)
        nn.init.zeros_(self.b)

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """x [B, T, in], ids [B] -> [B, T, out]."""
        return torch.bmm(x, self.W[ids].to(x.dtype)) + self.b[ids].to(x.dtype).unsqueeze(1)


class CategoryMLP(nn.Module):
    """Two category-specific layers with a ReLU between (the state encoder and the action decoder)."""

    def __init__(self, num_categories: int, in_dim: int, hidden_dim: int, out_dim: int) -> None:
        super().__init__()
        self.layer1 = CategoryLinear(num_categories, in_dim, hidden_dim)
        self.layer2 = CategoryLinear(num_categories, hidden_dim, out_dim)

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """x [B, T, in] -> [B, T, out]."""
        return self.layer2(functional.relu(self.layer1(x, ids)), ids)


def sinusoid_features(timesteps: torch.Tensor, dim: int) -> torch.Tensor:
    """``[sin(t f_k), cos(t f_k)]`` (sin half first), ``f_k = exp(-k ln(1e4) / (dim/2))``: [B, T] -> [B, T, dim]."""
    half = dim // 2
    freqs = torch.exp(-torch.arange(half, dtype=torch.float32, device=timesteps.device) * (math.log(10000.0) / half))
    angles = timesteps.float()[..., None] * freqs
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


class ActionEncoder(nn.Module):
    """Noisy actions and their timesteps -> action tokens: ``W3(swish(W2([W1 a, sinusoid(t)])))``.

    Args:
        num_categories: embodiments.
        action_dim: padded action width.
        dim: token width (the DiT width).
    """

    def __init__(self, num_categories: int, action_dim: int, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.W1 = CategoryLinear(num_categories, action_dim, dim)
        self.W2 = CategoryLinear(num_categories, 2 * dim, dim)
        self.W3 = CategoryLinear(num_categories, dim, dim)

    def forward(self, actions: torch.Tensor, timesteps: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """actions [B, T, A], timesteps [B, T] (0..1000 scale), ids [B] -> [B, T, dim]."""
        emb = self.W1(actions, ids)
        tau = sinusoid_features(timesteps, self.dim).to(emb.dtype)
        return self.W3(functional.silu(self.W2(torch.cat([emb, tau], dim=-1), ids)), ids)

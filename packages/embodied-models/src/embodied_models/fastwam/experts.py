"""The expert-level layers of FastWAM (embedders and heads; the per-layer blocks live in the MoT layers).

- :class:`VideoExpert` (Wan2.2-TI2V-5B video DiT): Conv3d ``patch_embedding``, ``text_embedding``,
  ``time_embedding``/``time_projection`` applied **per token** (frame-0 tokens carry t = 0), and the output
  ``head`` modulated by the time embedding itself, ``(shift, scale) = head.modulation + temb``; its features per
  token come out ordered (pt, ph, pw, c).
- :class:`ActionExpert`: ``action_encoder`` per step, its own text/time embedders with one timestep per element,
  and a plain Linear ``head`` (no final norm, no modulation: lerobot's ``ActionDiT``).

Both apply their own ``text_embedding`` to ``[context | proprio token]``. Legend: B batch, L tokens, D width.
"""

from __future__ import annotations

import torch
from diffusers.models.normalization import FP32LayerNorm
from torch import nn

from embodied_models.wan.modulation import (
    modulate,
    sinusoidal_embedding,
    text_embedding,
    time_embedding,
    time_projection,
)
from embodied_models.wan.patch import token_grid, unpatchify

__all__ = ["ActionExpert", "VideoExpert", "VideoHead"]


class VideoHead(nn.Module):
    """Output head of the video expert: ``head(LN(x) (1 + scale) + shift)`` with ``(shift, scale)`` from
    ``modulation`` [1, 2, D] + the per-token time embedding."""

    def __init__(self, dim: int, out_features: int, eps: float) -> None:
        super().__init__()
        self.norm = FP32LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.head = nn.Linear(dim, out_features)
        self.modulation = nn.Parameter(torch.randn(1, 2, dim) / dim**0.5)

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        """x, temb [B, L, D] -> [B, L, out_features]."""
        shift, scale = (self.modulation.float().unsqueeze(0) + temb.float().unsqueeze(2)).unbind(dim=2)
        return self.head(modulate(self.norm(x.float()), shift, scale).type_as(x))

    def reset_parameters(self) -> None:
        """The modulation table as building draws it (``randn / sqrt(D)``; for ``--init-on-meta``)."""
        with torch.no_grad():
            self.modulation.normal_(std=self.modulation.shape[-1] ** -0.5)


class VideoExpert(nn.Module):
    """Embedders and head of the Wan2.2 video DiT.

    Args:
        in_channels, out_channels: latent channels in and predicted.
        dim: width D; ``freq_dim``: timestep sinusoid width; ``text_dim``: text embedding width.
        patch_size: (pt, ph, pw).
        eps: norm epsilon.
    """

    def __init__(self, *, in_channels: int, out_channels: int, dim: int, freq_dim: int, text_dim: int,
                 patch_size: tuple[int, int, int], eps: float) -> None:
        super().__init__()
        self.patch_size = tuple(patch_size)
        self.dim, self.freq_dim, self.out_channels = dim, freq_dim, out_channels
        self.patch_embedding = nn.Conv3d(in_channels, dim, kernel_size=self.patch_size, stride=self.patch_size)
        self.text_embedding = text_embedding(text_dim, dim)
        self.time_embedding = time_embedding(freq_dim, dim)
        self.time_projection = time_projection(dim)
        pt, ph, pw = self.patch_size
        self.head = VideoHead(dim, out_channels * pt * ph * pw, eps)

    def embed(self, latents: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int, int]]:
        """Latents [B, C, F, H, W] -> (tokens [B, f*h*w, D] in (f, h, w) order, token grid (f, h, w))."""
        weight = self.patch_embedding.weight
        x = self.patch_embedding(latents.to(weight.dtype))
        return x.flatten(2).transpose(1, 2), token_grid(latents.shape, self.patch_size)

    def embed_time(self, timesteps: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token timesteps [B, L] -> (temb [B, L, D], t_mod [B, L, 6, D])."""
        sinus = sinusoidal_embedding(timesteps, self.freq_dim).to(self.time_embedding[0].weight.dtype)
        temb = self.time_embedding(sinus)
        t_mod = self.time_projection(temb).unflatten(-1, (6, self.dim))
        return temb.to(dtype), t_mod.to(dtype)

    def unpatchify(self, out: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
        """Head output [B, L, pt*ph*pw*C] -> velocity [B, C, F, H, W]."""
        return unpatchify(out, grid, self.patch_size)


class ActionExpert(nn.Module):
    """Embedders and head of the action DiT.

    Args:
        action_dim: action width A (in and out).
        dim: width D; ``freq_dim``: timestep sinusoid width; ``text_dim``: text embedding width.
    """

    def __init__(self, *, action_dim: int, dim: int, freq_dim: int, text_dim: int) -> None:
        super().__init__()
        self.dim, self.freq_dim, self.action_dim = dim, freq_dim, action_dim
        self.action_encoder = nn.Linear(action_dim, dim)
        self.text_embedding = text_embedding(text_dim, dim)
        self.time_embedding = time_embedding(freq_dim, dim)
        self.time_projection = time_projection(dim)
        self.head = nn.Linear(dim, action_dim)

    def embed(self, actions: torch.Tensor) -> torch.Tensor:
        """Actions [B, T, A] -> tokens [B, T, D]."""
        return self.action_encoder(actions.to(self.action_encoder.weight.dtype))

    def embed_time(self, timesteps: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """One timestep per element [B] -> (temb [B, D], t_mod [B, 6, D])."""
        sinus = sinusoidal_embedding(timesteps, self.freq_dim).to(self.time_embedding[0].weight.dtype)
        temb = self.time_embedding(sinus)
        t_mod = self.time_projection(temb).unflatten(-1, (6, self.dim))
        return temb.to(dtype), t_mod.to(dtype)

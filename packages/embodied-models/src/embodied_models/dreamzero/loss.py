"""DreamZero's two losses (LoongForge's ``_dreamzero_weighted_{video,action}_loss``).

- dynamics: per (sample, latent frame) mean squared error of the video velocity over channels and space, times
  the schedule weight of that frame's timestep, averaged;
- action: squared error masked by ``action_mask`` and by the sample's ``has_real_action``, averaged over action
  channels (padding included in the count, as the reference), times the action timestep weight, averaged.
"""

from __future__ import annotations

import torch

__all__ = ["action_loss", "dynamics_loss"]


def dynamics_loss(pred: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """pred / target [B, C, F, H, W], weight [B, F] -> scalar (float32)."""
    per_frame = (pred.float() - target.float()).square().mean(dim=(1, 3, 4))
    return (per_frame * weight).mean()


def action_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, real: torch.Tensor,
                weight: torch.Tensor) -> torch.Tensor:
    """pred / target / mask [B, T, A], real [B] (bool), weight [B, T] -> scalar (float32)."""
    err = (pred.float() - target.float()).square() * mask.float() * real.float()[:, None, None]
    return (err.mean(dim=2) * weight).mean()

"""The LingBot-VA training loss: timestep-weighted video MSE plus masked action MSE.

Port of the reference ``_flow_matching_loss`` (lerobot ``LingBotVAPolicy``; upstream ``Trainer.compute_loss``):
both terms are averaged per (element, frame) first, then over (element, frame).

Shapes: video pred/target [B, C, F, H, W]; action pred/target/mask [B, A, F, n, 1]; weights [B, F].
"""

from __future__ import annotations

import torch

__all__ = ["action_loss", "video_loss"]


def video_loss(pred: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """mean over (b, f) of sum over (c, h, w) of w(b, f) (pred - target)^2 / (C*H*W + 1e-6)."""
    err = (pred.float() - target.float()).square()
    per_frame = err.sum(dim=(1, 3, 4)) * weight.float()
    c, _, h, w = target.shape[1:]
    return (per_frame / (c * h * w + 1e-6)).mean()


def action_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                weight: torch.Tensor) -> torch.Tensor:
    """mean over (b, f) of sum over (a, n) of w(b, f) (pred - target)^2 mask / (sum of mask + 1e-6)."""
    mask = mask.float()
    err = (pred.float() - target.float()).square() * mask
    per_frame = err.sum(dim=(1, 3, 4)) * weight.float()
    return (per_frame / (mask.sum(dim=(1, 3, 4)) + 1e-6)).mean()

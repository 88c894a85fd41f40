"""``Pi05PreparedBatch``: what the pi0.5 collate function produces and the model consumes."""

from __future__ import annotations

import attrs
import torch

__all__ = ["Pi05PreparedBatch"]


@attrs.define
class Pi05PreparedBatch:
    """A model-ready pi0.5 batch (B samples, C image slots, T prompt tokens, H horizon, A max_action_dim).

    Attributes:
        images: [B, C, 3, H, W], uint8 (transported as bytes; the model maps them to [-1, 1]) or float
            already in [-1, 1]. An absent camera is an image of -1 (uint8 0).
        image_masks: bool [B, C], False for absent cameras (their tokens are masked out).
        tokens: int64 [B, T] prompt ids, right-padded with 0.
        token_mask: bool [B, T], True for real tokens.
        actions: float32 [B, H, A] normalized, zero-padded beyond the real dims; None at inference.
        action_is_pad: bool [B, H], True for horizon steps past the episode end; None when unknown.
    """

    images: torch.Tensor
    image_masks: torch.Tensor
    tokens: torch.Tensor
    token_mask: torch.Tensor
    actions: torch.Tensor | None = None
    action_is_pad: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Pi05PreparedBatch:
        """A copy with every tensor on ``device`` (non-blocking; pin_memory makes it asynchronous)."""
        return Pi05PreparedBatch(**{
            field.name: (value.to(device, non_blocking=True) if isinstance(value, torch.Tensor) else value)
            for field in attrs.fields(Pi05PreparedBatch)
            for value in [getattr(self, field.name)]
        })

    def pin_memory(self) -> Pi05PreparedBatch:
        """Pinned copy (called by DataLoader(pin_memory=True) on custom batch types)."""
        return Pi05PreparedBatch(**{
            field.name: (value.pin_memory() if isinstance(value, torch.Tensor) else value)
            for field in attrs.fields(Pi05PreparedBatch)
            for value in [getattr(self, field.name)]
        })

    @property
    def batch_size(self) -> int:
        """Number of samples."""
        return int(self.tokens.shape[0])

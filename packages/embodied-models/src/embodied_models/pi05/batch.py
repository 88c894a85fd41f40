"""``Pi05PreparedBatch``: what the pi0.5 collate function produces and the model consumes."""

from __future__ import annotations

import attrs
import torch

from embodied_models.vla.batch import TensorFields

__all__ = ["Pi05PreparedBatch"]


@attrs.define
class Pi05PreparedBatch(TensorFields):
    """A model-ready pi0.5 batch (B samples, C image slots, T prompt tokens, H horizon, A max_action_dim);
    ``to`` / ``pin_memory`` come from :class:`~embodied_models.vla.batch.TensorFields`.

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

    @property
    def batch_size(self) -> int:
        """Number of samples."""
        return int(self.tokens.shape[0])

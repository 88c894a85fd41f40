"""``SmolVLAPreparedBatch``: what the SmolVLA collate function produces and the model consumes."""

from __future__ import annotations

import attrs
import torch

from embodied_models.vla.batch import TensorFields

__all__ = ["SmolVLAPreparedBatch"]


@attrs.define
class SmolVLAPreparedBatch(TensorFields):
    """A model-ready SmolVLA batch (B samples, C image slots, T language tokens, H horizon, A max_action_dim);
    ``to`` / ``pin_memory`` (also of each image slot) come from :class:`~embodied_models.vla.batch.TensorFields`.

    Attributes:
        images: one tensor per image slot, [B, 3, h, w]: uint8 frames at their own resolution (the model resizes
            them with padding to data.image_size and maps them to [-1, 1] on its device), or float32 already in
            [-1, 1] at model resolution. An absent camera is an all-zero uint8 frame (-1 after scaling).
        image_masks: bool [B, C], False for absent cameras (their tokens are masked out).
        tokens: int64 [B, T] language ids, right-padded.
        token_mask: bool [B, T], True for real tokens.
        state: float32 [B, max_state_dim], normalized, zero-padded beyond the real dims.
        actions: float32 [B, H, A] normalized, zero-padded beyond the real dims; None at inference.
        action_is_pad: bool [B, H], True for horizon steps past the episode end (excluded from the loss).
    """

    images: tuple[torch.Tensor, ...]
    image_masks: torch.Tensor
    tokens: torch.Tensor
    token_mask: torch.Tensor
    state: torch.Tensor
    actions: torch.Tensor | None = None
    action_is_pad: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        """Number of samples."""
        return int(self.tokens.shape[0])

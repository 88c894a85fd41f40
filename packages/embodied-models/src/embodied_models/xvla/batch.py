"""``XvlaPreparedBatch``: what the X-VLA collate function produces and the model consumes."""

from __future__ import annotations

import attrs
import torch

from embodied_models.vla.batch import TensorFields

__all__ = ["XvlaPreparedBatch"]


@attrs.define
class XvlaPreparedBatch(TensorFields):
    """A model-ready X-VLA batch (B samples, V views, L instruction tokens, T horizon, D action width);
    ``to`` / ``pin_memory`` come from :class:`~embodied_models.vla.batch.TensorFields`.

    Attributes:
        images: [B, V, 3, H, W] uint8 frames (the model scales them to [0, 1] and applies the ImageNet
            normalization), or float pixel values already normalized (fed to Florence-2 as they are).
        image_masks: bool [B, V], False for absent views (their features are zeros).
        image_pad: int64 [B, V, 2], the rows on top and the columns on the left that resizing padded; they are 0
            after normalization (lerobot pads normalized images with 0). None: no padding.
        tokens: int64 [B, L] instruction ids (BOS ... EOS, right-padded with the pad id; pads are attended).
        domain_id: int64 [B] domain of each sample.
        state: float32 [B, P] the state, normalized and zero-padded to model.max_state_dim (P = 0 without proprio).
        actions: float32 [B, T, D] targets zero-padded to the action space's width; None at inference.
        action_is_pad: bool [B, T], True for steps past the episode end; None when unknown.
    """

    images: torch.Tensor
    image_masks: torch.Tensor
    tokens: torch.Tensor
    domain_id: torch.Tensor
    state: torch.Tensor
    image_pad: torch.Tensor | None = None
    actions: torch.Tensor | None = None
    action_is_pad: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        """Number of samples."""
        return int(self.tokens.shape[0])

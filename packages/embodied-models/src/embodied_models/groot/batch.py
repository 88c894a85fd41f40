"""``GrootBatchFields``: the fields every GR00T batch has (N1.6's is exactly these; N1.7 adds M-RoPE positions)."""

from __future__ import annotations

from typing import ClassVar

import attrs
import torch

from embodied_models.vla.batch import TensorFields

__all__ = ["GrootBatchFields"]


@attrs.define
class GrootBatchFields(TensorFields):
    """A model-ready GR00T batch (B samples, N = frames x views images, L prompt tokens, H model horizon,
    A max_action_dim, S max_state_dim).

    Attributes:
        images: uint8 [B, N, 3, height, width] views after the resize and crop (the model normalizes them).
        input_ids: int64 [B, L] chat-template prompts with the image tokens expanded, left-padded.
        attention_mask: bool [B, L], True for real tokens.
        image_mask: bool [B, L], True for image tokens.
        state: float32 [B, 1, S] normalized, zero-padded state.
        embodiment_id: int64 [B] projector slots.
        actions: float32 [B, H, A] normalized actions, zero beyond the real dims and data horizon; None at inference.
        action_mask: float32 [B, H, A], 1 on real dims x data horizon steps; None at inference.
        sample_index: int64 [B] dataset index of each sample (keys the per-sample training draws; -1 unknown).
            Stays on the host in ``to()``: the draws are made on the CPU without a device sync.
    """

    images: torch.Tensor
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    image_mask: torch.Tensor
    state: torch.Tensor
    embodiment_id: torch.Tensor
    actions: torch.Tensor | None = None
    action_mask: torch.Tensor | None = None
    sample_index: torch.Tensor | None = None

    host_fields: ClassVar[tuple[str, ...]] = ("sample_index",)

    @property
    def batch_size(self) -> int:
        """Number of samples."""
        return int(self.input_ids.shape[0])

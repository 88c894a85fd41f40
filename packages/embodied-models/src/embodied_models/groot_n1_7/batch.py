"""``GrootBatch``: what the GR00T N1.7 collate function produces and the model consumes."""

from __future__ import annotations

import attrs
import torch

from embodied_models.groot.batch import GrootBatchFields

__all__ = ["GrootBatch"]


@attrs.define
class GrootBatch(GrootBatchFields):
    """A model-ready GR00T N1.7 batch: the fields every GR00T batch has
    (:class:`~embodied_models.groot.batch.GrootBatchFields`) and the multimodal RoPE positions.

    Attributes:
        position_ids: int64 [3, B, L] Qwen3-VL multimodal RoPE positions (computed by the collate function; a
            keyword argument).
    """

    position_ids: torch.Tensor = attrs.field(kw_only=True)

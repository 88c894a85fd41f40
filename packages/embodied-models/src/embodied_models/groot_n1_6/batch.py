"""``GrootN16Batch``: what the GR00T N1.6 collate function produces and the model consumes."""

from __future__ import annotations

import attrs

from embodied_models.groot.batch import GrootBatchFields

__all__ = ["GrootN16Batch"]


@attrs.define
class GrootN16Batch(GrootBatchFields):
    """A model-ready GR00T N1.6 batch: exactly the fields every GR00T batch has
    (:class:`~embodied_models.groot.batch.GrootBatchFields`); ``image_mask`` marks the ``<IMG_CONTEXT>`` tokens, and
    ``images`` are the views frame-major then camera."""

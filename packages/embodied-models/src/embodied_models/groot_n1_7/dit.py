"""Moved to :mod:`embodied_models.groot.dit` (shared by groot_n1_6 and groot_n1_7);
this import path stays an alias."""

from __future__ import annotations

from embodied_models.groot.dit import (
    AdaLayerNorm,
    AlternateVLDiT,
    GrootBlock,
    SelfAttentionStack,
    TimestepEncoder,
    block_kinds,
)

__all__ = ["AdaLayerNorm", "AlternateVLDiT", "GrootBlock", "SelfAttentionStack", "TimestepEncoder", "block_kinds"]

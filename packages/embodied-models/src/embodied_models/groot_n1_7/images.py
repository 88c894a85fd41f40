"""Moved to :mod:`embodied_models.groot.images` (shared by groot_n1_6 and groot_n1_7);
this import path stays an alias."""

from __future__ import annotations

from embodied_models.groot.images import as_uint8_frames, groot_view

__all__ = ["as_uint8_frames", "groot_view"]

"""Moved to :mod:`embodied_models.groot.normalize` (shared by groot_n1_6 and groot_n1_7);
this import path stays an alias."""

from __future__ import annotations

from embodied_models.groot.normalize import STAT_NAMES, GrootNormalizer

__all__ = ["STAT_NAMES", "GrootNormalizer"]

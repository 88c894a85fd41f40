"""Moved to :mod:`embodied_models.groot.draws` (shared by groot_n1_6 and groot_n1_7);
this import path stays an alias."""

from __future__ import annotations

from embodied_models.groot.draws import DrawStream, FlowDraws, mix_seed

__all__ = ["DrawStream", "FlowDraws", "mix_seed"]

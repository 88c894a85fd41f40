"""The block-causal attention rule of the pi0-style ports (pi05, smolvla) and their RoPE positions.

big_vision's rule, which openpi and lerobot follow: every token has a validity flag and a block-start flag, and
query q may attend to key k when ``cumsum(flags)[k] <= cumsum(flags)[q]`` and both are valid. The ports differ only
in which tokens start a block (pi0.5: the first action; SmolVLA: the state token and every action) and in the
kernel that consumes the mask, which stay in their ``attention.py``.
"""

# ruff: noqa: N803 - shape-suffixed tensor names (pad_BL: [B, L])

from __future__ import annotations

import torch

__all__ = ["block_mask", "position_ids"]


def block_mask(pad_BL: torch.Tensor, flags_BL: torch.Tensor) -> torch.Tensor:
    """allowed[b, q, k] (bool [B, L, L]) from validity flags and block-start flags (both [B, L])."""
    blocks = torch.cumsum(flags_BL.long(), dim=1)
    allowed = blocks[:, None, :] <= blocks[:, :, None]
    return allowed & pad_BL[:, None, :] & pad_BL[:, :, None]


def position_ids(pad_BL: torch.Tensor) -> torch.Tensor:
    """RoPE positions ``cumsum(valid) - 1``: invalid tokens do not advance them (leading padding gets -1)."""
    return torch.cumsum(pad_BL.long(), dim=1) - 1

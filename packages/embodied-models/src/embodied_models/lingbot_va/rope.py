"""LingBot-VA's grid ids on top of the shared Wan RoPE (:mod:`embodied_models.wan.rope`).

Every token carries a grid id ``(frame, height, width, stream)``. Video tokens sit on integer grid points
(:func:`video_grid_ids`); the ``j``-th of ``n`` action tokens of latent frame ``f`` sits at the fractional frame
position ``f + j / (n + 1)`` (j = 1..n) with height = width = -1, so actions interleave with video frames in time.
LingBot-VA splits the head dimension by channels (``head_dim - 2 * (head_dim // 3)``, ``head_dim // 3``,
``head_dim // 3``), :class:`GridRope`'s default, as in the LingBot-VA reference (``WanRotaryPosEmbed`` of
Robbyant/lingbot-va; lerobot ``policies/lingbot_va/utils.py``). Row 3 (stream id) is not used by the network.
"""

from __future__ import annotations

import torch

from embodied_models.wan.rope import GridRope, apply_rope, video_grid_ids

__all__ = ["GridRope", "action_grid_ids", "apply_rope", "video_grid_ids"]


def action_grid_ids(num_frames: int, action_per_frame: int, *, frame_offset: float = 0.0,
                    device: torch.device | str | None = None) -> torch.Tensor:
    """Grid ids [4, F*n] of action tokens in (frame, j) order: frame + j/(n+1), h = w = -1, stream id 1."""
    f = torch.arange(num_frames, device=device, dtype=torch.float32) + frame_offset
    j = torch.arange(1, action_per_frame + 1, device=device, dtype=torch.float32) / (action_per_frame + 1)
    ff = (f[:, None] + j[None, :]).flatten()
    minus_one = torch.full_like(ff, -1.0)
    return torch.stack([ff, minus_one, minus_one, torch.ones_like(ff)])

"""3-D rotary position embedding from explicit grid ids.

Every token carries a grid id ``(frame, height, width, stream)``. Video tokens sit on integer grid points;
the ``j``-th of ``n`` action tokens of latent frame ``f`` sits at the fractional frame position
``f + j / (n + 1)`` (j = 1..n) with height = width = -1, so actions interleave with video frames in time.
The head dimension is split into frame / height / width parts (``head_dim - 2 * (head_dim // 3)``,
``head_dim // 3``, ``head_dim // 3``) and each part rotates *consecutive channel pairs* by
``position * theta ** (-2i / part)``, as in the LingBot-VA reference (``WanRotaryPosEmbed`` of
Robbyant/lingbot-va; lerobot ``policies/lingbot_va/utils.py``). Row 3 (stream id) is not used by the network.

Shapes: ``grid_ids`` [B, 4, L]; ``freqs`` [B, L, 1, head_dim // 2] complex64; ``x`` [B, L, heads, head_dim].
The rotation is handed to the blocks as a complex tensor on purpose: FSDP's ``cast_forward_inputs`` and autocast
cast floating-point inputs to bf16, which would cost RoPE its precision; complex tensors pass through untouched.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["GridRope", "action_grid_ids", "apply_rope", "video_grid_ids"]


def video_grid_ids(num_frames: int, height: int, width: int, *, frame_offset: float = 0.0,
                   device: torch.device | str | None = None) -> torch.Tensor:
    """Grid ids [4, F*H*W] of video tokens in (frame, h, w) row-major order; stream id 0."""
    f = torch.arange(num_frames, device=device, dtype=torch.float32) + frame_offset
    h = torch.arange(height, device=device, dtype=torch.float32)
    w = torch.arange(width, device=device, dtype=torch.float32)
    ff, hh, ww = torch.meshgrid(f, h, w, indexing="ij")
    return torch.stack([ff.flatten(), hh.flatten(), ww.flatten(), torch.zeros_like(ff).flatten()])


def action_grid_ids(num_frames: int, action_per_frame: int, *, frame_offset: float = 0.0,
                    device: torch.device | str | None = None) -> torch.Tensor:
    """Grid ids [4, F*n] of action tokens in (frame, j) order: frame + j/(n+1), h = w = -1, stream id 1."""
    f = torch.arange(num_frames, device=device, dtype=torch.float32) + frame_offset
    j = torch.arange(1, action_per_frame + 1, device=device, dtype=torch.float32) / (action_per_frame + 1)
    ff = (f[:, None] + j[None, :]).flatten()
    minus_one = torch.full_like(ff, -1.0)
    return torch.stack([ff, minus_one, minus_one, torch.ones_like(ff)])


class GridRope(nn.Module):
    """Angles of the 3-D RoPE for arbitrary (also fractional) grid positions.

    Args:
        head_dim: channels per attention head.
        theta: base frequency.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        third = head_dim // 3
        self.split = (head_dim - 2 * third, third, third)
        if any(part % 2 for part in self.split):
            raise ValueError(f"attention_head_dim {head_dim} gives RoPE parts {self.split}; each must be even")
        self.theta = theta

    def _freqs(self, part: int, device: torch.device) -> torch.Tensor:
        # Built per call rather than stored as buffers so a model built on the meta device needs no re-init.
        return self.theta ** (-torch.arange(0, part, 2, dtype=torch.float64, device=device) / part)

    def forward(self, grid_ids: torch.Tensor) -> torch.Tensor:
        """Returns unit complex rotations [B, L, 1, head_dim // 2] (complex64) for grid ids [B, 4, L]."""
        # float64 like the reference: positions * frequencies lose precision in fp32 for long episodes.
        pos = grid_ids.to(torch.float64)
        angles = torch.cat([pos[:, axis, :, None] * self._freqs(part, pos.device)
                            for axis, part in enumerate(self.split)], dim=-1)
        return torch.polar(torch.ones_like(angles), angles).to(torch.complex64).unsqueeze(2)


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotates consecutive channel pairs (x[2i], x[2i+1]) of x [B, L, heads, head_dim] as complex numbers (fp32)."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(pairs * freqs).flatten(-2).type_as(x)

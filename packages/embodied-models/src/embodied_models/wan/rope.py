"""3-D rotary position embedding of Wan from explicit grid ids (rotating interleaved channel pairs).

Every token carries a grid id (one row per axis, e.g. ``(frame, height, width)``; extra rows are ignored). The
head dimension is split into one part per axis and each part rotates *consecutive channel pairs*
``(x[2i], x[2i+1])`` by ``position * theta ** (-2i / part)`` (Wan style complex multiplication, not rotate-half).
Two split rules exist in the Wan family (they agree for head_dim 128):

- ``"channels"``: ``(head_dim - 2 * (head_dim // 3), head_dim // 3, head_dim // 3)`` channels (LingBot-VA);
- ``"pairs"``: with ``c = head_dim // 2`` pairs, ``(c - 2 * (c // 3), c // 3, c // 3)`` pairs (original Wan,
  FastWAM).

A one-axis split (``(head_dim,)``) gives the 1-D RoPE of an action sequence.

Shapes: ``grid_ids`` [B, axes, L]; ``freqs`` [B, L, 1, head_dim // 2] complex64; ``x`` [B, L, heads, head_dim].
The rotation is handed around as a complex tensor on purpose: FSDP's ``cast_forward_inputs`` and autocast cast
floating-point inputs to bf16, which would cost RoPE its precision; complex tensors pass through untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["GridRope", "apply_rope", "rope_split", "sequence_grid_ids", "video_grid_ids"]


def rope_split(head_dim: int, mode: str = "channels") -> tuple[int, int, int]:
    """Channels per (frame, height, width) part of a head; ``mode`` is ``"channels"`` or ``"pairs"`` (see above)."""
    if mode == "channels":
        third = head_dim // 3
        return head_dim - 2 * third, third, third
    if mode == "pairs":
        pairs = head_dim // 2
        third = pairs // 3
        return 2 * (pairs - 2 * third), 2 * third, 2 * third
    raise ValueError(f"rope split mode {mode!r}: valid are 'channels', 'pairs'")


def video_grid_ids(num_frames: int, height: int, width: int, *, frame_offset: float = 0.0,
                   device: torch.device | str | None = None) -> torch.Tensor:
    """Grid ids [4, F*H*W] of video tokens in (frame, h, w) row-major order; row 3 (stream id) is 0."""
    f = torch.arange(num_frames, device=device, dtype=torch.float32) + frame_offset
    h = torch.arange(height, device=device, dtype=torch.float32)
    w = torch.arange(width, device=device, dtype=torch.float32)
    ff, hh, ww = torch.meshgrid(f, h, w, indexing="ij")
    return torch.stack([ff.flatten(), hh.flatten(), ww.flatten(), torch.zeros_like(ff).flatten()])


def sequence_grid_ids(length: int, *, offset: float = 0.0, device: torch.device | str | None = None) -> torch.Tensor:
    """Grid ids [1, L] of a 1-D token sequence: positions ``offset, offset + 1, ...``."""
    return (torch.arange(length, device=device, dtype=torch.float32) + offset)[None]


class GridRope(nn.Module):
    """Angles of the RoPE for arbitrary (also fractional) grid positions.

    Args:
        head_dim: channels per attention head.
        theta: base frequency.
        split: channels per axis (each even, summing to ``head_dim``); default :func:`rope_split` ``"channels"``.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0, split: Sequence[int] | None = None) -> None:
        super().__init__()
        self.split = tuple(split) if split is not None else rope_split(head_dim)
        if any(part % 2 for part in self.split) or sum(self.split) != head_dim:
            raise ValueError(f"attention_head_dim {head_dim} gives RoPE parts {self.split}; each must be even and "
                             f"they must sum to the head dim")
        self.theta = theta

    def _freqs(self, part: int, device: torch.device) -> torch.Tensor:
        # Built per call rather than stored as buffers so a model built on the meta device needs no re-init.
        return self.theta ** (-torch.arange(0, part, 2, dtype=torch.float64, device=device) / part)

    def forward(self, grid_ids: torch.Tensor) -> torch.Tensor:
        """Returns unit complex rotations [B, L, 1, head_dim // 2] (complex64) for grid ids [B, axes, L]."""
        # float64 like the references: positions * frequencies lose precision in fp32 for long sequences.
        pos = grid_ids.to(torch.float64)
        angles = torch.cat([pos[:, axis, :, None] * self._freqs(part, pos.device)
                            for axis, part in enumerate(self.split)], dim=-1)
        return torch.polar(torch.ones_like(angles), angles).to(torch.complex64).unsqueeze(2)


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotates consecutive channel pairs (x[2i], x[2i+1]) of x [B, L, heads, head_dim] as complex numbers (fp32)."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(pairs * freqs).flatten(-2).type_as(x)

"""Synthetic camera frames for the image augmentation goldens: integer arithmetic only, so the same bytes on every
machine and in every venv (the golden scripts run in .venv-lerobot, the tests in .venv), no RNG involved.

Each frame mixes what colour and geometry kernels treat specially: hashed noise over a gradient (every hue and
level), grey pixels (r = g = b: hue undefined), saturated primaries and 0 / 255 extremes (clamping), and a flat
band (exact values survive a resize).
"""

from __future__ import annotations

import hashlib

import torch

__all__ = ["camera_frames", "sha256"]


def camera_frames(height: int, width: int, *, camera: int, frames: int | None) -> torch.Tensor:
    """uint8 ``[T, 3, H, W]`` frames of camera number ``camera`` (``[3, H, W]`` when ``frames`` is None)."""
    count = 1 if frames is None else frames
    t, c, y, x = torch.meshgrid(torch.arange(count), torch.arange(3), torch.arange(height), torch.arange(width),
                                indexing="ij")
    h = (x * 40503) ^ (y * 2654435) ^ (t * 97531) ^ ((c + 5 * camera) * 7919)
    h = ((h ^ (h >> 7)) * 2246822519) & 0xFFFFFFFF
    value = (x * 200 // max(1, width - 1) + y * 55 // max(1, height - 1) + 31 * camera + (h >> 9) % 83) % 256
    grey = (x * 255 // max(1, width - 1) + 17 * t) % 256
    value = torch.where((y < height // 5), grey, value)  # top band: r = g = b
    primary = torch.where(c == (x // 4 + t) % 3, torch.full_like(value, 255), torch.zeros_like(value))
    value = torch.where((y >= height - height // 5) & (x < width // 2), primary, value)  # saturated primaries
    value = torch.where((y >= height // 2) & (y < height // 2 + 2), 100 + 20 * c, value)  # flat band
    out = value.to(torch.uint8)
    return out[0] if frames is None else out


def sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's contiguous bytes."""
    return hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()

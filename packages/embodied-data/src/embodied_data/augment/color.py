"""Colour jitter with torchvision's own functions: one implementation for the ``color_jitter`` op and for the models
that jitter inside their transforms (DreamZero), so every jitter in the project gives torchvision's pixels."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from embodied_data.augment._torchvision import transforms_v1, transforms_v2

__all__ = ["adjust_colors"]


def adjust_colors(frames: torch.Tensor, *, order: Sequence[int], brightness: float | None, contrast: float | None,
                  saturation: float | None, hue: float | None, kernels: str = "v2") -> torch.Tensor:
    """``frames`` ``[..., 3, H, W]`` (uint8, or float in [0, 1]) with ColorJitter's adjustments applied in ``order``
    (0 brightness, 1 contrast, 2 saturation, 3 hue; a None factor is skipped), as torchvision's ColorJitter applies
    its draw (``kernels`` 'v2': transforms.v2.functional, 'v1': transforms.functional)."""
    functional = transforms_v2().functional if kernels == "v2" else transforms_v1().functional
    steps = ((functional.adjust_brightness, brightness), (functional.adjust_contrast, contrast),
             (functional.adjust_saturation, saturation), (functional.adjust_hue, hue))
    for fn_id in order:
        kernel, factor = steps[int(fn_id)]
        if factor is not None:
            frames = kernel(frames, factor)
    return frames

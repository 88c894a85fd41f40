"""Colour jitter with torchvision's own functions: one implementation for the ``color_jitter`` op and for the models
that jitter inside their transforms (DreamZero), so every jitter in the project gives torchvision's pixels."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from embodied_data.augment._torchvision import transforms_v1, transforms_v2

__all__ = ["adjust_colors", "hue_per_colour"]


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
        if factor is None:
            continue
        if kernel is functional.adjust_hue and frames.dtype == torch.uint8:
            frames = hue_per_colour(kernel, frames, factor)
        else:
            frames = kernel(frames, factor)
    return frames


def hue_per_colour(adjust_hue: Callable[[torch.Tensor, float], torch.Tensor], frames: torch.Tensor,
                   factor: float) -> torch.Tensor:
    """torchvision's ``adjust_hue`` on uint8 ``frames`` ``[..., 3, H, W]``, run once per distinct colour.

    The hue shift maps each pixel's colour on its own (RGB -> HSV -> RGB, elementwise), so the kernel is applied
    to the frames' distinct colours laid out as one ``[3, 1, U]`` image and the results are gathered back: the
    same pixels (``tests/data/test_augment_lerobot.py`` compares them bit for bit with the kernel's own call) at
    about half the cost, a decoded camera frame holding 10x fewer colours than pixels.
    """
    if frames.numel() == 0:
        return adjust_hue(frames, factor)
    planes = frames.reshape(-1, 3, frames.shape[-2] * frames.shape[-1]).to(torch.int32)  # [F, 3, HW]
    codes = ((planes[:, 0] << 16) | (planes[:, 1] << 8) | planes[:, 2]).flatten()
    colours, where = torch.unique(codes, sorted=False, return_inverse=True)
    palette = torch.stack([colours >> 16, (colours >> 8) & 255, colours & 255]).to(torch.uint8)  # [3, U]
    shifted = adjust_hue(palette.unsqueeze(1), factor).squeeze(1)  # [3, U]
    pixels = shifted[:, where].reshape(3, planes.shape[0], planes.shape[-1]).transpose(0, 1)  # [F, 3, HW]
    return pixels.reshape(frames.shape).contiguous()

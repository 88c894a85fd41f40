"""SmolVLA's image preprocessing on the model's device (lerobot ``SmolVLAPolicy.prepare_images``).

uint8 frames become float ``x / 255`` (LeRobot's [0, 1] convention), are resized keeping their aspect with
bilinear interpolation (``align_corners=False``, no antialiasing) so that they fit the model resolution, padded
with 0 on the **left and top** (lerobot's ``resize_with_pad`` for SmolVLA; pi0.5 centres instead), and mapped to
``x * 2 - 1``. Doing this on the device in float32 keeps the exact reference values (no uint8 rounding after
the resize) while the frames still cross the DataLoader worker boundary as uint8.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["prepare_images", "resize_with_pad_left_top"]


def resize_with_pad_left_top(images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """float [B, C, h, w] -> [B, C, H, W]: aspect-keeping bilinear resize, zero padding on the left and top."""
    out_h, out_w = size
    h, w = images.shape[-2:]
    if (h, w) == (out_h, out_w):
        return images
    ratio = max(w / out_w, h / out_h)
    new_h, new_w = int(h / ratio), int(w / ratio)
    resized = F.interpolate(images, size=(new_h, new_w), mode="bilinear", align_corners=False)
    return F.pad(resized, (max(0, out_w - new_w), 0, max(0, out_h - new_h), 0), value=0.0)


def prepare_images(slots: tuple[torch.Tensor, ...], size: tuple[int, int]) -> torch.Tensor:
    """Image slots (uint8 [B, 3, h, w] each, or float in [-1, 1] at ``size``) -> float32 [B, C, 3, H, W] in [-1, 1]."""
    out = []
    for index, image in enumerate(slots):
        if image.dtype == torch.uint8:
            x01 = resize_with_pad_left_top(image.to(torch.float32) / 255.0, size)
            out.append(x01 * 2.0 - 1.0)
        else:
            if tuple(image.shape[-2:]) != tuple(size):
                raise ValueError(f"image slot {index}: float images must already be at the model resolution {size} "
                                 f"(got {tuple(image.shape[-2:])}); pass uint8 frames to have them resized")
            out.append(image.to(torch.float32))
    return torch.stack(out, dim=1)

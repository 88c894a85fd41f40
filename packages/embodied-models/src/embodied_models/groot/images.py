"""GR00T's view geometry (N1.6 and N1.7): shortest-edge resize, centre crop by a fraction, resize to the target size.

Isaac-GR00T's N1.7 eval transform (``shortest_image_edge`` 256, ``crop_fraction`` 0.95, target 256): the frame's
shorter side is resized to ``resize_edge`` (aspect kept), the centre ``floor(side * crop_fraction)`` window is cut
out (offsets floored), and the crop is resized to ``size``. Resizes are bicubic with antialiasing (what the
reference's torchvision path uses), on uint8 frames, rounded back to uint8. The reference keeps the aspect ratio
in its final resize and lets the Qwen3-VL processor round to multiples of 32; here the final size is
``data.image_size`` exactly (set it to the aspect-matching size for non-square cameras). LoongForge's N1.6 eval
transform has the same three steps (see ``embodied_models/groot_n1_6/README.md`` for what differs there).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from embodied_models.images import as_frames, to_uint8

__all__ = ["as_uint8_frames", "groot_view"]


def _resize(image: torch.Tensor, height: int, width: int) -> torch.Tensor:
    if tuple(image.shape[-2:]) == (height, width):
        return image
    out = F.interpolate(image[None].float(), size=(height, width), mode="bicubic", align_corners=False,
                        antialias=True)[0]
    return out.round().clamp(0, 255).to(torch.uint8)


def groot_view(image: torch.Tensor, *, size: tuple[int, int], resize_edge: int, crop_fraction: float) -> torch.Tensor:
    """uint8 [3, h, w] -> uint8 [3, H, W] (see the module docstring)."""
    h, w = image.shape[-2:]
    scale = resize_edge / float(min(h, w))
    image = _resize(image, max(1, round(h * scale)), max(1, round(w * scale)))
    if 0.0 < crop_fraction < 1.0:
        h, w = image.shape[-2:]
        crop_h, crop_w = max(1, int(h * crop_fraction)), max(1, int(w * crop_fraction))
        top, left = (h - crop_h) // 2, (w - crop_w) // 2
        image = image[:, top: top + crop_h, left: left + crop_w]
    return _resize(image, *size)


def as_uint8_frames(value: Any, key: str) -> torch.Tensor:
    """A camera value as uint8 frames [T, 3, H, W] (accepts [C, H, W], [T, C, H, W], channels-last, float [0, 1])."""
    return to_uint8(as_frames(value, key))

"""DreamZero's frame pipeline: crop (random in training, centre in eval), bilinear antialiased resize, optional
colour jitter (torchvision v2's functions, through ``embodied_data.augment``: the pixels of LoongForge's
``VideoColorJitter``), then x255 truncated to uint8 (as DreamZero's ``VideoToNumpy``: pixels are truncated, not
rounded).

Every view and frame of a sample share one crop and one jitter draw. Draws come from ``generator`` (a seeded
``torch.Generator`` for per-sample seeding) or from the global torch RNG (which the loader seeds per sample). The
order of draws is DreamZero's: crop top, crop left, then the jitter's order permutation and factors.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch
import torch.nn.functional as F

from embodied_data.augment.color import adjust_colors

__all__ = ["ColorJitter", "CropDraw", "crop_size", "draw_crop", "process_views", "video_from_images"]


@attrs.frozen
class CropDraw:
    """Where the crop sits: ``top``, ``left`` and its size."""

    top: int
    left: int
    height: int
    width: int


@attrs.frozen
class ColorJitter:
    """Brightness / contrast / saturation / hue jitter ranges (factors ``[1-b, 1+b]``, hue ``[-h, h]``)."""

    brightness: float = 0.3
    contrast: float = 0.4
    saturation: float = 0.5
    hue: float = 0.08


def crop_size(height: int, width: int, scale: float) -> tuple[int, int]:
    """``(int(H*s), int(W*s))``."""
    return int(height * scale), int(width * scale)


def draw_crop(height: int, width: int, scale: float, *, training: bool,
              generator: torch.Generator | None) -> CropDraw:
    """A random crop in training (top then left, uniform integers), the centred crop otherwise."""
    th, tw = crop_size(height, width, scale)
    if training:
        top = int(torch.randint(0, height - th + 1, size=(1,), generator=generator)) if height > th else 0
        left = int(torch.randint(0, width - tw + 1, size=(1,), generator=generator)) if width > tw else 0
    else:
        top, left = round((height - th) / 2.0), round((width - tw) / 2.0)
    return CropDraw(top=top, left=left, height=th, width=tw)


def _jitter(x: torch.Tensor, jitter: ColorJitter, generator: torch.Generator | None) -> torch.Tensor:
    """torchvision v2's ColorJitter on float frames: its draws (the order permutation, then the brightness,
    contrast, saturation and hue factors) and its functions (``adjust_colors``), as LoongForge's DreamZero runs it."""
    order = torch.randperm(4, generator=generator).tolist()

    def factor(spread: float, centre: float) -> float:
        return float(torch.empty(1).uniform_(centre - spread, centre + spread, generator=generator))

    return adjust_colors(x, order=order, brightness=factor(jitter.brightness, 1.0),
                         contrast=factor(jitter.contrast, 1.0), saturation=factor(jitter.saturation, 1.0),
                         hue=factor(jitter.hue, 0.0))


def process_views(views: Sequence[torch.Tensor], *, size: tuple[int, int], crop_scale: float, training: bool,
                  jitter: ColorJitter | None, generator: torch.Generator | None) -> tuple[list[torch.Tensor], CropDraw]:
    """Crops, resizes (and jitters) views ``[T, C, H, W]`` uint8; returns ``[T, h, w, C]`` uint8 views."""
    counts = [v.shape[0] for v in views]
    heights = {tuple(v.shape[-2:]) for v in views}
    if len(heights) != 1:
        raise ValueError(f"every camera view must have the same resolution, got {sorted(heights)}")
    x = torch.cat([v.to(torch.float32) / 255.0 for v in views], dim=0)
    height, width = x.shape[-2:]
    draw = draw_crop(int(height), int(width), crop_scale, training=training, generator=generator)
    x = x[..., draw.top:draw.top + draw.height, draw.left:draw.left + draw.width]
    x = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)
    if jitter is not None and training:
        x = _jitter(x, jitter, generator)
    frames = (x.permute(0, 2, 3, 1) * 255).to(torch.uint8)
    return list(torch.split(frames, counts, dim=0)), draw


def video_from_images(images: torch.Tensor, size: Sequence[int] | None) -> torch.Tensor:
    """uint8 ``[B, T, H, W, 3]`` -> float ``[B, 3, T, h, w]`` in [-1, 1], resized (bilinear) to ``size`` (h, w) when
    given: the Wan VAE's input, the same for the model's online encoder and ``precompute-dreamzero``."""
    b, t, h, w, _ = images.shape
    x = images.permute(0, 1, 4, 2, 3).reshape(b * t, 3, h, w).float() / 127.5 - 1.0
    if size is not None and (h, w) != tuple(size):
        x = F.interpolate(x, size=tuple(size), mode="bilinear", align_corners=False)
    return x.unflatten(0, (b, t)).transpose(1, 2)

"""The image augmentation ops (``embodied.image_augmentations`` factories), on torchvision's transforms.v2.

Each op draws with torchvision's own ``make_params`` (or, for lerobot's SharpnessJitter, the one uniform draw it
makes) from torch's global RNG, which the pipeline reseeds per sample (:mod:`embodied_core.data.image_augmentation
.pipeline`), and applies with torchvision's own kernels: no colour or geometry maths of ours, so given the same
draws the pixels are the references' (lerobot, GR00T, LoongForge run these same functions). Frames are
``[..., C, H, W]`` uint8, or float32 in [0, 1] when the pipeline computes in float.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from embodied_data.augment import params as p
from embodied_data.augment._torchvision import transforms_v2
from embodied_data.augment.color import adjust_colors

__all__ = ["ColorJitterOp", "RandomAffineOp", "RandomCropOp", "RandomRotationOp", "ResizeOp", "SharpnessJitterOp",
           "build_color_jitter", "build_random_affine", "build_random_crop", "build_random_rotation", "build_resize",
           "build_sharpness_jitter"]


def _plain(value: Any) -> Any:
    """torchvision's params as JSON values (tensors and tuples -> lists)."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _range(value: p.Range | None) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _interpolation(name: str) -> Any:
    return getattr(transforms_v2().InterpolationMode, name.upper())


class _V2Op:
    """An op that is one torchvision v2 transform: its ``make_params`` draws, its ``transform`` applies."""

    def __init__(self, transform: Any) -> None:
        self.transform = transform

    def draw(self, frames: torch.Tensor, *, input_size: tuple[int, int]) -> dict[str, Any]:
        return _plain(self.transform.make_params([frames]))

    def apply(self, frames: torch.Tensor, params: Mapping[str, Any]) -> torch.Tensor:
        return self.transform.transform(frames, dict(params))


class ColorJitterOp(_V2Op):
    """torchvision's ColorJitter; ``kernels: v1`` applies the draws with transforms.functional (the same draws:
    ``randperm(4)``, then the factors in brightness, contrast, saturation, hue order)."""

    size_dependent = False

    def __init__(self, options: p.ColorJitterParams) -> None:
        super().__init__(transforms_v2().ColorJitter(brightness=_range(options.brightness),
                                                     contrast=_range(options.contrast),
                                                     saturation=_range(options.saturation), hue=_range(options.hue)))
        self.kernels = options.kernels

    def apply(self, frames: torch.Tensor, params: Mapping[str, Any]) -> torch.Tensor:
        return adjust_colors(frames, order=params["fn_idx"], brightness=params["brightness_factor"],
                             contrast=params["contrast_factor"], saturation=params["saturation_factor"],
                             hue=params["hue_factor"], kernels=self.kernels)


class SharpnessJitterOp:
    """A uniformly drawn sharpness factor (lerobot's SharpnessJitter) applied by torchvision's adjust_sharpness."""

    size_dependent = False

    def __init__(self, options: p.SharpnessJitterParams) -> None:
        sharpness = options.sharpness
        self.low, self.high = (sharpness if isinstance(sharpness, tuple)
                               else (max(0.0, 1.0 - sharpness), 1.0 + sharpness))

    def draw(self, frames: torch.Tensor, *, input_size: tuple[int, int]) -> dict[str, Any]:
        return {"sharpness_factor": torch.empty(1).uniform_(self.low, self.high).item()}

    def apply(self, frames: torch.Tensor, params: Mapping[str, Any]) -> torch.Tensor:
        """torchvision's ``adjust_sharpness`` on a channels-last copy of the frames, returned contiguous.

        The same pixels as on the contiguous frames (the rounded 3x3 blur of integers is exact whatever the
        summation order; ``tests/data/test_augment_lerobot.py`` compares the two layouts bit for bit), and
        5-20x faster on CPU: torch's depthwise convolution has a fast kernel only for channels-last input.
        """
        batched = frames if frames.ndim >= 4 else frames.unsqueeze(0)
        lead = batched.shape[:-3]
        # clone, not .contiguous(channels_last): a decoded frame is an HWC buffer seen as CHW, which already
        # counts as channels-last but with strides the fast kernel does not take (27 ms instead of 1.3 ms)
        flat = batched.reshape(-1, *batched.shape[-3:]).clone(memory_format=torch.channels_last)
        out = transforms_v2().functional.adjust_sharpness(flat, sharpness_factor=params["sharpness_factor"])
        out = out.contiguous().reshape(*lead, *out.shape[-3:])
        return out if frames.ndim >= 4 else out.squeeze(0)


class RandomAffineOp(_V2Op):
    """torchvision's RandomAffine."""

    def __init__(self, options: p.RandomAffineParams) -> None:
        super().__init__(transforms_v2().RandomAffine(
            degrees=_range(options.degrees), translate=_range(options.translate), scale=_range(options.scale),
            shear=_range(options.shear), interpolation=_interpolation(options.interpolation), fill=options.fill))


class RandomRotationOp(_V2Op):
    """torchvision's RandomRotation."""

    def __init__(self, options: p.RandomRotationParams) -> None:
        super().__init__(transforms_v2().RandomRotation(
            degrees=_range(options.degrees), interpolation=_interpolation(options.interpolation), fill=options.fill))


class RandomCropOp:
    """torchvision's RandomCrop of a fixed size, or of ``(int(H * scale), int(W * scale))`` of each input."""

    def __init__(self, options: p.RandomCropParams) -> None:
        self.size, self.scale = options.size, options.scale
        self._crops: dict[tuple[int, int], Any] = {}

    def _crop(self, height: int, width: int) -> Any:
        size = self.size or (int(height * self.scale), int(width * self.scale))  # type: ignore[operator]
        if size not in self._crops:
            self._crops[size] = transforms_v2().RandomCrop(size)
        return self._crops[size]

    def draw(self, frames: torch.Tensor, *, input_size: tuple[int, int]) -> dict[str, Any]:
        height, width = int(frames.shape[-2]), int(frames.shape[-1])
        return _plain(self._crop(height, width).make_params([frames]))

    def apply(self, frames: torch.Tensor, params: Mapping[str, Any]) -> torch.Tensor:
        crop = self._crop(int(frames.shape[-2]), int(frames.shape[-1]))
        return crop.transform(frames, dict(params))


class ResizeOp:
    """torchvision's resize to a fixed size, or back to the camera's size before the first op. No draw."""

    size_dependent = False

    def __init__(self, options: p.ResizeParams) -> None:
        self.size = options.size
        self.input_size_dependent = options.size is None  # "back to the input size": the drawing camera's size
        self.interpolation = options.interpolation
        self.antialias = options.antialias

    def draw(self, frames: torch.Tensor, *, input_size: tuple[int, int]) -> dict[str, Any]:
        return {"size": list(self.size or input_size)}

    def apply(self, frames: torch.Tensor, params: Mapping[str, Any]) -> torch.Tensor:
        size = [int(s) for s in params["size"]]
        if list(frames.shape[-2:]) == size:
            return frames  # torchvision's resize also returns the input unchanged at its own size
        return transforms_v2().functional.resize(frames, size, interpolation=_interpolation(self.interpolation),
                                                 antialias=self.antialias)


def build_color_jitter(options: p.ColorJitterParams) -> ColorJitterOp:
    """Factory of ``color_jitter``."""
    return ColorJitterOp(options)


def build_sharpness_jitter(options: p.SharpnessJitterParams) -> SharpnessJitterOp:
    """Factory of ``sharpness_jitter``."""
    return SharpnessJitterOp(options)


def build_random_affine(options: p.RandomAffineParams) -> RandomAffineOp:
    """Factory of ``random_affine``."""
    return RandomAffineOp(options)


def build_random_rotation(options: p.RandomRotationParams) -> RandomRotationOp:
    """Factory of ``random_rotation``."""
    return RandomRotationOp(options)


def build_random_crop(options: p.RandomCropParams) -> RandomCropOp:
    """Factory of ``random_crop``."""
    return RandomCropOp(options)


def build_resize(options: p.ResizeParams) -> ResizeOp:
    """Factory of ``resize``."""
    return ResizeOp(options)

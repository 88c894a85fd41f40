"""Parameters of the image augmentation ops (``ImageOpSpec.params``): what an op entry of
``data.image_augmentation.ops`` may set, with the bounds torchvision accepts. No torch here.

A range is a number ``x`` (torchvision's meaning: ``[max(0, 1 - x), 1 + x]`` for factors, ``[-x, x]`` for hue and
angles) or a ``[low, high]`` pair.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = ["ColorJitterParams", "RandomAffineParams", "RandomCropParams", "RandomRotationParams", "ResizeParams",
           "SharpnessJitterParams"]

Range = float | tuple[float, float]
Interpolation = Literal["nearest", "bilinear", "bicubic"]


def _factor_range(instance: Any, attribute: attrs.Attribute, value: Range | None) -> None:
    if value is None:
        return
    if isinstance(value, tuple):
        low, high = value
        if not 0.0 <= low <= high:
            raise ValueError(f"[low, high] must satisfy 0 <= low <= high (got {list(value)})")
    elif value < 0:
        raise ValueError(f"must be >= 0 (a factor range [max(0, 1 - x), 1 + x]) or [low, high] (got {value})")


def _hue_range(instance: Any, attribute: attrs.Attribute, value: Range | None) -> None:
    if value is None:
        return
    if isinstance(value, tuple):
        low, high = value
        if not -0.5 <= low <= high <= 0.5:
            raise ValueError(f"[low, high] must satisfy -0.5 <= low <= high <= 0.5 (got {list(value)})")
    elif not 0.0 <= value <= 0.5:
        raise ValueError(f"must be in [0, 0.5] (hue shift range [-x, x]) or [low, high] (got {value})")


def _angle_range(instance: Any, attribute: attrs.Attribute, value: Range | None) -> None:
    if value is None:
        return
    if isinstance(value, tuple):
        if value[0] > value[1]:
            raise ValueError(f"[low, high] must satisfy low <= high (got {list(value)})")
    elif value < 0:
        raise ValueError(f"must be >= 0 (angle range [-x, x] in degrees) or [low, high] (got {value})")


def _unit_pair(instance: Any, attribute: attrs.Attribute, value: tuple[float, float] | None) -> None:
    if value is not None and not all(0.0 <= v <= 1.0 for v in value):
        raise ValueError(f"both fractions must be in [0, 1] (got {list(value)})")


def _scale_pair(instance: Any, attribute: attrs.Attribute, value: tuple[float, float] | None) -> None:
    if value is not None and not 0.0 < value[0] <= value[1]:
        raise ValueError(f"[low, high] must satisfy 0 < low <= high (got {list(value)})")


def _crop_scale(instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not 0.0 < value <= 1.0:
        raise ValueError(f"must be in (0, 1] (the kept fraction of each side) (got {value})")
    if instance is not None and (value is None) == (instance.size is None):
        raise ValueError(f"give exactly one of size and scale (got size={instance.size}, scale={value})")


def _size(instance: Any, attribute: attrs.Attribute, value: tuple[int, int] | None) -> None:
    if value is not None and min(value) < 1:
        raise ValueError(f"both sides must be >= 1 (got {list(value)})")


@attrs.define(kw_only=True)
class ColorJitterParams:
    """torchvision's ColorJitter: the four adjustments in a random order, each factor drawn uniformly."""

    brightness: Range | None = attrs.field(default=None, validator=_factor_range)
    """Brightness factor range (x: [max(0, 1 - x), 1 + x]); None: no brightness change."""
    contrast: Range | None = attrs.field(default=None, validator=_factor_range)
    """Contrast factor range; None: no contrast change."""
    saturation: Range | None = attrs.field(default=None, validator=_factor_range)
    """Saturation factor range; None: no saturation change."""
    hue: Range | None = attrs.field(default=None, validator=_hue_range)
    """Hue shift range within [-0.5, 0.5] (x: [-x, x]); None: no hue change."""
    kernels: Literal["v2", "v1"] = "v2"
    """Which torchvision functions apply the factors: 'v2' (transforms.v2.functional) or 'v1'
    (transforms.functional, what LoongForge's cosmos3 runs by default); the draws are the same, some pixels
    differ by one level after truncation to uint8."""


@attrs.define(kw_only=True)
class SharpnessJitterParams:
    """A sharpness factor drawn uniformly per draw (lerobot's SharpnessJitter), applied by torchvision's
    adjust_sharpness (0: blurred, 1: unchanged, 2: sharpened)."""

    sharpness: Range = attrs.field(default=(0.5, 1.5), validator=_factor_range)
    """Sharpness factor range (x: [max(0, 1 - x), 1 + x])."""


@attrs.define(kw_only=True)
class RandomAffineParams:
    """torchvision's RandomAffine (angle, then translation, scale and shear, each drawn uniformly)."""

    degrees: Range = attrs.field(default=0.0, validator=_angle_range)
    """Rotation angle range in degrees (x: [-x, x])."""
    translate: tuple[float, float] | None = attrs.field(default=None, validator=_unit_pair)
    """Largest horizontal and vertical shift as fractions of the width and height; None: no shift."""
    scale: tuple[float, float] | None = attrs.field(default=None, validator=_scale_pair)
    """Scale factor range; None: no scaling."""
    shear: Range | None = attrs.field(default=None, validator=_angle_range)
    """Horizontal shear angle range in degrees; None: no shear."""
    interpolation: Literal["nearest", "bilinear"] = "nearest"
    """Resampling of the warped frames."""
    fill: float = 0.0
    """Value of pixels the warp leaves uncovered."""


@attrs.define(kw_only=True)
class RandomRotationParams:
    """torchvision's RandomRotation (one angle drawn uniformly)."""

    degrees: Range = attrs.field(default=5.0, validator=_angle_range)
    """Angle range in degrees (x: [-x, x])."""
    interpolation: Literal["nearest", "bilinear"] = "nearest"
    """Resampling of the rotated frames."""
    fill: float = 0.0
    """Value of pixels the rotation leaves uncovered."""


@attrs.define(kw_only=True)
class RandomCropParams:
    """torchvision's RandomCrop at a random place (top, then left, uniform integers)."""

    size: tuple[int, int] | None = attrs.field(default=None, validator=_size)
    """(height, width) of the crop; exactly one of size and scale."""
    scale: float | None = attrs.field(default=None, validator=_crop_scale)
    """Kept fraction of each side: a crop of (int(H * scale), int(W * scale)); exactly one of size and scale."""


@attrs.define(kw_only=True)
class ResizeParams:
    """torchvision's resize (no randomness)."""

    size: tuple[int, int] | None = attrs.field(default=None, validator=_size)
    """(height, width) after the resize; None: the size the camera's frames had before the first op."""
    interpolation: Interpolation = "bilinear"
    """Resampling filter."""
    antialias: bool = True
    """Antialias when down-scaling (torchvision's default)."""

"""Camera-frame helpers shared by the model plugins' transforms."""

from __future__ import annotations

from typing import Any

import torch

from embodied_core.errors import DataError

__all__ = ["as_frames", "as_uint8_image", "to_uint8"]


def as_uint8_image(value: Any, key: str) -> torch.Tensor:
    """A camera frame as contiguous uint8 ``[3, h, w]``.

    Accepts CHW or HWC, a one-frame history ``[1, C, H, W]``, one or three channels, and float frames in LeRobot's
    [0, 1] convention (video decoding gives uint8 / 255, so the round trip back to uint8 is lossless). Anything
    else is a DataError naming the camera ``key`` and the shape received.
    """
    image = torch.as_tensor(value)
    if image.ndim == 4 and image.shape[0] == 1:
        image = image[0]
    if image.ndim != 3:
        raise DataError(f"camera {key}: expected an image [C, H, W] (or [1, C, H, W]), got shape {tuple(image.shape)}")
    if image.shape[0] not in (1, 3) and image.shape[-1] in (1, 3):
        image = image.permute(2, 0, 1)
    if image.shape[0] == 1:
        image = image.expand(3, -1, -1)
    if image.shape[0] != 3:
        raise DataError(f"camera {key}: expected 1 or 3 channels, got shape {tuple(image.shape)}")
    return to_uint8(image).contiguous()


def as_frames(value: Any, key: str) -> torch.Tensor:
    """A camera value as frames ``[T, 3, h, w]`` in its own dtype (uint8, or float in LeRobot's [0, 1]).

    Accepts ``[T, C, H, W]``, one image ``[C, H, W]`` (T = 1), channels-last layouts and one or three channels;
    anything else is a DataError naming the camera ``key`` and the shape received.
    """
    frames = torch.as_tensor(value)
    if frames.ndim == 3:
        frames = frames[None]
    if frames.ndim != 4:
        raise DataError(f"camera {key}: expected frames [T, C, H, W] or an image [C, H, W], got shape "
                        f"{tuple(frames.shape)}")
    if frames.shape[1] not in (1, 3) and frames.shape[-1] in (1, 3):
        frames = frames.permute(0, 3, 1, 2)
    if frames.shape[1] == 1:
        frames = frames.expand(-1, 3, -1, -1)
    if frames.shape[1] != 3:
        raise DataError(f"camera {key}: expected 1 or 3 channels, got shape {tuple(frames.shape)}")
    return frames


def to_uint8(frames: torch.Tensor) -> torch.Tensor:
    """uint8 frames as they are; float frames in [0, 1] scaled, rounded and clipped to uint8 (lossless for frames a
    decoder gave as uint8 / 255)."""
    if frames.dtype == torch.uint8:
        return frames
    return (frames.float() * 255.0).round().clamp(0, 255).to(torch.uint8)

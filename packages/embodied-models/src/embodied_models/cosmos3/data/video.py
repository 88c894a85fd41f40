"""Fitting a ``[C, T, H, W]`` uint8 video onto a Cosmos3 resolution bucket: frame count, scale, pad."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F

__all__ = ["aligned_frames", "fit_to_bucket", "one_thread", "scaled_size"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Runs the enclosed torch ops on one intra-op thread.

    torch's CPU interpolation kernels split the output across threads, and the split changes the last bit of
    some values (measured on torch 2.13: bilinear on a 5x3x180x320 float video, 48,980 values one ulp apart
    between 1 and 2 threads). Truncation to uint8 turns that bit into a whole level, so the frames would depend on
    the machine's core count and on ``--num-workers`` (DataLoader workers run on one thread, the main process on
    all). One thread everywhere gives every run the frames LoongForge's loader workers produce.
    """
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def aligned_frames(frames: int, compression: int) -> int:
    """Frames kept so that ``(T - 1)`` is a multiple of the VAE's temporal ``compression``: ``(T-1)//c*c + 1``."""
    return min(frames, max(1, (frames - 1) // compression * compression + 1))


def scaled_size(height: int, width: int, bucket_h: int, bucket_w: int) -> tuple[int, int]:
    """``(h, w)`` of the content inside the bucket: the aspect ratio kept, never enlarged, rounded half up."""
    ratio = min(bucket_w / width, bucket_h / height, 1.0)
    return int(ratio * height + 0.5), int(ratio * width + 0.5)


def fit_to_bucket(video: torch.Tensor, bucket_h: int, bucket_w: int) -> tuple[torch.Tensor, int, int]:
    """``video`` ``[..., H, W]`` uint8 scaled into ``bucket_h x bucket_w`` and padded on the bottom and right.

    Down-scaling is bicubic with antialias on float values, clamped to [0, 255] and rounded back to uint8, run as
    LoongForge runs it (torchvision's ``resize`` of the ``[C, T, H, W]`` video: ``C`` images of ``T`` channels, in
    the memory layout the video arrives in): antialiased kernels need not round alike in other layouts. The pad
    replicates the edge when a pad is at least as large as the content along its side (a reflection would not
    fit), else it reflects; padding only copies pixels. Returns ``(video, content_h, content_w)``.
    """
    height, width = video.shape[-2:]
    new_h, new_w = scaled_size(height, width, bucket_h, bucket_w)
    lead = video.shape[:-2]
    if (new_h, new_w) != (height, width):
        # [C, T, H, W] stays as it is (a view keeps its strides); fewer dims get a leading 1, as torchvision does
        images = video.reshape(-1, *video.shape[-3:]) if video.ndim >= 4 else video.reshape(1, -1, height, width)
        with one_thread():  # thread-count-independent last bits (see one_thread)
            scaled = F.interpolate(images.to(torch.float32), size=(new_h, new_w), mode="bicubic",
                                   align_corners=False, antialias=True)
        video = scaled.clamp(0, 255).round().to(video.dtype).reshape(*lead, new_h, new_w)
    pad_right, pad_bottom = bucket_w - new_w, bucket_h - new_h
    if pad_right or pad_bottom:
        edge = pad_right >= new_w or pad_bottom >= new_h
        rows, cols = _pad_index(new_h, pad_bottom, edge=edge), _pad_index(new_w, pad_right, edge=edge)
        video = video.index_select(-2, rows).index_select(-1, cols)  # stays uint8: pixels are only copied
    return video, new_h, new_w


def _pad_index(size: int, pad: int, *, edge: bool) -> torch.Tensor:
    """Source index of each output position along one side padded by ``pad`` at the end: the last pixel
    repeated (``edge``) or mirrored without repeating the border pixel (reflect, ``pad < size``)."""
    index = torch.arange(size + pad)
    return index.clamp(max=size - 1) if edge else torch.where(index < size, index, 2 * (size - 1) - index)

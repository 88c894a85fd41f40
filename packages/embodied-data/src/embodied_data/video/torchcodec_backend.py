"""``torchcodec`` backend (default): FFmpeg through torchcodec, frames located by index = round(t * fps)."""

from __future__ import annotations

from typing import Any

import torch

from embodied_core.errors import DataError
from embodied_data.video.base import VideoBackend

__all__ = ["TorchCodecBackend"]


class TorchCodecBackend(VideoBackend):
    """Decodes with ``torchcodec.decoders.VideoDecoder`` (one per file, cached).

    Frames are located like LeRobot does: index ``round(t * average_fps)``, then the caller checks the returned
    pts against ``tolerance_s``. ``seek_mode="approximate"`` skips the scan of the whole file at open; the pts
    check catches files whose frame rate is not constant.
    """

    name = "torchcodec"
    requires = ("torchcodec",)
    preload_modules = ("torchcodec.decoders",)

    def __init__(self, *, cache_size: int = 8, seek_mode: str = "approximate", num_threads: int = 1) -> None:
        super().__init__(cache_size=cache_size)
        self.seek_mode = seek_mode
        self.num_threads = num_threads

    def _open(self, path: str) -> Any:
        from torchcodec.decoders import VideoDecoder

        try:
            return VideoDecoder(path, seek_mode=self.seek_mode, dimension_order="NCHW",
                                num_ffmpeg_threads=self.num_threads)
        except (RuntimeError, ValueError) as exc:
            raise self.unsupported(path, f"torchcodec failed to open it ({exc})") from None

    def _decode(self, handle: Any, path: str, timestamps: list[float]) -> tuple[torch.Tensor, list[float]]:
        meta = handle.metadata
        fps = meta.average_fps
        num_frames = meta.num_frames
        indices = [round(t * fps) for t in timestamps]
        for t, i in zip(timestamps, indices, strict=True):
            if i < 0 or (num_frames is not None and i >= num_frames):
                raise DataError(f"{path}: no frame at t={t:.6f}s (frame {i}; the file has {num_frames} frames "
                                f"at {fps:g} fps)")
        try:
            batch = handle.get_frames_at(indices=indices)
        except (RuntimeError, IndexError) as exc:
            raise self.unsupported(path, f"torchcodec failed to decode frames {indices} ({exc}); the header lists "
                                         f"{num_frames} frames, so a truncated or damaged file is likely") from None
        return batch.data, batch.pts_seconds.tolist()

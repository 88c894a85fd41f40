"""``torchvision_av`` backend: ``torchvision.io.VideoReader`` (removed from torchvision 0.26 on)."""

from __future__ import annotations

from typing import Any

import torch

from embodied_data.video.base import UnsupportedVideoError, VideoBackend, backends_that_can_decode

__all__ = ["TorchvisionAVBackend"]


class TorchvisionAVBackend(VideoBackend):
    """Decodes with torchvision's ``VideoReader`` (its PyAV path): seek to a timestamp, take the next frame.

    torchvision 0.26 removed its video decoding API in favour of torchcodec; with such a version this backend
    refuses to start with an error naming the backends that work.
    """

    name = "torchvision_av"
    requires = ("torchvision", "av")
    preload_modules = ("torchvision", "av")

    @staticmethod
    def available() -> str | None:
        """None when usable, else why not."""
        import torchvision

        if not hasattr(torchvision.io, "VideoReader"):
            return (f"torchvision {torchvision.__version__} has no video reader (torchvision.io.VideoReader was "
                    "removed in 0.26)")
        return None

    def __init__(self, *, cache_size: int = 8) -> None:
        super().__init__(cache_size=cache_size)
        reason = self.available()
        if reason is not None:  # refuse at construction: before training starts, not at the first video
            others = [b for b in backends_that_can_decode(None) if b != self.name]
            raise UnsupportedVideoError(f"video backend 'torchvision_av' cannot decode videos: {reason}; use "
                                        f"--video-backend with one of: {', '.join(others) or 'none installed'}")

    def _open(self, path: str) -> Any:
        import torchvision

        torchvision.set_video_backend("pyav")
        return torchvision.io.VideoReader(path, "video")

    def _decode(self, handle: Any, path: str, timestamps: list[float]) -> tuple[torch.Tensor, list[float]]:
        frames, pts = [], []
        for t in timestamps:
            try:
                item = next(handle.seek(t))
            except StopIteration:
                raise self.unsupported(path, f"no frame at t={t:.6f}s") from None
            frames.append(item["data"])
            pts.append(float(item["pts"]))
        return torch.stack(frames).contiguous(), pts

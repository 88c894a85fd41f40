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

    @staticmethod
    def available() -> str | None:
        """None when usable, else why not."""
        import torchvision

        if not hasattr(torchvision.io, "VideoReader"):
            return (f"torchvision {torchvision.__version__} has no video reader (torchvision.io.VideoReader was "
                    "removed in 0.26)")
        return None

    def _open(self, path: str) -> Any:
        reason = self.available()
        if reason is not None:
            raise UnsupportedVideoError(f"video backend 'torchvision_av' cannot decode {path}: {reason}; use "
                                        f"--video-backend {' or '.join(backends_that_can_decode('h264'))}")
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

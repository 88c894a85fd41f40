"""``opencv`` backend: ``cv2.VideoCapture`` (OpenCV's bundled FFmpeg, which has no AV1 decoder)."""

from __future__ import annotations

from typing import Any

import attrs
import torch

from embodied_data.video.base import VideoBackend

__all__ = ["OpenCVBackend"]


@attrs.define
class _State:
    capture: Any
    fps: float
    position: int = 0  # index of the frame the next read() returns


class OpenCVBackend(VideoBackend):
    """Decodes with OpenCV: frame index ``round(t * fps)``, BGR converted to RGB.

    OpenCV's YUV->RGB conversion differs from FFmpeg's by a few grey levels (see tests/data/test_video_backends.py
    for the measured tolerance); AV1 files are refused with the list of backends that can decode them.
    """

    name = "opencv"
    requires = ("cv2",)
    preload_modules = ("cv2",)
    unsupported_codecs = frozenset({"av1"})

    def _open(self, path: str) -> Any:
        import cv2

        capture = cv2.VideoCapture(path, cv2.CAP_FFMPEG)
        if not capture.isOpened():
            raise self.unsupported(path, "cv2.VideoCapture could not open it")
        fps = capture.get(cv2.CAP_PROP_FPS)
        return _State(capture=capture, fps=float(fps) if fps > 0 else 30.0)

    def _close(self, handle: Any) -> None:
        handle.capture.release()

    def _decode(self, handle: Any, path: str, timestamps: list[float]) -> tuple[torch.Tensor, list[float]]:
        import cv2

        frames: dict[int, tuple[torch.Tensor, float]] = {}
        for index in sorted({round(t * handle.fps) for t in timestamps}):
            if index != handle.position:
                handle.capture.set(cv2.CAP_PROP_POS_FRAMES, index)
            ok, bgr = handle.capture.read()
            if not ok or bgr is None:
                handle.position = -1
                raise self.unsupported(path, f"cv2.VideoCapture.read() returned no frame {index}")
            handle.position = index + 1
            rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            pts = handle.capture.get(cv2.CAP_PROP_POS_MSEC) / 1000.0
            frames[index] = (torch.from_numpy(rgb).permute(2, 0, 1), pts)
        picked = [frames[round(t * handle.fps)] for t in timestamps]
        return torch.stack([f for f, _ in picked]).contiguous(), [p for _, p in picked]

"""``decord`` backend: ``decord.VideoReader`` (no AV1 decoder; wheels exist only for older Pythons)."""

from __future__ import annotations

from typing import Any

import torch

from embodied_core.errors import DataError
from embodied_data.video.base import VideoBackend

__all__ = ["DecordBackend"]


class DecordBackend(VideoBackend):
    """Decodes with decord: frame index ``round(t * fps)``, pts from ``get_frame_timestamp``."""

    name = "decord"
    requires = ("decord",)
    preload_modules = ("decord",)
    unsupported_codecs = frozenset({"av1"})

    def _open(self, path: str) -> Any:
        import decord

        try:
            return decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        except decord.DECORDError as exc:
            raise self.unsupported(path, f"decord failed to open it ({exc})") from None

    def _decode(self, handle: Any, path: str, timestamps: list[float]) -> tuple[torch.Tensor, list[float]]:
        fps = float(handle.get_avg_fps())
        indices = [round(t * fps) for t in timestamps]
        num_frames = len(handle)
        for t, i in zip(timestamps, indices, strict=True):
            if not 0 <= i < num_frames:
                raise DataError(f"{path}: no frame at t={t:.6f}s (frame {i}; the file has {num_frames} frames)")
        batch = handle.get_batch(indices).asnumpy()  # [N, H, W, C] uint8 RGB
        pts = [float(start) for start, _ in handle.get_frame_timestamp(indices)]
        return torch.from_numpy(batch).permute(0, 3, 1, 2).contiguous(), pts

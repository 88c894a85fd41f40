"""``pyav`` backend: FFmpeg through PyAV, seeking to the keyframe before a timestamp and decoding forward."""

from __future__ import annotations

from typing import Any

import attrs
import torch

from embodied_core.errors import DataError
from embodied_data.video.base import VideoBackend

__all__ = ["PyAVBackend"]

_SEEK_AHEAD_S = 2.0
"""A target further ahead than this from the last decoded frame is reached by seeking, not by decoding through."""


@attrs.define
class _State:
    container: Any
    stream: Any
    period: float
    frames: Any = None  # the running decode generator
    last: Any = None  # the last decoded av.VideoFrame


class PyAVBackend(VideoBackend):
    """Decodes with PyAV (``to_ndarray("rgb24")``, the same conversion torchcodec uses: identical pixels).

    Consecutive requests in one file continue the running decode instead of seeking again, so the history
    frames of a sample (``t - 1/fps, t``) cost one seek.
    """

    name = "pyav"
    requires = ("av",)
    preload_modules = ("av",)

    def _open(self, path: str) -> Any:
        import av

        try:
            container = av.open(path)
        except av.FFmpegError as exc:
            raise self.unsupported(path, f"PyAV failed to open it ({exc})") from None
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        return _State(container=container, stream=stream, period=1.0 / float(rate) if rate else 1.0 / 30)

    def _close(self, handle: Any) -> None:
        handle.container.close()

    def _seek(self, state: _State, target: float) -> None:
        stream = state.stream
        offset = int(max(target, 0.0) / float(stream.time_base))
        state.container.seek(offset, stream=stream, backward=True, any_frame=False)
        state.frames = state.container.decode(stream)
        state.last = None

    def _next(self, state: _State, path: str, target: float) -> Any:
        import av

        try:
            frame = next(state.frames)
        except StopIteration:
            raise DataError(f"{path}: no frame at t={target:.6f}s (the stream ends before it)") from None
        except av.FFmpegError as exc:
            raise self.unsupported(path, f"PyAV failed to decode ({exc})") from None
        state.last = frame
        return frame

    def _frame_at(self, state: _State, path: str, target: float) -> Any:
        half = state.period / 2
        last = state.last
        if last is not None and abs(last.time - target) < half:
            return last
        if state.frames is None or last is None or target < last.time or target > last.time + _SEEK_AHEAD_S:
            self._seek(state, target)
        frame = self._next(state, path, target)
        if frame.time > target + half:  # the seek landed after the target (inexact index): back off once
            self._seek(state, max(target - 1.0, 0.0))
            frame = self._next(state, path, target)
        while frame.time < target - half:
            frame = self._next(state, path, target)
        return frame

    def _decode(self, handle: Any, path: str, timestamps: list[float]) -> tuple[torch.Tensor, list[float]]:
        order = sorted(range(len(timestamps)), key=timestamps.__getitem__)
        frames: list[torch.Tensor | None] = [None] * len(timestamps)
        pts: list[float] = [0.0] * len(timestamps)
        for i in order:
            frame = self._frame_at(handle, path, timestamps[i])
            frames[i] = torch.from_numpy(frame.to_ndarray(format="rgb24")).permute(2, 0, 1)
            pts[i] = float(frame.time)
        return torch.stack(frames).contiguous(), pts  # type: ignore[arg-type]

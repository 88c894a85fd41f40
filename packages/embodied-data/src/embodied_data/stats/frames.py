"""Sampled camera frames for image stats (decoded with PyAV, independent of the training video backend).

Image stats are estimated from a few frames per episode, spread evenly over it, as LeRobot does. Frames
are located by timestamp (``from_timestamp + k / fps``) and the nearest decoded frame within half a frame
period is taken; a frame that cannot be found is an error, never a blank image.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from embodied_core.errors import DataError

__all__ = ["decode_frames_at", "sample_positions"]


def sample_positions(length: int, num_samples: int) -> list[int]:
    """``num_samples`` frame positions spread evenly over ``[0, length)`` (all of them when fewer)."""
    if length <= 0:
        return []
    if length <= num_samples:
        return list(range(length))
    return sorted({round(x) for x in np.linspace(0, length - 1, num_samples)})


def decode_frames_at(path: Path, timestamps: Sequence[float], *, fps: float, episode: int | None = None) -> np.ndarray:
    """uint8 ``[N, 3, H, W]`` frames of ``path`` at ``timestamps`` (seconds, ascending order not required)."""
    import av

    path = Path(path)
    where = f"{path}" + (f" (episode {episode})" if episode is not None else "")
    if not path.is_file():
        raise DataError(f"video file missing: {where}")
    tolerance = 0.5 / fps
    order = sorted(range(len(timestamps)), key=lambda i: timestamps[i])
    out: list[np.ndarray | None] = [None] * len(timestamps)
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            decoder = None
            last_time = -np.inf
            for i in order:
                target = float(timestamps[i])
                # Seek when the target is behind us or far ahead (about a second): decoding forward is cheaper
                # for close targets, a keyframe seek for distant ones.
                if decoder is None or target < last_time - tolerance or target > last_time + 1.0:
                    container.seek(max(0, int(target / stream.time_base)), stream=stream, backward=True)
                    decoder = container.decode(stream)
                for frame in decoder:
                    last_time = float(frame.pts * stream.time_base)
                    if last_time >= target - tolerance:
                        break
                else:
                    raise DataError(f"{where}: no frame at t={target:.4f}s (the video ends at {last_time:.4f}s)")
                if abs(last_time - target) > tolerance:
                    raise DataError(f"{where}: nearest frame to t={target:.4f}s is at {last_time:.4f}s")
                out[i] = frame.to_ndarray(format="rgb24").transpose(2, 0, 1)
    except av.error.FFmpegError as exc:
        raise DataError(f"cannot decode {where}: {exc}") from None
    return np.stack(out)  # type: ignore[arg-type]

"""Episode videos with the project's video stack (PyAV through :func:`embodied_data.synth.encode.write_mp4`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["GRID_EPISODES", "prepare_frame", "write_episode_video", "write_grid_video"]

GRID_EPISODES = 4
"""Episodes tiled into ``grid.mp4`` (2 x 2)."""

_MIN_SIDE = 192  # small renders (synth_reach's 96 px) are enlarged by an integer factor so they stay visible
_GRID_TILE_HEIGHT = 240


def prepare_frame(frame: np.ndarray) -> np.ndarray:
    """uint8 HxWx3 with even sides, enlarged (nearest) when smaller than 192 px."""
    frame = np.ascontiguousarray(frame, dtype=np.uint8)
    if frame.ndim == 2:
        frame = np.repeat(frame[..., None], 3, axis=2)
    factor = max(1, -(-_MIN_SIDE // min(frame.shape[:2])))
    if factor > 1:
        frame = frame.repeat(factor, axis=0).repeat(factor, axis=1)
    height, width = frame.shape[:2]
    return frame[: height - height % 2, : width - width % 2]


def _encoder() -> str:
    from embodied_data.synth.encode import pick_encoder

    return pick_encoder()[0]


def write_episode_video(path: Path, frames: Sequence[np.ndarray], *, fps: float) -> Path:
    """Writes one episode's frames to ``path`` (mp4); returns ``path``."""
    from embodied_data.synth.encode import write_mp4

    write_mp4(path, (prepare_frame(f) for f in frames), fps=max(1, round(fps)), encoder=_encoder())
    return path


def _tile(frame: np.ndarray) -> np.ndarray:
    from PIL import Image

    frame = prepare_frame(frame)
    height, width = frame.shape[:2]
    new_width = max(2, round(width * _GRID_TILE_HEIGHT / height) // 2 * 2)
    return np.asarray(Image.fromarray(frame).resize((new_width, _GRID_TILE_HEIGHT), Image.Resampling.BILINEAR))


def write_grid_video(path: Path, episodes: Sequence[Sequence[np.ndarray]], *, fps: float) -> Path:
    """Tiles up to :data:`GRID_EPISODES` episodes 2 x 2 (shorter ones hold their last frame); returns ``path``."""
    from embodied_data.synth.encode import write_mp4

    tiles = [[_tile(f) for f in frames] for frames in episodes[:GRID_EPISODES] if len(frames)]
    if not tiles:
        raise ValueError("no frames to tile")
    length = max(len(t) for t in tiles)
    blank = np.zeros_like(tiles[0][0])
    columns = 2 if len(tiles) > 1 else 1
    rows = -(-len(tiles) // columns)

    def grid(step: int) -> np.ndarray:
        cells = [t[min(step, len(t) - 1)] for t in tiles] + [blank] * (rows * columns - len(tiles))
        return np.concatenate([np.concatenate(cells[r * columns : (r + 1) * columns], axis=1) for r in range(rows)])

    write_mp4(path, (grid(i) for i in range(length)), fps=max(1, round(fps)), encoder=_encoder())
    return path

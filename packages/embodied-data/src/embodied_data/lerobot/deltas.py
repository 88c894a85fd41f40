"""Delta timestamps: per key, time offsets (seconds) from the current frame, turned into frame offsets.

The semantics are LeRobot's: an offset ``d`` selects frame ``round(d * fps)`` frames away; a query index outside
the current episode is clamped to the episode's edge frame and marked in ``<key>_is_pad``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from embodied_core.errors import UsageError, did_you_mean

__all__ = ["query_indices", "to_frame_offsets"]


def to_frame_offsets(delta_timestamps: Mapping[str, Sequence[float]] | None, *, fps: float, tolerance_s: float,
                     features: Sequence[str]) -> dict[str, np.ndarray]:
    """``{"action": [0, 1/30, ...]}`` -> ``{"action": array([0, 1, ...])}``; checks keys and the fps grid.

    Raises:
        UsageError: a key that is not a feature, an empty offset list, or an offset that is not a multiple of
            ``1/fps`` within ``tolerance_s``.
    """
    offsets: dict[str, np.ndarray] = {}
    for key, deltas in (delta_timestamps or {}).items():
        if key not in features:
            raise UsageError(f"delta_timestamps: {key!r} is not a feature of the dataset "
                             f"(features: {', '.join(features)}){did_you_mean(key, features)}")
        values = np.asarray(list(deltas), dtype=np.float64)
        if values.size == 0:
            raise UsageError(f"delta_timestamps[{key!r}] is empty")
        frames = np.round(values * fps)
        off_grid = np.abs(values - frames / fps) > tolerance_s
        if off_grid.any():
            bad = values[off_grid].tolist()
            raise UsageError(f"delta_timestamps[{key!r}]: {bad} are not multiples of 1/fps = {1 / fps:.6f}s within "
                             f"tolerance_s={tolerance_s} (the dataset is recorded at {fps:g} fps)")
        offsets[key] = frames.astype(np.int64)
    return offsets


def query_indices(row: int, offsets: np.ndarray, *, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions for ``row + offsets`` clamped to the episode ``[start, end)``, and the pad mask."""
    wanted = offsets + row
    pad = (wanted < start) | (wanted >= end)
    # ufuncs instead of np.clip: np.clip's Python wrapper costs more than the work on these short arrays
    return np.minimum(np.maximum(wanted, start), end - 1), pad

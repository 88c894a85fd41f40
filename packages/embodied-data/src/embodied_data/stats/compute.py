"""Per-feature statistics: computing them from values and aggregating per-episode ones.

A feature's stats are a dict of float64 arrays: ``min``, ``max``, ``mean``, ``std``, ``count`` (shape
``(1,)``) and the quantiles ``q01``, ``q10``, ``q50``, ``q90``, ``q99``. Numeric features reduce over
frames (stats have the feature's shape); images reduce over frames and pixels per channel (shape
``(C, 1, 1)``, values in ``[0, 1]``), as LeRobot stores them.

Quantiles are real quantiles of the values. They cannot be aggregated exactly from per-episode
quantiles (LeRobot 0.4 averages them weighted by count, which is no quantile of the whole set: on
``lerobot_written/v30`` its ``action`` q01 is 1166.9 while 37 frames lie below 37), so
:func:`aggregate_stats` leaves them out and callers compute them from the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["MOMENT_STATS", "QUANTILES", "aggregate_stats", "compute_feature_stats", "compute_image_stats"]

QUANTILES: dict[str, float] = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
"""Quantile stat names and their probabilities (LeRobot's names)."""

MOMENT_STATS = ("min", "max", "mean", "std", "count")
"""Stats that aggregate exactly over episodes."""

FeatureStats = dict[str, np.ndarray]


def _reduce(values: np.ndarray, axes: tuple[int, ...], *, keepdims: bool, quantiles: bool) -> FeatureStats:
    stats: FeatureStats = {
        "min": values.min(axis=axes, keepdims=keepdims),
        "max": values.max(axis=axes, keepdims=keepdims),
        "mean": values.mean(axis=axes, keepdims=keepdims),
        "std": values.std(axis=axes, keepdims=keepdims),
        "count": np.array([values.shape[0]], dtype=np.int64),
    }
    if quantiles:
        qs = np.quantile(values, list(QUANTILES.values()), axis=axes, keepdims=keepdims)
        for i, name in enumerate(QUANTILES):
            stats[name] = qs[i]
    return {k: np.asarray(v, dtype=np.int64 if k == "count" else np.float64) for k, v in stats.items()}


def compute_feature_stats(values: np.ndarray, *, quantiles: bool = True) -> FeatureStats:
    """Stats of a numeric feature from its values ``[N, *shape]`` (``[N]`` for scalars -> shape ``(1,)``)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 0 or values.shape[0] == 0:
        raise ValueError(f"need at least one frame of values to compute stats, got shape {values.shape}")
    if values.ndim == 1:
        values = values[:, None]
    return _reduce(values, (0,), keepdims=False, quantiles=quantiles)


def compute_image_stats(frames: np.ndarray, *, quantiles: bool = True, channels_last: bool = False) -> FeatureStats:
    """Per-channel stats of uint8 frames ``[N, C, H, W]`` (or ``[N, H, W, C]``) scaled to ``[0, 1]``.

    The count is the number of frames, as in LeRobot's per-episode image stats.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[0] == 0:
        raise ValueError(f"expected frames [N, C, H, W] with N >= 1, got shape {frames.shape}")
    if channels_last:
        frames = frames.transpose(0, 3, 1, 2)
    values = frames.astype(np.float64) / 255.0
    stats = _reduce(values, (0, 2, 3), keepdims=True, quantiles=quantiles)
    # keepdims leaves a leading frame axis of size 1: drop it to get LeRobot's (C, 1, 1).
    return {k: (v if k == "count" else v[0]) for k, v in stats.items()}


def aggregate_stats(per_episode: Sequence[Mapping[str, Mapping[str, np.ndarray]]]) -> dict[str, FeatureStats]:
    """Combines per-episode stats: count-weighted mean, pooled variance, min of mins, max of maxes.

    Only features present in every episode are combined; quantiles are dropped (see the module docstring).
    """
    if not per_episode:
        raise ValueError("no episode stats to aggregate")
    keys = [k for k in per_episode[0] if all(k in ep for ep in per_episode)]
    combined: dict[str, FeatureStats] = {}
    for key in keys:
        parts = [ep[key] for ep in per_episode]
        counts = np.array([float(np.asarray(p["count"]).reshape(-1)[0]) for p in parts])
        total = counts.sum()
        if total <= 0:
            raise ValueError(f"{key}: episode stats have a total count of {total}")
        weights = counts / total
        means = np.stack([np.asarray(p["mean"], dtype=np.float64) for p in parts])
        stds = np.stack([np.asarray(p["std"], dtype=np.float64) for p in parts])
        shape = (-1,) + (1,) * (means.ndim - 1)
        mean = (means * weights.reshape(shape)).sum(axis=0)
        # Pooled variance: within-episode variance plus the spread of the episode means.
        variance = ((stds**2 + (means - mean) ** 2) * weights.reshape(shape)).sum(axis=0)
        combined[key] = {
            "min": np.min(np.stack([np.asarray(p["min"], dtype=np.float64) for p in parts]), axis=0),
            "max": np.max(np.stack([np.asarray(p["max"], dtype=np.float64) for p in parts]), axis=0),
            "mean": mean,
            "std": np.sqrt(variance),
            "count": np.array([round(total)], dtype=np.int64),
        }
    return combined

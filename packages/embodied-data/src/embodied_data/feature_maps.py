"""Keeping a dataset's statistics and feature metadata in step with the sample transforms that reshape samples.

A robot layout (``--robot-type``) reorders the state and action dimensions of every sample, and a strategy such
as ``groot_n1_7`` adds sliced keys (``state.left_arm``). The normalization statistics and the feature metadata a
dataset reports (:attr:`embodied_core.protocols.TrainingDataset.stats` / ``features``) must describe the samples
the model receives, not the files: each such transform is also a :class:`FeatureMap`, applied to both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from embodied_core.protocols import DatasetFeature, Stats

__all__ = ["FeatureMap", "mapped_features", "mapped_stats", "select_dims"]

_NOT_PER_DIM = ("count",)
"""Stats that are not one value per dimension (left as they are by :func:`select_dims`)."""


class FeatureMap(Protocol):
    """What a sample transform does to the dataset's metadata (declared next to the transform itself)."""

    def map_stats(self, stats: Stats) -> dict[str, dict[str, np.ndarray]]:
        """The statistics of the transformed samples, from those of the stored ones."""
        ...

    def map_features(self, features: Mapping[str, DatasetFeature]) -> dict[str, DatasetFeature]:
        """The feature metadata of the transformed samples, from that of the stored ones."""
        ...


def select_dims(entry: Mapping[str, np.ndarray], index: Sequence[int] | slice) -> dict[str, np.ndarray]:
    """One feature's stats restricted to (and reordered as) ``index`` along the last dimension.

    Per-dimension statistics (min, max, mean, std, quantiles) of a gathered vector are the gathered
    statistics, exactly; ``count`` is kept as it is.
    """
    picked = index if isinstance(index, slice) else np.asarray(index, dtype=np.int64)
    return {name: np.asarray(value) if name in _NOT_PER_DIM else np.asarray(value)[..., picked]
            for name, value in entry.items()}


def mapped_stats(maps: Sequence[FeatureMap], stats: Stats) -> dict[str, dict[str, np.ndarray]]:
    """``stats`` passed through ``maps`` in order (the order the transforms run in)."""
    out = {key: dict(entry) for key, entry in stats.items()}
    for feature_map in maps:
        out = feature_map.map_stats(out)
    return out


def mapped_features(maps: Sequence[FeatureMap], features: Mapping[str, DatasetFeature]) -> dict[str, DatasetFeature]:
    """``features`` passed through ``maps`` in order."""
    out = dict(features)
    for feature_map in maps:
        out = feature_map.map_features(out)
    return out

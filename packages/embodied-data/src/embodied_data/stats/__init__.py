"""Dataset statistics: read LeRobot's stats files, compute missing ones, aggregate per-episode stats.

``dataset_stats(root, episodes=...)`` is the entry point for a LeRobot directory; ``compute_feature_stats``
and ``compute_image_stats`` work on arrays (HDF5, synthetic data); normalization lives in
:mod:`embodied_data.normalize`.
"""

from embodied_data.stats.compute import (
    MOMENT_STATS,
    QUANTILES,
    aggregate_stats,
    compute_feature_stats,
    compute_image_stats,
)
from embodied_data.stats.dataset import DatasetStats, dataset_stats, read_numeric_columns
from embodied_data.stats.io import (
    read_episodes_stats_jsonl,
    read_stats_json,
    read_v30_episode_stats,
    stats_to_json,
    write_stats_json,
)

__all__ = [
    "MOMENT_STATS",
    "QUANTILES",
    "DatasetStats",
    "aggregate_stats",
    "compute_feature_stats",
    "compute_image_stats",
    "dataset_stats",
    "read_episodes_stats_jsonl",
    "read_numeric_columns",
    "read_stats_json",
    "read_v30_episode_stats",
    "stats_to_json",
    "write_stats_json",
]

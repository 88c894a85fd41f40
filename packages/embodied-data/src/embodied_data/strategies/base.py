"""The strategy contract: ``DatasetStrategy.plan(meta, data_config) -> DatasetPlan``.

Strategies only look at metadata (no parquet, no video), so a wrong key or a bad layout file is reported before
any data is read. Their transforms are picklable objects (DataLoader workers may be spawned).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.errors import UsageError, did_you_mean
from embodied_data.feature_maps import FeatureMap
from embodied_data.lerobot.metadata import LeRobotMeta

__all__ = ["Compose", "DatasetPlan", "DatasetStrategy", "history_offsets", "make_strategy", "require_feature"]

Sample = dict[str, Any]


@attrs.frozen(kw_only=True)
class DatasetPlan:
    """What to read from a LeRobot dataset for one model.

    Attributes:
        delta_timestamps: key -> offsets (s) from the current frame.
        camera_keys: dataset camera keys to decode (only these are read).
        transform: applied to each sample dict (None: samples keep the LeRobot keys as read).
        feature_map: what ``transform`` does to the dataset's stats and feature metadata (None: it keeps the
            stored keys and dimensions); see :mod:`embodied_data.feature_maps`.
    """

    delta_timestamps: dict[str, list[float]]
    camera_keys: list[str]
    transform: Callable[[Sample], Sample] | None = None
    feature_map: FeatureMap | None = None


class DatasetStrategy(abc.ABC):
    """Base class of the strategies registered in ``embodied.dataset_strategies``."""

    name: str = ""

    @abc.abstractmethod
    def plan(self, meta: LeRobotMeta, data_config: BaseDataConfig) -> DatasetPlan:
        """Decides keys, offsets and the sample transform; raises UsageError/DataError on mismatches."""


@attrs.frozen
class Compose:
    """Applies transforms in order (picklable, unlike a lambda)."""

    transforms: tuple[Callable[[Sample], Sample], ...]

    def __call__(self, sample: Sample) -> Sample:
        for transform in self.transforms:
            sample = transform(sample)
        return sample


def history_offsets(count: int, fps: float) -> list[float]:
    """``count`` offsets ending at the current frame: ``[-(count-1)/fps, ..., -1/fps, 0.0]``."""
    return [-(count - 1 - i) / fps if i < count - 1 else 0.0 for i in range(count)]


def require_feature(meta: LeRobotMeta, key: str, *, field: str, cameras: bool = False) -> None:
    """Raises a UsageError naming ``field`` (e.g. ``data.state_key``) when ``key`` is not a (camera) feature."""
    choices: Sequence[str] = (
        [k for k, f in meta.features.items() if f.is_video or f.is_image] if cameras
        else [k for k, f in meta.features.items() if not (f.is_video or f.is_image)])
    if key not in choices:
        kind = "camera" if cameras else "feature"
        raise UsageError(f"{field}={key!r} is not a {kind} of the dataset {meta.root} ({kind}s: "
                         f"{', '.join(choices) or 'none'}){did_you_mean(key, choices)}; set it with "
                         f"{field}=<key> on the command line or in the YAML")


def make_strategy(name: str) -> DatasetStrategy:
    """Builds the strategy registered as ``name`` (``--dataset-strategy``)."""
    from embodied_core import registry
    from embodied_core.registry import groups

    factory = registry.load_factory(groups.DATASET_STRATEGIES, name, flag="--dataset-strategy")
    strategy = factory()
    if not isinstance(strategy, DatasetStrategy):
        raise UsageError(f"--dataset-strategy {name}: the plugin built a {type(strategy).__name__}, "
                         "not a DatasetStrategy")
    return strategy

"""The strategy contract: ``DatasetStrategy.plan(meta, data_config) -> DatasetPlan``.

Strategies only look at metadata (no parquet, no video), so a wrong key or a bad layout file is reported before
any data is read. Their transforms are picklable objects (DataLoader workers may be spawned).

Most strategies make every frame a sample and read fixed offsets around it (``delta_timestamps``). A strategy
whose samples are something else (only the starts of full windows, language-chunk anchors, per-sample frame
lists) sets ``DatasetPlan.sample_index``: a picklable builder that the dataset calls once with the loaded rows,
and that maps each sample position to the rows it reads (:class:`SampleIndex`, :class:`SampleQuery`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import numpy as np

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.errors import UsageError, did_you_mean
from embodied_data.feature_maps import FeatureMap
from embodied_data.lerobot.metadata import LeRobotMeta

if TYPE_CHECKING:
    from embodied_data.lerobot.table import EpisodeTable

__all__ = ["Compose", "DatasetPlan", "DatasetStrategy", "SampleIndex", "SampleIndexBuilder", "SampleQuery",
           "history_offsets", "make_strategy", "require_feature"]

Sample = dict[str, Any]


@attrs.frozen(kw_only=True)
class SampleQuery:
    """The rows one sample reads (what :meth:`SampleIndex.query` returns).

    Attributes:
        row: the anchor row (table position): the sample's ``task``, indices and every key that neither ``rows``
            nor the plan's ``delta_timestamps`` name come from it.
        rows: key (data column or camera) -> absolute table rows to read, in order; the sample holds the key
            with a leading time dimension. Keys not named here use the plan's ``delta_timestamps`` around
            ``row`` (or the anchor row alone).
        pad: key -> bool mask over ``rows[key]`` (stored as ``<key>_is_pad``); keys in ``rows`` without a mask
            get an all-False one.
        info: extra plain values merged into the sample (for example the frame indices a window used).
    """

    row: int
    rows: Mapping[str, np.ndarray] = attrs.field(factory=dict)
    pad: Mapping[str, np.ndarray] = attrs.field(factory=dict)
    info: Mapping[str, Any] = attrs.field(factory=dict)


@runtime_checkable
class SampleIndex(Protocol):
    """The samples of a dataset whose samples are not "every frame" (built once per dataset by a
    :data:`SampleIndexBuilder`)."""

    def __len__(self) -> int:
        """Number of samples."""
        ...

    def query(self, position: int) -> SampleQuery:
        """The rows sample ``position`` (``0 <= position < len(self)``) reads."""
        ...

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` sample positions of each episode, in order, tiling ``range(len(self))`` (episodes
        without samples are left out)."""
        ...


SampleIndexBuilder = Callable[["EpisodeTable", LeRobotMeta], SampleIndex]
"""``builder(table, meta) -> SampleIndex``: called once when the dataset has loaded its rows (``table`` holds every
non-camera column of the selected episodes, string columns included). Must pickle (a class, not a closure)."""


@attrs.frozen(kw_only=True)
class DatasetPlan:
    """What to read from a LeRobot dataset for one model.

    Attributes:
        delta_timestamps: key -> offsets (s) from the current frame.
        camera_keys: dataset camera keys to decode (only these are read).
        transform: applied to each sample dict (None: samples keep the LeRobot keys as read).
        feature_map: what ``transform`` does to the dataset's stats and feature metadata (None: it keeps the
            stored keys and dimensions); see :mod:`embodied_data.feature_maps`.
        sample_index: builds the map from sample positions to rows when samples are not "every frame with
            ``delta_timestamps``" (None: one sample per frame).
    """

    delta_timestamps: dict[str, list[float]]
    camera_keys: list[str]
    transform: Callable[[Sample], Sample] | None = None
    feature_map: FeatureMap | None = None
    sample_index: SampleIndexBuilder | None = None


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

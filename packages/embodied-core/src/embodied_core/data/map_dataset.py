"""``MapDataset``: the training-dataset protocol's defaults, so ``__len__`` + ``__getitem__`` is a dataset.

:class:`MapDataset` is a base class (no torch: a ``torch.utils.data.Dataset`` may also derive from it) whose
subclasses implement ``__len__`` and ``__getitem__``. It gives the other members of
:class:`embodied_core.protocols.TrainingDataset` their defaults: ``root``, ``episodes`` and ``fps`` None, one
episode range over every item, features inferred from the first sample and statistics computed, on first use,
from at most :attr:`MapDataset.stats_sample_size` evenly spaced items (:mod:`embodied_core.data.sample_inference`).
A subclass overrides any of them (a class attribute, an assignment in ``__init__``, a property or method).

:func:`adapt_dataset` is what core does with a format's dataset: one implementing every member is used as it is,
anything else with ``__len__`` and ``__getitem__`` (a list of dicts) is wrapped in a :class:`MapDatasetAdapter`
that keeps the members it has; the format spec's :class:`~embodied_core.registry.specs.DatasetDefaults` then
replace the defaults of the members the dataset does not implement itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from embodied_core.data.sample_inference import as_sequence_of_ranges, first_item, infer_features, sample_stats
from embodied_core.errors import PluginError
from embodied_core.protocols import DATASET_MEMBERS, REQUIRED_DATASET_MEMBERS, DatasetFeature, missing_members
from embodied_core.registry._paths import import_object

__all__ = ["MapDataset", "MapDatasetAdapter", "adapt_dataset", "own_members"]


class MapDataset:
    """Base class of a map-style training dataset: implement ``__len__`` and ``__getitem__``, override the rest
    where the defaults do not fit."""

    root: Path | None = None
    """The dataset's folder (default None: a generated or in-memory dataset)."""
    episodes: Sequence[int] | None = None
    """The selected episode indices (default None: every episode)."""
    fps: float | None = None
    """Frames per second (default None: no time base)."""
    stats_sample_size: int = 1024
    """The computed statistics read at most this many evenly spaced items (all of a smaller dataset)."""

    # Set by adapt_dataset from the format's DatasetDefaults; None keeps the defaults below.
    _stats_function: str | None = None
    _ranges_function: str | None = None

    def _where(self) -> str:
        return type(self).__name__

    def _item(self, index: int) -> Mapping[str, Any]:
        return self[index]  # type: ignore[index]  # subclasses implement __getitem__

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``[start, end)`` index ranges of the episodes (default: one episode of every item)."""
        if self._ranges_function is not None:
            return as_sequence_of_ranges(import_object(self._ranges_function)(self),
                                         where=f"{self._where()}: {self._ranges_function}")
        return [(0, len(self))]  # type: ignore[arg-type]  # subclasses implement __len__

    @cached_property
    def features(self) -> dict[str, DatasetFeature]:
        """Feature metadata by key (default: inferred from the first sample; see ``sample_inference``)."""
        where = f"{self._where()}.features"
        return infer_features(first_item(self._item, len(self), where=where))  # type: ignore[arg-type]

    @cached_property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        """Statistics of the non-visual features (default: computed once from at most ``stats_sample_size``
        evenly spaced items: min, max, mean, std, count, q01, q10, q50, q90, q99)."""
        if self._stats_function is not None:
            return import_object(self._stats_function)(self)
        return sample_stats(self._item, len(self), self.features, num_items=self.stats_sample_size,  # type: ignore[arg-type]
                            where=f"{self._where()}.stats")


class MapDatasetAdapter(MapDataset):
    """A format's dataset that lacks members of the protocol, with the defaults for those it lacks.

    Args:
        dataset: the object the format's factory returned (``__len__`` and ``__getitem__`` at least).
        own: the protocol members ``dataset`` implements itself; the adapter hands those through.
        name: the format, named in errors.
    """

    def __init__(self, dataset: Any, *, own: Sequence[str], name: str) -> None:
        self.dataset = dataset
        self.own = frozenset(own)
        self.name = name
        for member in ("root", "episodes", "fps"):  # features and stats are handed through on first use
            if member in self.own:
                setattr(self, member, getattr(dataset, member))

    def _where(self) -> str:
        return f"--dataset-format {self.name}: {type(self.dataset).__name__}"

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.dataset[index]

    def episode_ranges(self) -> list[tuple[int, int]]:
        if "episode_ranges" in self.own:
            return self.dataset.episode_ranges()
        return super().episode_ranges()

    @cached_property
    def features(self) -> dict[str, DatasetFeature]:
        return dict(self.dataset.features) if "features" in self.own else MapDataset.features.func(self)

    @cached_property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        return self.dataset.stats if "stats" in self.own else MapDataset.stats.func(self)


def own_members(dataset: Any) -> set[str]:
    """The protocol members ``dataset`` implements itself, not through :class:`MapDataset`'s defaults."""
    if isinstance(dataset, MapDatasetAdapter):
        return set(dataset.own)
    if not isinstance(dataset, MapDataset):
        return set(DATASET_MEMBERS) - set(missing_members(dataset, DATASET_MEMBERS))
    own = set(vars(dataset)) & set(DATASET_MEMBERS)  # assigned in __init__
    for cls in type(dataset).__mro__:
        if cls is MapDataset:
            break
        own |= set(vars(cls)) & set(DATASET_MEMBERS)
    return own


def _apply(dataset: MapDataset, defaults: Any, *, format_name: str) -> None:
    """Sets the format spec's ``DatasetDefaults`` on ``dataset``; one for a member it implements is an error."""
    declared = {"fps": defaults.fps, "features": defaults.features, "stats": defaults.stats,
                "episode_ranges": defaults.episode_ranges}
    declared = {member: value for member, value in declared.items() if value is not None}
    clash = sorted(set(declared) & own_members(dataset))
    if clash:
        raise PluginError(f"--dataset-format {format_name}: its spec's dataset_defaults set {', '.join(clash)}, which "
                          f"the dataset it built ({type(getattr(dataset, 'dataset', dataset)).__name__}) implements "
                          "itself; keep one of the two")
    if "fps" in declared:
        dataset.fps = float(declared["fps"])
    if "features" in declared:
        dataset.__dict__["features"] = {feature.key: feature for feature in declared["features"]}
    dataset._stats_function = declared.get("stats")
    dataset._ranges_function = declared.get("episode_ranges")
    if defaults.stats_sample_size is not None:
        dataset.stats_sample_size = defaults.stats_sample_size


def adapt_dataset(dataset: Any, *, format_name: str, defaults: Any = None) -> Any:
    """The dataset a format built, with every training-dataset member: as it is when it implements them all,
    else wrapped in a :class:`MapDatasetAdapter`; then the spec's ``DatasetDefaults`` (``defaults``) applied.

    Raises:
        PluginError: ``dataset`` lacks ``__len__`` or ``__getitem__``, or ``defaults`` sets a member the dataset
            implements itself.
    """
    missing = missing_members(dataset, REQUIRED_DATASET_MEMBERS)
    if missing:
        raise PluginError(f"--dataset-format {format_name}: the dataset it built ({type(dataset).__name__}) lacks "
                          f"{', '.join(missing)}; a format's factory returns a map-style dataset of sample dicts "
                          "(any object with __len__ and __getitem__, e.g. a list of dicts, or a subclass of "
                          "embodied_core.data.MapDataset)")
    if not isinstance(dataset, MapDataset) and missing_members(dataset, DATASET_MEMBERS):
        dataset = MapDatasetAdapter(dataset, own=sorted(own_members(dataset)), name=format_name)
    if defaults is not None:
        if not isinstance(dataset, MapDataset):
            dataset = MapDatasetAdapter(dataset, own=sorted(own_members(dataset)), name=format_name)
        _apply(dataset, defaults, format_name=format_name)
    return dataset

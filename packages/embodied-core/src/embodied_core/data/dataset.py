"""The training dataset as core receives it from a dataset format, and the statistics core resolves from it.

A format's factory returns a map-style dataset (any object with ``__len__`` and ``__getitem__``);
:func:`build_training_dataset` gives it the members of :class:`~embodied_core.protocols.TrainingDataset` it lacks
(:func:`embodied_core.data.map_dataset.adapt_dataset`: MapDataset's defaults, or the format spec's
``dataset_defaults``), and :func:`resolve_stats` reads its statistics once, as plain float64 arrays, for the
model's ``make_transforms`` and the checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from embodied_core import registry
from embodied_core.errors import DataError, PluginError
from embodied_core.protocols import DATASET_MEMBERS, DatasetFeature, TrainingDataset, missing_members
from embodied_core.registry import DatasetFormatSpec, groups

__all__ = ["build_training_dataset", "check_training_dataset", "resolve_features", "resolve_stats"]


def check_training_dataset(dataset: Any, *, format_name: str) -> TrainingDataset:
    """``dataset`` when it implements every member of :class:`TrainingDataset` itself; else a PluginError naming
    each missing member (:func:`build_training_dataset` adapts a dataset first)."""
    missing = missing_members(dataset, ("__len__", "__getitem__", *DATASET_MEMBERS))
    if missing:
        raise PluginError(
            f"--dataset-format {format_name}: the dataset it built ({type(dataset).__name__}) lacks "
            f"{', '.join(missing)} of the training-dataset protocol (embodied_core.protocols.TrainingDataset: "
            f"{', '.join(DATASET_MEMBERS)}); adapt it with embodied_core.data.map_dataset.adapt_dataset or derive "
            "it from embodied_core.data.MapDataset for the defaults")
    return dataset


def build_training_dataset(args: Any, data_config: Any) -> TrainingDataset:
    """The ``--dataset-format`` plugin's dataset for the model's data config, with every protocol member (the
    defaults of :class:`embodied_core.data.MapDataset`, or its spec's ``dataset_defaults``, for those it lacks)."""
    from embodied_core.data.map_dataset import adapt_dataset

    spec = registry.get_spec(groups.DATASET_FORMATS, args.dataset_format, flag="--dataset-format")
    factory = registry.load_factory(groups.DATASET_FORMATS, args.dataset_format, flag="--dataset-format")
    defaults = spec.dataset_defaults if isinstance(spec, DatasetFormatSpec) else None
    dataset = adapt_dataset(factory(args, data_config), format_name=args.dataset_format, defaults=defaults)
    return check_training_dataset(dataset, format_name=args.dataset_format)


def _as_array(value: Any, *, where: str) -> np.ndarray:
    try:
        array = np.array(value)  # a copy: the resolved stats do not alias the dataset's
    except (TypeError, ValueError) as exc:
        raise DataError(f"{where}: not an array of numbers ({exc})") from None
    if array.dtype.kind in "iub":
        return array
    if array.dtype.kind != "f":
        raise DataError(f"{where}: not an array of numbers (dtype {array.dtype})")
    return array.astype(np.float64)


def resolve_stats(dataset: TrainingDataset, *, format_name: str) -> dict[str, dict[str, np.ndarray]]:
    """The dataset's normalization statistics as ``{key: {stat: ndarray}}`` (floats as float64, copied).

    Read once per run: these exact values go to ``make_transforms`` and into every checkpoint.
    """
    raw = dataset.stats
    where = f"--dataset-format {format_name}: {type(dataset).__name__}.stats"
    if not isinstance(raw, Mapping):
        raise DataError(f"{where} is a {type(raw).__name__}, not a mapping of feature key -> {{stat name: array}}")
    stats: dict[str, dict[str, np.ndarray]] = {}
    for key, entry in raw.items():
        if not isinstance(entry, Mapping):
            raise DataError(f"{where}[{key!r}] is a {type(entry).__name__}, not a mapping of stat name -> array")
        stats[str(key)] = {str(name): _as_array(value, where=f"{where}[{key!r}][{name!r}]")
                           for name, value in entry.items()}
    return stats


def resolve_features(dataset: TrainingDataset, *, format_name: str) -> dict[str, DatasetFeature]:
    """The dataset's feature metadata, checked to be :class:`DatasetFeature` values keyed by their key."""
    features = dict(dataset.features)
    wrong = [key for key, feature in features.items()
             if not isinstance(feature, DatasetFeature) or feature.key != key]
    if wrong:
        raise DataError(f"--dataset-format {format_name}: {type(dataset).__name__}.features must map each key to "
                        f"an embodied_core.protocols.DatasetFeature with that key; wrong for {', '.join(wrong)}")
    return features

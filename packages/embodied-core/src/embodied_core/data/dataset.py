"""The training dataset as core receives it from a dataset format, and the statistics core resolves from it.

A format's factory returns a :class:`~embodied_core.protocols.TrainingDataset`; :func:`build_training_dataset`
checks that it implements every member (an error naming the format and each missing member otherwise), and
:func:`resolve_stats` reads its statistics once, as plain float64 arrays, for the model's ``make_transforms``
and the checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from embodied_core import registry
from embodied_core.errors import DataError, PluginError
from embodied_core.protocols import DATASET_MEMBERS, DatasetFeature, TrainingDataset, missing_members
from embodied_core.registry import groups

__all__ = ["build_training_dataset", "check_training_dataset", "resolve_features", "resolve_stats"]


def check_training_dataset(dataset: Any, *, format_name: str) -> TrainingDataset:
    """``dataset`` when it implements :class:`TrainingDataset`; else a PluginError naming each missing member."""
    missing = missing_members(dataset, ("__len__", "__getitem__", *DATASET_MEMBERS))
    if missing:
        raise PluginError(
            f"--dataset-format {format_name}: the dataset it built ({type(dataset).__name__}) lacks "
            f"{', '.join(missing)} of the training-dataset protocol (embodied_core.protocols.TrainingDataset: "
            f"{', '.join(DATASET_MEMBERS)}); the format's factory must return a dataset implementing all of them")
    return dataset


def build_training_dataset(args: Any, data_config: Any) -> TrainingDataset:
    """The ``--dataset-format`` plugin's dataset for the model's data config, checked against the protocol."""
    factory = registry.load_factory(groups.DATASET_FORMATS, args.dataset_format, flag="--dataset-format")
    return check_training_dataset(factory(args, data_config), format_name=args.dataset_format)


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

"""Feature metadata and normalization statistics worked out from a dataset's samples (numpy only, no torch).

Used by :class:`embodied_core.data.MapDataset` for a dataset that declares neither. A sample value becomes a feature
when it is a number or a numeric array (a CPU tensor, a numpy array, a list of numbers); strings (``task``) and
other objects are not features, and ``<key>_is_pad`` masks are bookkeeping. A value whose key has a
``<key>_is_pad`` mask, or a 4-D image, carries a time axis first (``action [H, D]``): the feature's shape is that
of one frame, and padded frames are left out of the statistics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from embodied_core.errors import DataError
from embodied_core.protocols import DatasetFeature

__all__ = ["QUANTILES", "as_sequence_of_ranges", "first_item", "infer_features", "sample_positions", "sample_stats"]

QUANTILES: dict[str, float] = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
"""The quantiles computed next to min/max/mean/std/count (the names and values embodied-data's stats use)."""

_PAD_SUFFIX = "_is_pad"


def _numeric(value: Any) -> np.ndarray | None:
    """``value`` as a numeric array, or None when it is no number or numeric array."""
    if isinstance(value, (str, bytes)) or value is None:
        return None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: tensors numpy cannot view (bfloat16, CUDA)
        return None
    return array if array.dtype.kind in "biuf" else None


def _is_image(array: np.ndarray) -> bool:
    """uint8 ``[C, H, W]`` or ``[T, C, H, W]`` with 1, 3 or 4 channels (DESIGN 5)."""
    return array.dtype == np.uint8 and ((array.ndim == 3 and array.shape[0] in (1, 3, 4))
                                        or (array.ndim == 4 and array.shape[1] in (1, 3, 4)))


def _has_time_axis(sample: Mapping[str, Any], key: str, array: np.ndarray) -> bool:
    pad = _numeric(sample.get(key + _PAD_SUFFIX))
    return array.ndim >= 1 and pad is not None and pad.ndim == 1 and pad.shape[0] == array.shape[0]


def infer_features(sample: Mapping[str, Any]) -> dict[str, DatasetFeature]:
    """The features of one sample, in its key order: images as ``dtype="image"`` with shape ``(H, W, C)``, numbers
    and numeric arrays with their numpy dtype name and per-frame shape (``(1,)`` for a scalar)."""
    features: dict[str, DatasetFeature] = {}
    for key, value in sample.items():
        array = _numeric(value)
        if array is None or key.endswith(_PAD_SUFFIX):
            continue
        if _is_image(array):
            channels, height, width = array.shape[-3:]
            features[key] = DatasetFeature(key=key, dtype="image", shape=(int(height), int(width), int(channels)))
            continue
        frame = array.shape[1:] if _has_time_axis(sample, key, array) else array.shape
        features[key] = DatasetFeature(key=key, dtype=array.dtype.name, shape=tuple(int(d) for d in frame) or (1,))
    return features


def sample_positions(length: int, num_items: int) -> list[int]:
    """Up to ``num_items`` evenly spaced indices of ``range(length)``, first and last included (deterministic)."""
    if length <= 0:
        return []
    return np.unique(np.linspace(0, length - 1, min(length, num_items)).round().astype(np.int64)).tolist()


def _frames(sample: Mapping[str, Any], key: str, feature: DatasetFeature, *, index: int) -> np.ndarray:
    """The unpadded frames of ``key`` in one sample as float64 ``[N, *shape]``."""
    array = _numeric(sample.get(key))
    if array is None:
        raise DataError(f"sample {index} has no numeric {key!r} (the first sample has {feature.dtype} "
                        f"{feature.shape})")
    timed = _has_time_axis(sample, key, array)
    frames = array.reshape((array.shape[0] if timed else 1, *feature.shape))  # ValueError: another shape
    if timed:
        frames = frames[~np.asarray(sample[key + _PAD_SUFFIX], dtype=bool)]
    return frames.astype(np.float64)


def _reduce(values: np.ndarray) -> dict[str, np.ndarray]:
    stats = {"min": values.min(axis=0), "max": values.max(axis=0), "mean": values.mean(axis=0),
             "std": values.std(axis=0), "count": np.array([values.shape[0]], dtype=np.int64)}
    for name, q in zip(QUANTILES, np.quantile(values, list(QUANTILES.values()), axis=0), strict=True):
        stats[name] = q
    return {k: np.asarray(v, dtype=np.int64 if k == "count" else np.float64) for k, v in stats.items()}


def sample_stats(get_item: Callable[[int], Mapping[str, Any]], length: int, features: Mapping[str, DatasetFeature],
                 *, num_items: int, where: str) -> dict[str, dict[str, np.ndarray]]:
    """Statistics of every non-visual feature over the items at :func:`sample_positions` (``num_items`` at most).

    Each feature gets ``min``, ``max``, ``mean``, ``std`` (float64, the feature's shape), ``count`` and the
    :data:`QUANTILES` over the unpadded frames of those items. A feature another item lacks, or has in another
    shape, is a DataError naming ``where``, the key and the item.
    """
    if length == 0:
        raise DataError(f"{where}: the dataset is empty, so its statistics cannot be computed")
    keys = [key for key, feature in features.items() if not feature.is_visual]
    parts: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    for index in sample_positions(length, num_items):
        sample = get_item(index)
        for key in keys:
            try:
                parts[key].append(_frames(sample, key, features[key], index=index))
            except ValueError as exc:
                raise DataError(f"{where}: item {index} has {key!r} in another shape than the first item's "
                                f"{features[key].shape} ({exc})") from None
            except DataError as exc:
                raise DataError(f"{where}: {exc}") from None
    stats = {}
    for key, chunks in parts.items():
        values = np.concatenate(chunks)
        if values.shape[0] == 0:
            raise DataError(f"{where}: every frame of {key!r} in the {len(chunks)} sampled items is padded "
                            f"({key}{_PAD_SUFFIX}), so its statistics cannot be computed")
        stats[key] = _reduce(values)
    return stats


def first_item(get_item: Callable[[int], Mapping[str, Any]], length: int, *, where: str) -> Mapping[str, Any]:
    """Item 0, checked to be a mapping (features are inferred from it)."""
    if length == 0:
        raise DataError(f"{where}: the dataset is empty, so its features cannot be inferred from a sample")
    sample = get_item(0)
    if not isinstance(sample, Mapping):
        raise DataError(f"{where}: item 0 is a {type(sample).__name__}, not a sample dict with LeRobot keys")
    return sample


def as_sequence_of_ranges(value: Any, *, where: str) -> list[tuple[int, int]]:
    """``value`` as ``[(start, end), ...]``; DataError naming ``where`` otherwise."""
    if not isinstance(value, Sequence):
        raise DataError(f"{where} returned a {type(value).__name__}, not a list of (start, end) index pairs")
    return [(int(start), int(end)) for start, end in value]

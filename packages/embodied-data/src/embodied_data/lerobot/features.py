"""Parsing of ``meta/info.json`` features and path templates (LeRobot v2.0 / v2.1 / v3.0).

Accepts the variations real datasets carry: ``names`` as a list, a nested list or null; video metadata under
``info`` (v2.1, v3.0) or the legacy ``video_info`` (v2.0); float size caps; ``"channel"`` or ``"channels"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from embodied_core.errors import DataError

__all__ = ["DEFAULT_COLUMNS", "SUPPORTED_VERSIONS", "FeatureInfo", "parse_features", "parse_splits"]

SUPPORTED_VERSIONS = ("v2.0", "v2.1", "v3.0")
"""On-disk LeRobot versions this reader understands."""

DEFAULT_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
"""Columns every LeRobot data parquet holds besides the dataset's own features."""


@attrs.frozen(kw_only=True)
class FeatureInfo:
    """One entry of ``info.json``'s ``features``.

    Attributes:
        key: the feature key (``observation.state``, ``observation.images.front``, ``actions``, ...).
        dtype: ``float32``, ``int64``, ``bool``, ``string``, ``video``, ``image``, ...
        shape: the declared shape (``[H, W, C]`` for cameras, as LeRobot stores it).
        names: flat list of dimension names, or None when the dataset gives none.
        video_info: the video metadata written next to a ``video`` feature (``video.codec``, ``video.fps``, ...);
            empty for other features. Written at recording time and not always right: probe the file.
    """

    key: str
    dtype: str
    shape: tuple[int, ...]
    names: tuple[str, ...] | None = None
    video_info: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def is_video(self) -> bool:
        """Whether the feature is stored in mp4 files (one per episode in v2.x, shared in v3.0)."""
        return self.dtype == "video"

    @property
    def is_image(self) -> bool:
        """Whether the feature is a camera stored as images inside the data parquet."""
        return self.dtype == "image"

    @property
    def declared_codec(self) -> str | None:
        """``video.codec`` from info.json (may disagree with the file: trust :func:`probe_codec`)."""
        codec = self.video_info.get("video.codec")
        return str(codec) if codec is not None else None


def _flatten_names(raw: Any) -> tuple[str, ...] | None:
    """``["a", "b"]``, ``[["a", "b"]]`` or ``{"motors": [...]}`` -> ``("a", "b")``; null -> None."""
    if raw is None:
        return None
    if isinstance(raw, Mapping):  # some v2.0 datasets: {"motors": [...]}
        flat: list[str] = []
        for value in raw.values():
            flat.extend(_flatten_names(value) or ())
        return tuple(flat)
    if isinstance(raw, (list, tuple)):
        flat = []
        for value in raw:
            if isinstance(value, (list, tuple, Mapping)):
                flat.extend(_flatten_names(value) or ())
            else:
                flat.append(str(value))
        return tuple(flat)
    return (str(raw),)


def parse_features(raw: Any, *, where: str) -> dict[str, FeatureInfo]:
    """Parses ``info.json``'s ``features`` mapping; ``where`` names the file in errors."""
    if not isinstance(raw, Mapping) or not raw:
        raise DataError(f"{where}: 'features' is missing or empty")
    features: dict[str, FeatureInfo] = {}
    for key, spec in raw.items():
        if not isinstance(spec, Mapping) or "dtype" not in spec:
            raise DataError(f"{where}: feature {key!r} has no 'dtype'")
        shape = spec.get("shape") or ()
        if isinstance(shape, int):
            shape = (shape,)
        try:
            shape_t = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise DataError(f"{where}: feature {key!r} has a non-integer shape {shape!r}") from None
        video_info = spec.get("info") or spec.get("video_info") or {}
        features[key] = FeatureInfo(key=key, dtype=str(spec["dtype"]), shape=shape_t,
                                    names=_flatten_names(spec.get("names")), video_info=dict(video_info))
    return features


def parse_splits(raw: Any, *, where: str) -> dict[str, list[int]]:
    """``{"train": "0:40", "val": "40:50"}`` (or lists of episode indices) -> episode indices per split."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise DataError(f"{where}: 'splits' must be a mapping of split name -> 'start:stop', got {raw!r}")
    splits: dict[str, list[int]] = {}
    for name, value in raw.items():
        if isinstance(value, str) and ":" in value:
            start, _, stop = value.partition(":")
            try:
                splits[str(name)] = list(range(int(start), int(stop)))
            except ValueError:
                raise DataError(f"{where}: split {name!r} = {value!r} is not 'start:stop'") from None
        elif isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            splits[str(name)] = [int(v) for v in value]
        else:
            raise DataError(f"{where}: split {name!r} = {value!r} is neither 'start:stop' nor a list of episodes")
    return splits

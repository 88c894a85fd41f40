"""``groot_n1_7`` strategy: GR00T's ``meta/modality.json`` layout on top of a LeRobot dataset.

``modality.json`` (GR00T LeRobot flavour)::

    {"state":  {"left_arm": {"start": 0, "end": 7, "original_key": "observation.state"}, ...},
     "action": {"left_arm": {"start": 0, "end": 7}, ...},                 # original_key defaults to "action"
     "video":  {"ego_view": {"original_key": "observation.images.ego_view"}},
     "annotation": {"human.action.task_description": {"original_key": "task_index"}, "human.validity": {}}}

Samples keep the LeRobot keys of the state and action (the full vectors, DESIGN 5) and gain:
``state.<name>`` / ``action.<name>`` (slices of the last dimension, with the same history/horizon and pad masks
``state.<name>_is_pad`` ...), ``video.<name>`` (the camera, renamed; its pad mask follows) and
``annotation.<name>`` (the task string the annotation column indexes; default column ``annotation.<name>``).
Offsets come from the DataConfig as in ``default``. ``data.camera_keys`` may name modality videos (``ego_view``,
``video.ego_view``) or dataset cameras.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import torch

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.errors import DataError, UsageError
from embodied_core.protocols import DatasetFeature
from embodied_data.feature_maps import select_dims
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import DatasetPlan, DatasetStrategy, require_feature
from embodied_data.strategies.default import default_offsets

__all__ = ["GrootStrategy", "ModalityLayout", "ModalityTransform", "load_modality"]

Sample = dict[str, Any]


@attrs.frozen(kw_only=True)
class Slice:
    """One named part of a state or action vector: ``original_key[..., start:end]``."""

    name: str
    original_key: str
    start: int
    end: int


@attrs.frozen(kw_only=True)
class ModalityLayout:
    """Parsed ``modality.json``: state/action slices, video renames (name -> camera key), annotation columns."""

    state: tuple[Slice, ...]
    action: tuple[Slice, ...]
    video: Mapping[str, str]
    annotation: Mapping[str, str]


def _slices(section: Any, *, kind: str, default_key: str, where: str) -> tuple[Slice, ...]:
    if not isinstance(section, Mapping):
        raise DataError(f"{where}: {kind!r} must be a mapping of name -> {{start, end}}")
    out = []
    for name, spec in section.items():
        try:
            start, end = int(spec["start"]), int(spec["end"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{where}: {kind}.{name} needs integer 'start' and 'end', got {spec!r}") from None
        if not 0 <= start < end:
            raise DataError(f"{where}: {kind}.{name} has an empty or negative range [{start}, {end})")
        out.append(Slice(name=str(name), original_key=str(spec.get("original_key", default_key)),
                         start=start, end=end))
    return tuple(out)


def load_modality(meta: LeRobotMeta) -> ModalityLayout:
    """Reads and checks ``meta/modality.json`` against the dataset's features."""
    path = meta.root / "meta" / "modality.json"
    if not path.exists():
        raise DataError(f"{path}: missing; --dataset-strategy groot_n1_7 needs GR00T's modality.json "
                        "(state/action slices, video and annotation keys)")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    where = str(path)
    layout = ModalityLayout(
        state=_slices(raw.get("state", {}), kind="state", default_key="observation.state", where=where),
        action=_slices(raw.get("action", {}), kind="action", default_key="action", where=where),
        video={str(n): str((s or {}).get("original_key", f"observation.images.{n}"))
               for n, s in (raw.get("video") or {}).items()},
        annotation={str(n): str((s or {}).get("original_key", f"annotation.{n}"))
                    for n, s in (raw.get("annotation") or {}).items()})
    for part in (*layout.state, *layout.action):
        feature = meta.features.get(part.original_key)
        if feature is None:
            raise DataError(f"{where}: {part.name} refers to {part.original_key!r}, not a feature of the dataset "
                            f"(features: {', '.join(meta.features)})")
        width = feature.shape[-1] if feature.shape else 1
        if part.end > width:
            raise DataError(f"{where}: {part.name} = [{part.start}, {part.end}) exceeds {part.original_key!r}, "
                            f"which has {width} dimensions")
    for name, key in layout.video.items():
        if key not in meta.features or not (meta.features[key].is_video or meta.features[key].is_image):
            raise DataError(f"{where}: video.{name} refers to {key!r}, not a camera of the dataset "
                            f"(cameras: {', '.join(meta.camera_keys)})")
    for name, key in layout.annotation.items():
        if key not in meta.features:
            raise DataError(f"{where}: annotation.{name} refers to column {key!r}, which the dataset does not have")
    return layout


@attrs.frozen
class ModalityTransform:
    """Adds the ``state.*``, ``action.*``, ``video.*`` and ``annotation.*`` keys of a :class:`ModalityLayout`."""

    layout: ModalityLayout
    tasks: Mapping[int, str]

    def __call__(self, sample: Sample) -> Sample:
        for prefix, parts in (("state", self.layout.state), ("action", self.layout.action)):
            for part in parts:
                source = sample[part.original_key]
                sample[f"{prefix}.{part.name}"] = source[..., part.start:part.end].clone()
                pad = sample.get(f"{part.original_key}_is_pad")
                if pad is not None:
                    sample[f"{prefix}.{part.name}_is_pad"] = pad
        for name, key in self.layout.video.items():
            if key in sample:
                sample[f"video.{name}"] = sample.pop(key)
                if f"{key}_is_pad" in sample:
                    sample[f"video.{name}_is_pad"] = sample.pop(f"{key}_is_pad")
        for name, key in self.layout.annotation.items():
            value = sample[key]
            index = int(value.reshape(-1)[0]) if isinstance(value, torch.Tensor) else int(value)
            try:
                sample[f"annotation.{name}"] = self.tasks[index]
            except KeyError:
                raise DataError(f"annotation.{name}: column {key!r} holds task index {index}, which is not in the "
                                f"tasks table") from None
        return sample

    def _parts(self) -> list[tuple[str, Slice]]:
        return [(prefix, part) for prefix, parts in (("state", self.layout.state), ("action", self.layout.action))
                for part in parts]

    def map_stats(self, stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
        """The stored stats plus those of every ``state.*`` / ``action.*`` slice (exact: per-dimension)."""
        out = {key: dict(entry) for key, entry in stats.items()}
        for prefix, part in self._parts():
            if part.original_key in stats:
                out[f"{prefix}.{part.name}"] = select_dims(stats[part.original_key], slice(part.start, part.end))
        return out

    def map_features(self, features: Mapping[str, DatasetFeature]) -> dict[str, DatasetFeature]:
        """The features with the slices added, the cameras renamed ``video.*`` and the annotation strings."""
        renamed = {key: f"video.{name}" for name, key in self.layout.video.items()}
        out = {renamed.get(key, key): attrs.evolve(f, key=renamed.get(key, key)) for key, f in features.items()}
        for prefix, part in self._parts():
            source = features.get(part.original_key)
            if source is not None:
                names = source.names[part.start:part.end] if source.names else None
                out[f"{prefix}.{part.name}"] = DatasetFeature(key=f"{prefix}.{part.name}", dtype=source.dtype,
                                                              shape=(part.end - part.start,), names=names)
        for name in self.layout.annotation:
            out[f"annotation.{name}"] = DatasetFeature(key=f"annotation.{name}", dtype="string", shape=())
        return out


class GrootStrategy(DatasetStrategy):
    """GR00T N1.7 data layout (``meta/modality.json``) with the DataConfig's horizons."""

    name = "groot_n1_7"

    def plan(self, meta: LeRobotMeta, data_config: BaseDataConfig) -> DatasetPlan:
        layout = load_modality(meta)
        cameras = [self._camera(layout, meta, name) for name in data_config.camera_keys]
        state_keys = sorted({p.original_key for p in layout.state}) or [data_config.state_key]
        action_keys = sorted({p.original_key for p in layout.action}) or [data_config.action_key]
        for key in (*state_keys, *action_keys):
            require_feature(meta, key, field="modality.json original_key")
        deltas = default_offsets(meta, data_config, state_keys=state_keys, action_keys=action_keys,
                                 camera_keys=cameras)
        transform = ModalityTransform(layout, dict(meta.tasks))
        return DatasetPlan(delta_timestamps=deltas, camera_keys=cameras, transform=transform, feature_map=transform)

    @staticmethod
    def _camera(layout: ModalityLayout, meta: LeRobotMeta, name: str) -> str:
        short = name.removeprefix("video.")
        if short in layout.video:
            return layout.video[short]
        if name in layout.video.values():
            return name
        raise UsageError(f"data.camera_keys: {name!r} is neither a video of meta/modality.json "
                         f"({', '.join(layout.video) or 'none'}) nor a camera it maps "
                         f"({', '.join(layout.video.values()) or 'none'}) in {meta.root}")

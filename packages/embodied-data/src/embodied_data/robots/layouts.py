"""Embodiment layouts selected by ``--robot-type``.

A layout names the canonical order of an embodiment's state and action dimensions (``left_arm.0`` ...
``right_hand.5``) and how datasets name them (aliases). Matching a layout against a dataset checks its
``robot_type`` and the ``names`` of the state and action features, then yields the gather indices that put the
dataset's dimensions into the canonical order; the transform applies them to every sample (history and action
chunks included). ``--robot-type`` takes a built-in name or a JSON file with the same fields as
:class:`RobotLayout`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError, UsageError, did_you_mean
from embodied_core.protocols import DatasetFeature
from embodied_data.feature_maps import select_dims
from embodied_data.lerobot.metadata import LeRobotMeta

__all__ = ["BUILTIN_LAYOUTS", "LayoutTransform", "RobotLayout", "match_layout", "resolve_layout"]

log = logging.getLogger(__name__)


def _parts(*parts: tuple[str, int]) -> tuple[str, ...]:
    return tuple(f"{part}.{i}" for part, n in parts for i in range(n))


@attrs.frozen(kw_only=True)
class RobotLayout:
    """An embodiment's canonical state/action dimension order.

    Attributes:
        name: the ``--robot-type`` value.
        robot_types: ``info.json`` ``robot_type`` values recorded for this embodiment (compared case-insensitively).
        state: canonical state dimension names, in order.
        action: canonical action dimension names, in order.
        aliases: dataset dimension name -> canonical name (names equal to a canonical name need no alias).
    """

    name: str
    robot_types: tuple[str, ...] = ()
    state: tuple[str, ...]
    action: tuple[str, ...]
    aliases: Mapping[str, str] = attrs.field(factory=dict)

    def gather(self, meta: LeRobotMeta, key: str, canonical: Sequence[str]) -> np.ndarray:
        """Indices into ``key``'s last dimension that produce the canonical order; UsageError when it cannot."""
        feature = meta.features.get(key)
        if feature is None:
            raise UsageError(f"--robot-type {self.name}: the dataset {meta.root} has no feature {key!r}")
        width = feature.shape[-1] if feature.shape else 1
        if feature.names is None:
            if not self.matches_robot_type(meta.robot_type) or width != len(canonical):
                raise UsageError(
                    f"--robot-type {self.name}: {key!r} of {meta.root} has no dimension names, and the dataset's "
                    f"robot_type {meta.robot_type!r} / {width} dims do not identify it as {self.name} "
                    f"(robot types {list(self.robot_types)}, {len(canonical)} dims)")
            return np.arange(width)
        mapped = [self.aliases.get(n, n) for n in feature.names]
        position = {name: i for i, name in enumerate(mapped)}
        missing = [c for c in canonical if c not in position]
        if missing:
            raise UsageError(
                f"--robot-type {self.name}: {key!r} of {meta.root} (robot_type {meta.robot_type!r}) lacks "
                f"{len(missing)} of the layout's dimensions, e.g. {missing[:4]}; its names are "
                f"{list(feature.names[:6])}{'...' if len(feature.names) > 6 else ''}")
        return np.asarray([position[c] for c in canonical], dtype=np.int64)

    def matches_robot_type(self, robot_type: str | None) -> bool:
        """Whether ``robot_type`` (from info.json) is one this layout was made for."""
        return robot_type is not None and robot_type.lower() in {r.lower() for r in (self.name, *self.robot_types)}


@attrs.frozen
class LayoutTransform:
    """Reorders the last dimension of the state and action tensors of a sample (picklable).

    It is also the :class:`~embodied_data.feature_maps.FeatureMap` of that reordering: the dataset's stats and
    feature metadata of the two keys follow the canonical order (``state_names`` / ``action_names``).
    """

    state_key: str
    state_index: Any
    action_key: str
    action_index: Any
    state_names: tuple[str, ...] | None = None
    action_names: tuple[str, ...] | None = None

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        import torch

        for key, index in self._gathers():
            if key in sample:
                sample[key] = torch.index_select(sample[key], -1, torch.from_numpy(np.asarray(index)))
        return sample

    def _gathers(self) -> tuple[tuple[str, Any], tuple[str, Any]]:
        return (self.state_key, self.state_index), (self.action_key, self.action_index)

    def map_stats(self, stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
        """Stats of the state and action keys gathered into the canonical order."""
        out = {key: dict(entry) for key, entry in stats.items()}
        for key, index in self._gathers():
            if key in out:
                out[key] = select_dims(out[key], index)
        return out

    def map_features(self, features: Mapping[str, DatasetFeature]) -> dict[str, DatasetFeature]:
        """The state and action features with the layout's width and canonical dimension names."""
        out = dict(features)
        for (key, index), names in zip(self._gathers(), (self.state_names, self.action_names), strict=True):
            if key in out:
                out[key] = attrs.evolve(out[key], shape=(*out[key].shape[:-1], len(index)), names=names)
        return out


def _g1_inspire() -> RobotLayout:
    arm = ("ShoulderPitch", "ShoulderRoll", "ShoulderYaw", "Elbow", "WristRoll", "WristPitch", "WristYaw")
    hand = ("Pinky", "Ring", "Middle", "Index", "ThumbBend", "ThumbRotation")
    aliases = {}
    for side, lower in (("Left", "left"), ("Right", "right")):
        aliases.update({f"k{side}{j}": f"{lower}_arm.{i}" for i, j in enumerate(arm)})
        aliases.update({f"k{side}Hand{j}": f"{lower}_hand.{i}" for i, j in enumerate(hand)})
    dims = _parts(("left_arm", 7), ("right_arm", 7), ("left_hand", 6), ("right_hand", 6))
    return RobotLayout(name="unitree_g1_inspire", robot_types=("Unitree_G1_Inspire",), state=dims, action=dims,
                       aliases=aliases)


def _bimanual_dex_34() -> RobotLayout:
    aliases = {}
    for side in ("left", "right"):
        aliases.update({f"{side}.joint_{i + 1}.pos": f"{side}_arm.{i}" for i in range(7)})
        aliases.update({f"{side}_hand.joint_{i + 1}.pos": f"{side}_hand.{i}" for i in range(10)})
    dims = _parts(("left_arm", 7), ("right_arm", 7), ("left_hand", 10), ("right_hand", 10))
    return RobotLayout(name="lingzu_bimanual_dex", robot_types=("lingzu_highcam_pi05",), state=dims, action=dims,
                       aliases=aliases)


def _synthetic_arm() -> RobotLayout:
    return RobotLayout(name="synthetic_arm", robot_types=("synthetic_arm",),
                       state=tuple(f"s{i}" for i in range(7)), action=tuple(f"a{i}" for i in range(4)))


BUILTIN_LAYOUTS: dict[str, RobotLayout] = {layout.name: layout for layout in (_g1_inspire(), _bimanual_dex_34(),
                                                                              _synthetic_arm())}
"""Layouts known by name; others come from a JSON file passed to ``--robot-type``."""


def _from_file(path: Path) -> RobotLayout:
    try:
        raw = json.loads(path.read_text())
        return RobotLayout(name=str(raw.get("name", path.stem)), robot_types=tuple(raw.get("robot_types", ())),
                           state=tuple(raw["state"]), action=tuple(raw["action"]),
                           aliases=dict(raw.get("aliases", {})))
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UsageError(f"--robot-type {path}: not a layout file with 'state' and 'action' name lists ({exc})") \
            from None


def resolve_layout(robot_type: str) -> RobotLayout:
    """The built-in layout ``robot_type``, or the layout in the JSON file it names."""
    if robot_type in BUILTIN_LAYOUTS:
        return BUILTIN_LAYOUTS[robot_type]
    if robot_type.endswith(".json"):
        return _from_file(Path(robot_type))
    for layout in BUILTIN_LAYOUTS.values():  # the dataset's own robot_type spelling is accepted too
        if layout.matches_robot_type(robot_type):
            return layout
    raise UsageError(f"--robot-type {robot_type!r}: unknown embodiment (built-in: {', '.join(BUILTIN_LAYOUTS)}; "
                     f"or a layout .json file){did_you_mean(robot_type, BUILTIN_LAYOUTS)}")


def match_layout(layout: RobotLayout, meta: LeRobotMeta, *, state_key: str, action_key: str) -> LayoutTransform:
    """Checks ``layout`` against the dataset and returns the transform to the canonical order."""
    state_index = layout.gather(meta, state_key, layout.state)
    action_index = layout.gather(meta, action_key, layout.action)
    if meta.robot_type is not None and not layout.matches_robot_type(meta.robot_type):
        log.warning("--robot-type %s: the dataset says robot_type %r; its dimension names match the layout, "
                    "so it is used", layout.name, meta.robot_type)
    if not len(state_index) or not len(action_index):
        raise DataError(f"--robot-type {layout.name}: empty state or action layout")
    return LayoutTransform(state_key, state_index.tolist(), action_key, action_index.tolist(),
                           state_names=tuple(layout.state), action_names=tuple(layout.action))

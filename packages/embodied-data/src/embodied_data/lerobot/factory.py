"""Factory of the ``lerobot_datasets`` format: ``build_dataset(args, data_config)``.

Order of work: metadata (version check) -> strategy plan (keys, offsets) -> robot layout -> episode selection
(split) -> video files present -> parquet rows. Every mismatch is reported before the data is read.

``--split`` takes a split of ``info.json`` (``train``) or an explicit episode list such as ``3-6,10-12`` (for
partially downloaded datasets, whose ``train`` split names episodes that are not on disk).

:func:`infer_features` (``DatasetFormatSpec.infer``) reports the features samples will carry, from the metadata
alone, so core fills the model's unset ``data.state_dim`` / ``action_dim`` / ``camera_keys`` / ``*_names``.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from embodied_core.config.infer import FeatureMetadata, disagreements
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import EmbodiedError, UsageError
from embodied_core.protocols import DatasetFeature
from embodied_data.feature_maps import FeatureMap, mapped_features
from embodied_data.lerobot.dataset import LeRobotDataset, select_episodes
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.robots.layouts import LayoutTransform, match_layout, resolve_layout
from embodied_data.strategies.base import Compose, make_strategy

__all__ = ["build_dataset", "check_dataset", "infer_features", "parse_split"]

_EPISODE_LIST = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")


def parse_split(meta: LeRobotMeta, split: str) -> tuple[str | None, list[int] | None]:
    """``--split`` -> (split name, None) for a split of info.json, or (None, episodes) for ``"3-6,10-12"``."""
    if split in meta.splits:
        return split, None
    if _EPISODE_LIST.match(split):
        episodes: list[int] = []
        for part in split.split(","):
            lo, _, hi = part.strip().partition("-")
            episodes.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
        return None, episodes
    meta.episodes_in_split(split)  # raises with the declared splits and a suggestion
    raise UsageError(f"--split {split!r}: not a split of {meta.root}")  # unreachable: the line above raises


def _load_meta(args: TrainingArgs) -> LeRobotMeta:
    if not args.dataset_path:
        raise UsageError("--dataset-path is required with --dataset-format lerobot_datasets")
    return LeRobotMeta.load(args.dataset_path, expected_version=args.lerobotdataset_version)


def _prepare(args: TrainingArgs, data_config: BaseDataConfig, meta: LeRobotMeta | None = None
             ) -> tuple[LeRobotMeta, Any, list[Any], str | None, list[int] | None]:
    """Everything decided from metadata alone: meta, strategy plan, transforms, split / episodes.

    Unset ``data.camera_keys`` mean every camera of the dataset, in ``info.json`` order.
    """
    meta = _load_meta(args) if meta is None else meta
    if data_config.camera_keys is None:
        data_config = attrs.evolve(data_config, camera_keys=[k for k, f in meta.features.items()
                                                             if f.is_video or f.is_image])
    plan = make_strategy(args.dataset_strategy).plan(meta, data_config)
    transforms = [plan.transform] if plan.transform is not None else []
    if args.robot_type:
        layout = resolve_layout(args.robot_type)
        transforms.append(match_layout(layout, meta, state_key=data_config.state_key,
                                       action_key=data_config.action_key))
    split, episodes = parse_split(meta, args.split)
    return meta, plan, transforms, split, episodes


def check_dataset(args: TrainingArgs, data_config: BaseDataConfig) -> list[str]:
    """Problems found from metadata and file presence only (no parquet read, no decoding); [] when none.

    Meant for config validation, so that a wrong key, version, split, robot type or a missing video is reported
    before the model is built.
    """
    try:
        meta, plan, transforms, split, episodes = _prepare(args, data_config)
        selected = select_episodes(meta, episodes=episodes, split=split)
    except EmbodiedError as exc:
        return [str(exc)]
    problems = disagreements(data_config, _feature_metadata(args, meta, plan, transforms))
    missing = [f"episode {ep}: {meta.video_file(ep, cam)}" for cam in plan.camera_keys
               if meta.features[cam].is_video for ep in selected if not meta.video_file(ep, cam).exists()]
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        problems.append(f"{meta.root}: {len(missing)} video file(s) of the selected episodes are missing: "
                        f"{'; '.join(missing[:3])}{more}; choose the downloaded episodes with --split, e.g. "
                        "--split 3-6,10")
    return problems


def _feature_maps(plan: Any, transforms: list[Any]) -> list[FeatureMap]:
    """What the strategy's transform and the robot layout do to the stored features, in the order they run."""
    layouts = [t for t in transforms if isinstance(t, LayoutTransform)]
    return [plan.feature_map, *layouts] if plan.feature_map is not None else layouts


def _feature_metadata(args: TrainingArgs, meta: LeRobotMeta, plan: Any, transforms: list[Any]) -> FeatureMetadata:
    """The dataset's cameras as ``info.json`` declares them (in its order) and its other features as samples carry
    them, through the strategy's and the robot layout's feature maps."""
    stored = {key: DatasetFeature(key=key, dtype=f.dtype, shape=f.shape, names=f.names)
              for key, f in meta.features.items()}
    vectors = mapped_features(_feature_maps(plan, transforms),
                              {key: f for key, f in stored.items() if not f.is_visual})
    cameras = {key: f for key, f in stored.items() if f.is_visual}
    if args.robot_type:
        return FeatureMetadata(features={**cameras, **vectors}, source=f"{meta.root} (--robot-type {args.robot_type})")
    return FeatureMetadata(features={**cameras, **vectors}, source=str(meta.root),
                           hint=" (or choose a layout with --robot-type)")


def infer_features(args: TrainingArgs, data_config: BaseDataConfig) -> FeatureMetadata:
    """``DatasetFormatSpec.infer`` of ``lerobot_datasets``: the features the model will see, from metadata alone.

    Raises what :func:`check_dataset` reports (missing path, wrong version, unknown key), so callers that infer
    on a best-effort basis leave the reporting to the preflight.
    """
    meta, plan, transforms, _, _ = _prepare(args, data_config)
    return _feature_metadata(args, meta, plan, transforms)


def build_dataset(args: TrainingArgs, data_config: BaseDataConfig) -> LeRobotDataset:
    """Builds the LeRobot dataset named by ``--dataset-path`` for the model's DataConfig."""
    meta, plan, transforms, split, episodes = _prepare(args, data_config)
    # the stats and features the dataset reports follow the strategy's and the robot layout's reshaping
    feature_maps = _feature_maps(plan, transforms)
    return LeRobotDataset(meta.root, meta=meta, split=split, episodes=episodes,
                          delta_timestamps=plan.delta_timestamps, camera_keys=plan.camera_keys,
                          video_backend=args.video_backend,
                          transform=Compose(tuple(transforms)) if transforms else None, feature_maps=feature_maps,
                          sample_index=plan.sample_index)

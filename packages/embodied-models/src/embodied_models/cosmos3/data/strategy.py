"""``cosmos3_droid`` dataset strategy: LoongForge's DROID v3.0 reader semantics on our LeRobot reader.

Used with ``--dataset-format lerobot_datasets --dataset-strategy cosmos3_droid`` and a Cosmos3 model (its data
section is :class:`~embodied_models.cosmos3.data.config.Cosmos3DataConfig`). Unlike LoongForge's own reader it
goes through :class:`~embodied_data.lerobot.dataset.LeRobotDataset`, so ``--video-backend``, ``--split`` and
``--lerobotdataset-version`` apply, v3.0 multi-file streams are located through ``meta/episodes`` (data file,
video file and ``from_timestamp`` per episode), and an unreadable ``tasks.parquet`` is an error rather than
``"None"`` captions (lerobot 0.4.4's task-in-the-index layout is read).

Samples: see :mod:`.reader` (the raw sample) and :mod:`.transform` (what the model's per-sample transform makes
of it). Everything is decided from the metadata here: a missing column or camera, a gripper that is not one
value, an odd wrist width or an ``action_fps`` other than the dataset's is reported before any data is read.

Feature metadata and stats: the samples' ``action`` and ``observation.state`` (``data.action_key`` /
``data.state_key``) are ``[J + 1]`` vectors (joints, then 1 - gripper); :class:`DroidFeatureMap` reports them so
core infers ``data.action_dim`` = ``raw_action_dim`` and stats describe them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.errors import UsageError
from embodied_core.protocols import DatasetFeature, Stats
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import DatasetPlan, DatasetStrategy, require_feature
from embodied_models.cosmos3.data.augment import ViewAugmentation
from embodied_models.cosmos3.data.config import Cosmos3DataConfig
from embodied_models.cosmos3.data.reader import DroidWindowTransform, FullWindowIndexBuilder
from embodied_models.cosmos3.data.tables import domain_id

__all__ = ["Cosmos3DroidStrategy", "DroidFeatureMap", "build_strategy", "check_run_config", "sample_fps"]

_FLIPPED = {"min": "max", "max": "min"}


def _flip_gripper(name: str, entry: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The ``name`` stat of ``1 - g`` from the stats of ``g`` (None when it has no such counterpart)."""
    if name in ("std", "count"):
        return np.asarray(entry[name]) if name in entry else None
    if name == "mean":
        return 1.0 - np.asarray(entry["mean"]) if "mean" in entry else None
    source = _FLIPPED.get(name)
    if source is None and len(name) == 3 and name[0] == "q" and name[1:].isdigit():
        source = f"q{100 - int(name[1:]):02d}"
    if source is None or source not in entry:
        return None
    return 1.0 - np.asarray(entry[source])


class DroidFeatureMap:
    """Adds the assembled ``[J + 1]`` action and state vectors to the features and stats (picklable)."""

    def __init__(self, *, pairs: Mapping[str, tuple[str, str]], names: Mapping[str, tuple[str, ...] | None]) -> None:
        self.pairs = dict(pairs)  # output key -> (joint key, gripper key)
        self.names = dict(names)

    def map_features(self, features: Mapping[str, DatasetFeature]) -> dict[str, DatasetFeature]:
        out = dict(features)
        for key, (joint, _) in self.pairs.items():
            width = int(features[joint].shape[-1]) + 1
            out[key] = DatasetFeature(key=key, dtype="float32", shape=(width,), names=self.names.get(key))
        return out

    def map_stats(self, stats: Stats) -> dict[str, dict[str, np.ndarray]]:
        out = {key: dict(entry) for key, entry in stats.items()}
        for key, (joint, gripper) in self.pairs.items():
            if joint not in stats or gripper not in stats:
                continue
            entry: dict[str, np.ndarray] = {}
            for name, value in stats[joint].items():
                flipped = _flip_gripper(name, stats[gripper])
                if name == "count":
                    entry[name] = np.asarray(value)
                elif flipped is not None:
                    entry[name] = np.concatenate([np.asarray(value).reshape(-1), flipped.reshape(-1)])
            out[key] = entry
        return out


def _frame_width(shape: tuple[int, ...]) -> int:
    """Width of a camera feature declared as ``(H, W, C)`` (LeRobot's writer) or ``(C, H, W)``."""
    return int(shape[2] if len(shape) == 3 and shape[0] in (1, 3, 4) and shape[-1] not in (1, 3, 4) else shape[1])


def sample_fps(meta: LeRobotMeta, data_config: Cosmos3DataConfig) -> float:
    """The frame rate of the samples: the dataset's (``data.action_fps``, when set, must equal it)."""
    fps = float(meta.fps)
    if data_config.action_fps is not None and abs(data_config.action_fps - fps) > 1e-6:
        raise UsageError(f"data.action_fps={data_config.action_fps:g} but {meta.root} is recorded at {fps:g} fps; "
                         f"samples are consecutive frames (no resampling), so set data.action_fps={fps:g} or leave "
                         "it unset")
    if fps != int(fps):
        raise UsageError(f"{meta.root} is recorded at {fps:g} fps; the Cosmos3 fps conditioning is a whole number "
                         "of frames per second")
    return fps


class Cosmos3DroidStrategy(DatasetStrategy):
    """Plans full-window samples of the three DROID cameras and the joint/gripper columns."""

    name = "cosmos3_droid"

    def plan(self, meta: LeRobotMeta, data_config: BaseDataConfig) -> DatasetPlan:
        if not isinstance(data_config, Cosmos3DataConfig):
            raise UsageError(f"--dataset-strategy cosmos3_droid needs a Cosmos3 model (its data section is "
                             f"{type(data_config).__name__}); choose --model-name cosmos3_*")
        cfg = data_config
        cameras = tuple(cfg.camera_keys or ())
        if len(cameras) != 3:
            raise UsageError(f"data.camera_keys={list(cameras)}: the cosmos3_droid layout needs exactly three cameras "
                             "(wrist, exterior left, exterior right)")
        for index, cam in enumerate(cameras):
            require_feature(meta, cam, field=f"data.camera_keys[{index}]", cameras=True)
        fields = {"data.joint_action_key": cfg.joint_action_key, "data.gripper_action_key": cfg.gripper_action_key,
                  "data.joint_state_key": cfg.joint_state_key, "data.gripper_state_key": cfg.gripper_state_key}
        for field, key in fields.items():
            require_feature(meta, key, field=field)
        for field in ("data.gripper_action_key", "data.gripper_state_key"):
            shape = tuple(meta.features[fields[field]].shape)
            if shape not in ((), (1,)):
                raise UsageError(f"{field}={fields[field]!r} of {meta.root} has shape {list(shape)}; the gripper "
                                 "must be one value per frame")
        joints = {field: tuple(meta.features[fields[field]].shape) for field in
                  ("data.joint_action_key", "data.joint_state_key")}
        if len(set(joints.values())) != 1 or len(next(iter(joints.values()))) != 1:
            raise UsageError(f"the joint columns of {meta.root} must be vectors of one width: "
                             f"{', '.join(f'{f}={fields[f]!r} {list(s)}' for f, s in joints.items())}")
        wrist_width = _frame_width(tuple(meta.features[cameras[0]].shape))
        if wrist_width % 2:
            raise UsageError(f"data.camera_keys[0]={cameras[0]!r} is {wrist_width} pixels wide; the two exterior views "
                             "are laid out side by side at half that width, so it must be even")
        fps = sample_fps(meta, cfg)
        transform = DroidWindowTransform(
            camera_keys=cameras, joint_action_key=cfg.joint_action_key, gripper_action_key=cfg.gripper_action_key,
            joint_state_key=cfg.joint_state_key, gripper_state_key=cfg.gripper_state_key, fps=fps,
            domain_id=domain_id(cfg.embodiment), caption_choice=cfg.caption_choice, state_key=cfg.state_key,
            augmentation=(ViewAugmentation(by_position=cfg.image_augmentation_seed == "position")
                          if cfg.use_image_augmentation else None))
        names = {}
        for out_key, joint in ((cfg.action_key, cfg.joint_action_key), (cfg.state_key, cfg.joint_state_key)):
            joint_names = meta.features[joint].names
            names[out_key] = (*joint_names, "gripper_open") if joint_names and len(joint_names) == joints[
                "data.joint_action_key"][0] else None
        feature_map = DroidFeatureMap(pairs={cfg.action_key: (cfg.joint_action_key, cfg.gripper_action_key),
                                             cfg.state_key: (cfg.joint_state_key, cfg.gripper_state_key)},
                                      names=names)
        keys = (*fields.values(), *cameras)
        return DatasetPlan(delta_timestamps={}, camera_keys=list(cameras), transform=transform,
                           feature_map=feature_map, sample_index=FullWindowIndexBuilder(cfg.window_frames, keys))


def build_strategy() -> Cosmos3DroidStrategy:
    """Factory of the ``cosmos3_droid`` strategy."""
    return Cosmos3DroidStrategy()


def check_run_config(config: object) -> list[str]:
    """The check of ``--dataset-strategy cosmos3_droid`` (declared by its spec): a Cosmos3 data section, a chunk
    length the VAE's temporal compression divides, and a tokenizer."""
    data, model, training = config.data, config.model, config.training  # type: ignore[attr-defined]
    if not isinstance(data, Cosmos3DataConfig):
        return [f"--dataset-strategy cosmos3_droid builds Cosmos3 samples; its model's data section is "
                f"{type(data).__name__}; choose --model-name cosmos3_*"]
    problems = []
    compression = getattr(model, "vae_temporal_compression", 4)
    if data.action_chunk_length % compression:
        problems.append(f"data.action_chunk_length={data.action_chunk_length} must be a multiple of "
                        f"model.vae_temporal_compression={compression}: a window of chunk + 1 frames keeps "
                        f"(chunk // {compression}) * {compression} + 1 video frames, which must equal the chunk + 1 "
                        f"action rows (e.g. data.action_chunk_length="
                        f"{max(compression, data.action_chunk_length // compression * compression)})")
    if not (data.tokenizer_path or training.tokenizer_path or data.resolved_tokenizer_path()):
        problems.append("--dataset-strategy cosmos3_droid tokenizes captions with the Qwen3-VL tokenizer: pass "
                        "--tokenizer-path DIR (a folder with tokenizer.json and a chat template) or "
                        "data.tokenizer_path=DIR")
    return problems

"""lerobot_datasets factory: strategies (default, groot_n1_7), --split episode lists, --robot-type layouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from embodied_core import registry
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import DataError, UsageError
from embodied_core.registry import groups
from embodied_data.lerobot.factory import build_dataset
from tests.support import DATASETS_DIR

WRITTEN = DATASETS_DIR / "lerobot_written"


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name.replace("/", "_")
    shutil.copytree(DATASETS_DIR / name, dst, ignore=shutil.ignore_patterns("videos") if "lingzu" in name else None)
    for path in dst.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dst


def _args(path: Path, **kwargs: Any) -> TrainingArgs:
    return TrainingArgs(model_name="test", dataset_path=str(path), **kwargs)


def _synthetic_config(**kwargs: Any) -> BaseDataConfig:
    base = dict(camera_keys=["observation.images.front"], state_dim=7, action_dim=4, action_horizon=8)
    return BaseDataConfig(**{**base, **kwargs})


def test_format_spec_registered() -> None:
    spec = registry.get_spec(groups.DATASET_FORMATS, "lerobot_datasets")
    assert spec.needs_path
    assert set(spec.uses_flags) == {"split", "lerobotdataset_version", "dataset_strategy", "video_backend",
                                    "robot_type", "streaming"}
    assert set(registry.names(groups.DATASET_STRATEGIES)) >= {"default", "groot_n1_7"}
    assert registry.load_factory(groups.DATASET_FORMATS, "lerobot_datasets") is build_dataset


def test_default_strategy_reproduces_golden_numbers_on_lingzu() -> None:
    """pi05-like settings on lingzu (episodes with video, H=50, state history 2, current frame)."""
    config = BaseDataConfig(camera_keys=["image"], state_key="state", action_key="actions", state_dim=34,
                            action_dim=34, action_horizon=50, state_history=2, image_history=1)
    ds = build_dataset(_args(DATASETS_DIR / "lingzu_pi05_v30", split="3-6,10-12"), config)
    doc = json.loads((DATASETS_DIR / "expected/lingzu_pi05_v30.json").read_text())
    st = load_file(DATASETS_DIR / "expected/lingzu_pi05_v30.safetensors")
    assert len(ds) == doc["dataset_len"]
    for item in doc["items"][:2] + doc["items"][-2:]:
        sample = ds[item["position"]]
        for key in ("actions", "actions_is_pad", "state", "state_is_pad", "index"):
            assert torch.equal(sample[key], st[item["tensors"][key]["safetensors_key"]]), (item["position"], key)
        assert sample["image"].shape == (3, 480, 640) and "image_is_pad" not in sample
        if item["frames_stored"]:
            current = item["cameras"]["image"]["frames"][-1]["safetensors_key"]
            assert torch.equal(sample["image"], st[current])


def test_default_strategy_errors_name_the_field() -> None:
    with pytest.raises(UsageError, match=r"data.state_key='observation.state'.*features: actions, state"):
        build_dataset(_args(DATASETS_DIR / "lingzu_pi05_v30", split="3"), BaseDataConfig(camera_keys=["image"]))
    with pytest.raises(UsageError, match=r"data.camera_keys='observation.images.top'.*did you mean"):
        build_dataset(_args(WRITTEN / "v30"), _synthetic_config(camera_keys=["observation.images.top"]))
    with pytest.raises(UsageError, match=r"is LeRobot v2\.1"):
        build_dataset(_args(WRITTEN / "v21"), _synthetic_config())
    with pytest.raises(UsageError, match=r"--split 'tran'.*did you mean 'train'"):
        build_dataset(_args(WRITTEN / "v30", split="tran"), _synthetic_config())


def test_default_strategy_histories_and_backend_flag() -> None:
    config = _synthetic_config(state_history=3, image_history=2, camera_keys=["observation.images.wrist"])
    ds = build_dataset(_args(WRITTEN / "v21", lerobotdataset_version="v2.1", video_backend="pyav"), config)
    sample = ds[89]  # first frame of the 5-frame episode
    assert sample["observation.state"].shape == (3, 7)
    assert sample["observation.state_is_pad"].tolist() == [True, True, False]
    assert sample["observation.images.wrist"].shape == (2, 3, 72, 96)
    assert sample["action"].shape == (8, 4) and sample["action_is_pad"].tolist() == [False] * 5 + [True] * 3
    assert ds.backend.name == "pyav"


# ---------------------------------------------------------------------------- groot_n1_7
MODALITY = {
    "state": {"arm": {"start": 0, "end": 5}, "gripper": {"start": 5, "end": 7, "original_key": "observation.state"}},
    "action": {"arm": {"start": 0, "end": 3}, "gripper": {"start": 3, "end": 4}},
    "video": {"front_view": {"original_key": "observation.images.front"},
              "wrist_view": {"original_key": "observation.images.wrist"}},
    "annotation": {"human.action.task_description": {"original_key": "task_index"}},
}


def _groot_dataset(tmp_path: Path, modality: dict[str, Any] | None, **config: Any) -> Any:
    root = _copy("lerobot_written/v21", tmp_path)
    if modality is not None:
        (root / "meta" / "modality.json").write_text(json.dumps(modality))
    return build_dataset(_args(root, lerobotdataset_version="v2.1", dataset_strategy="groot_n1_7"),
                         _synthetic_config(**config))


def test_groot_layout_slices_renames_and_annotations(tmp_path: Path) -> None:
    ds = _groot_dataset(tmp_path, MODALITY, camera_keys=["front_view"], state_history=2)
    sample = ds[94 + 12]  # episode 3, frame 12: task index 1 ("stack the blue block")
    state, action = sample["observation.state"], sample["action"]
    assert state.shape == (2, 7) and action.shape == (8, 4)
    assert torch.equal(sample["state.arm"], state[..., :5]) and torch.equal(sample["state.gripper"], state[..., 5:])
    assert torch.equal(sample["action.arm"], action[..., :3]) and sample["action.gripper"].shape == (8, 1)
    assert torch.equal(sample["action.arm_is_pad"], sample["action_is_pad"])
    assert sample["state.arm_is_pad"].tolist() == [False, False]
    assert sample["video.front_view"].shape == (3, 120, 160)
    assert "observation.images.front" not in sample and "video.wrist_view" not in sample  # only selected cameras
    assert sample["annotation.human.action.task_description"] == "stack the blue block" == sample["task"]
    assert ds[94 + 13]["annotation.human.action.task_description"] == "pick the red cube"


def test_groot_camera_history_pad_follows_rename(tmp_path: Path) -> None:
    ds = _groot_dataset(tmp_path, MODALITY, camera_keys=["video.wrist_view"], image_history=2)
    sample = ds[0]
    assert sample["video.wrist_view"].shape == (2, 3, 72, 96)
    assert sample["video.wrist_view_is_pad"].tolist() == [True, False]


def test_groot_layout_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"modality.json: missing"):
        _groot_dataset(tmp_path / "a", None)
    too_wide = json.loads(json.dumps(MODALITY))
    too_wide["state"]["gripper"]["end"] = 9
    with pytest.raises(DataError, match=r"gripper = \[5, 9\) exceeds 'observation.state', which has 7 dimensions"):
        _groot_dataset(tmp_path / "b", too_wide)
    with pytest.raises(UsageError, match=r"'top_view' is neither a video of meta/modality.json"):
        _groot_dataset(tmp_path / "c", MODALITY, camera_keys=["top_view"])


# ---------------------------------------------------------------------------- --robot-type
def test_robot_type_identity_and_reorder(tmp_path: Path) -> None:
    args = _args(WRITTEN / "v30", robot_type="synthetic_arm")
    plain = build_dataset(_args(WRITTEN / "v30"), _synthetic_config(camera_keys=[]))
    same = build_dataset(args, _synthetic_config(camera_keys=[]))
    assert torch.equal(same[5]["observation.state"], plain[5]["observation.state"])
    root = _copy("lerobot_written/v30", tmp_path)
    info_path = root / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["features"]["observation.state"]["names"] = [f"s{i}" for i in reversed(range(7))]
    info_path.write_text(json.dumps(info))
    flipped = build_dataset(_args(root, robot_type="synthetic_arm"), _synthetic_config(camera_keys=[]))
    assert torch.equal(flipped[5]["observation.state"], plain[5]["observation.state"].flip(-1))
    assert torch.equal(flipped[5]["action"], plain[5]["action"])


def test_robot_type_on_real_datasets(tmp_path: Path) -> None:
    config = BaseDataConfig(camera_keys=[], state_key="state", action_key="actions", action_horizon=4)
    ds = build_dataset(_args(DATASETS_DIR / "lingzu_pi05_v30", split="3", robot_type="lingzu_bimanual_dex"), config)
    assert ds[0]["actions"].shape == (4, 34)
    g1 = build_dataset(_args(DATASETS_DIR / "g1_inspire_v21", split="10", lerobotdataset_version="v2.1",
                             robot_type="Unitree_G1_Inspire"), BaseDataConfig(camera_keys=[], action_horizon=2))
    assert g1[0]["observation.state"].shape == (26,)
    with pytest.raises(UsageError, match=r"lacks 26 of the layout's dimensions.*'s0'"):
        build_dataset(_args(WRITTEN / "v30", robot_type="unitree_g1_inspire"), _synthetic_config(camera_keys=[]))
    with pytest.raises(UsageError, match=r"unknown embodiment.*did you mean 'synthetic_arm'"):
        build_dataset(_args(WRITTEN / "v30", robot_type="synthetic_armm"), _synthetic_config(camera_keys=[]))
    layout = tmp_path / "arm.json"
    layout.write_text(json.dumps({"name": "my_arm", "state": ["x3", "x0"], "action": ["a0"],
                                  "aliases": {"s3": "x3", "s0": "x0"}}))
    custom = build_dataset(_args(WRITTEN / "v30", robot_type=str(layout)), _synthetic_config(camera_keys=[]))
    assert custom[2]["observation.state"].tolist() == [2 + 3 / 8, 2.0]
    assert custom[2]["action"].shape == (8, 1)


def test_check_dataset_reports_before_reading_data() -> None:
    from embodied_data.lerobot.factory import check_dataset

    config = BaseDataConfig(camera_keys=["image"], state_key="state", action_key="actions", state_dim=34,
                            action_dim=34)
    assert check_dataset(_args(DATASETS_DIR / "lingzu_pi05_v30", split="3-6,10-12"), config) == []
    narrow = BaseDataConfig(camera_keys=["image"], state_key="state", action_key="actions", state_dim=8,
                            action_dim=34)
    assert check_dataset(_args(DATASETS_DIR / "lingzu_pi05_v30", split="3-6,10-12"), narrow) == [
        f"data.state_dim=8 but 'state' of {DATASETS_DIR / 'lingzu_pi05_v30'} has 34 values per frame; set "
        "data.state_dim=34 (or choose a layout with --robot-type)"]
    problems = check_dataset(_args(DATASETS_DIR / "lingzu_pi05_v30"), config)
    assert len(problems) == 1 and "43 video file(s)" in problems[0] and "episode 0: " in problems[0]
    assert "is LeRobot v2.1" in check_dataset(_args(WRITTEN / "v21"), _synthetic_config())[0]

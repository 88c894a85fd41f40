"""Every dataset format returns a TrainingDataset (root, episodes, stats, features, fps, episode_ranges); the stats
and features describe the samples as the model receives them (robot layouts, groot slices); a format whose dataset
lacks a member gets MapDataset's default for it; core hands the dataset's stats to make_transforms."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from embodied_plugin_template.config import TinyFlowDataConfig, TinyFlowPolicyConfig
from torch.utils.data import Dataset

from embodied_core import registry
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.data.dataset import build_training_dataset, check_training_dataset, resolve_stats
from embodied_core.errors import PluginError
from embodied_core.model_api import Transforms
from embodied_core.protocols import DATASET_MEMBERS, DatasetFeature, missing_members
from embodied_core.registry import DatasetFormatSpec, ModelSpec, groups
from embodied_data.formats.dummy import DummyDataset
from embodied_data.hdf5 import Hdf5Dataset
from embodied_data.stats import dataset_stats
from tests.core.trainer_support import training
from tests.data.test_hdf5 import _write_robomimic
from tests.support import DATASETS_DIR

V30 = DATASETS_DIR / "lerobot_written" / "v30"


def _lerobot(root: Path, **training: Any) -> Any:
    args = TrainingArgs(dataset_format="lerobot_datasets", dataset_path=str(root), split="train", **training)
    config = BaseDataConfig(camera_keys=["observation.images.front"], state_dim=7, action_dim=4, action_horizon=2)
    return build_training_dataset(args, config)


def _flipped_copy(tmp_path: Path) -> Path:
    """lerobot_written/v30 with the state dimension names reversed: the synthetic_arm layout then flips them."""
    root = tmp_path / "flipped"
    shutil.copytree(V30, root)
    info_path = root / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["features"]["observation.state"]["names"] = [f"s{i}" for i in reversed(range(7))]
    info_path.write_text(json.dumps(info))
    return root


def test_lerobot_dataset_implements_the_protocol() -> None:
    dataset = _lerobot(V30)
    assert missing_members(dataset, DATASET_MEMBERS) == []
    assert dataset.root == V30 and dataset.episodes == [0, 1, 2, 3] and dataset.fps == 30.0
    expected = dataset_stats(V30, episodes=[0, 1, 2, 3]).stats
    assert set(dataset.stats) == {"observation.state", "action", "next.reward", "timestamp", "frame_index",
                                  "episode_index", "index", "task_index"}  # numeric features only, no camera
    for key, entry in dataset.stats.items():
        for name, value in entry.items():
            np.testing.assert_array_equal(value, expected[key][name])
    front = dataset.features["observation.images.front"]
    assert front == DatasetFeature(key="observation.images.front", dtype="video", shape=(120, 160, 3),
                                   names=("height", "width", "channels")) and front.is_visual
    assert dataset.features["observation.state"].names == tuple(f"s{i}" for i in range(7))
    assert "observation.images.wrist" not in dataset.features  # only the cameras the samples carry


def test_robot_layout_reorders_the_stats_and_names(tmp_path: Path) -> None:
    plain = _lerobot(V30)
    flipped = _lerobot(_flipped_copy(tmp_path), robot_type="synthetic_arm")
    sample, reference = flipped[5]["observation.state"], plain[5]["observation.state"]
    assert sample.tolist() == reference.flip(-1).tolist()
    for name in ("q01", "q99", "mean", "min"):  # the stats describe the reordered samples
        np.testing.assert_array_equal(flipped.stats["observation.state"][name],
                                      plain.stats["observation.state"][name][::-1])
    np.testing.assert_array_equal(flipped.stats["action"]["q01"], plain.stats["action"]["q01"])
    assert flipped.features["observation.state"].names == tuple(f"s{i}" for i in range(7))  # canonical order


def test_groot_strategy_adds_the_stats_of_its_slices(tmp_path: Path) -> None:
    root = tmp_path / "groot"
    shutil.copytree(V30, root)
    (root / "meta" / "modality.json").write_text(json.dumps({
        "state": {"arm": {"start": 0, "end": 5}, "gripper": {"start": 5, "end": 7}},
        "action": {"arm": {"start": 0, "end": 3}, "gripper": {"start": 3, "end": 4}},
        "video": {"front_view": {"original_key": "observation.images.front"}}}))
    args = TrainingArgs(dataset_format="lerobot_datasets", dataset_path=str(root), dataset_strategy="groot_n1_7")
    dataset = build_training_dataset(args, BaseDataConfig(camera_keys=["front_view"], state_dim=7, action_dim=4))
    state = dataset.stats["observation.state"]
    np.testing.assert_array_equal(dataset.stats["state.gripper"]["q99"], state["q99"][5:7])
    np.testing.assert_array_equal(dataset.stats["action.arm"]["std"], dataset.stats["action"]["std"][:3])
    assert dataset.features["state.gripper"] == DatasetFeature(key="state.gripper", dtype="float32", shape=(2,),
                                                               names=("s5", "s6"))
    assert "video.front_view" in dataset.features and "observation.images.front" not in dataset.features
    assert set(dataset[0]) >= {"state.gripper", "action.arm", "video.front_view"}


def test_hdf5_and_dummy_datasets_implement_the_protocol(tmp_path: Path) -> None:
    path = tmp_path / "lift.hdf5"
    _write_robomimic(path, {0: 5, 1: 4})
    config = BaseDataConfig(camera_keys=["observation.images.agentview"], state_dim=5, action_dim=4)
    hdf5 = Hdf5Dataset(str(path), config)
    assert missing_members(hdf5, DATASET_MEMBERS) == []
    assert hdf5.root == path and hdf5.episodes == [0, 1] and hdf5.fps == 20.0
    assert hdf5.features["observation.state"] == DatasetFeature(key="observation.state", dtype="float32",
                                                                shape=(5,))
    assert hdf5.features["observation.images.agentview"].dtype == "image"
    assert hdf5.episode_ranges() == [(0, 5), (5, 9)]
    assert resolve_stats(hdf5, format_name="hdf5_datasets")["action"]["max"].tolist() == [1003.0, 1003.25, 1003.5,
                                                                                         1003.75]
    dummy = DummyDataset(config, num_samples=10)
    assert missing_members(dummy, DATASET_MEMBERS) == []
    assert dummy.root is None and dummy.episodes is None and dummy.fps == 30.0
    assert dummy.features["observation.state"].shape == (5,)
    assert set(dummy.stats) == {"observation.state", "action"}


class StatlessDataset(Dataset):
    """A third-party dataset that forgot ``stats`` and ``features``."""

    root = None
    episodes = None
    fps = 30.0

    def __init__(self, data_config: BaseDataConfig) -> None:
        self.inner = DummyDataset(data_config, num_samples=16)

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.inner[index]

    def episode_ranges(self) -> list[tuple[int, int]]:
        return self.inner.episode_ranges()


def build_statless(args: TrainingArgs, data_config: BaseDataConfig) -> StatlessDataset:
    return StatlessDataset(data_config)


class ConstantStats(DummyDataset):
    """Dummy samples with distinctive statistics (what a format reads from its own files)."""

    @property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        return {"observation.state": {"q01": np.full(8, -3.0), "q99": np.full(8, 5.0)},
                "action": {"q01": np.full(8, -1.5), "q99": np.full(8, 2.5)}}


def build_constant(args: TrainingArgs, data_config: BaseDataConfig) -> ConstantStats:
    return ConstantStats(data_config, num_samples=16)


class Identity:
    """A sample transform that keeps the statistics its make_transforms received."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        return sample


def recording_transforms(model_config: Any, data_config: Any, *, stats: Any) -> Transforms:
    """A make_transforms that records the statistics core hands it."""
    return Transforms(sample_transform=Identity(stats))


def _trainer(out: Path, **extra: Any) -> Any:
    """recording_flow on a test format; the data fields are set (the test formats declare no metadata to infer)."""
    from embodied_core.trainer.api import Trainer

    data = {"camera_keys": ["observation.images.front"], "state_dim": 8, "action_dim": 8}
    return Trainer({"training": training(out, model_name="recording_flow", **extra), "data": data}).build()


@pytest.fixture
def formats() -> Any:
    for name, factory in (("statless", "build_statless"), ("constant_stats", "build_constant")):
        registry.register(groups.DATASET_FORMATS, name, DatasetFormatSpec(
            name=name, description="test format", factory=f"tests.core.test_dataset_protocol:{factory}",
            uses_flags=("num_samples",), needs_path=False), replace=True)
    registry.register(groups.MODELS, "recording_flow", ModelSpec(
        name="recording_flow", description="tiny_flow_policy with a recording make_transforms",
        factory="embodied_plugin_template.modeling:build_model", model_config=TinyFlowPolicyConfig,
        data_config=TinyFlowDataConfig, transforms="tests.core.test_dataset_protocol:recording_transforms"),
        replace=True)
    yield
    for group, name in ((groups.DATASET_FORMATS, "statless"), (groups.DATASET_FORMATS, "constant_stats"),
                        (groups.MODELS, "recording_flow")):
        registry.unregister(group, name)


def test_a_format_whose_dataset_lacks_members_gets_the_defaults(formats: Any, tmp_path: Path) -> None:
    with pytest.raises(PluginError) as info:  # the strict check, for a dataset that must implement every member
        check_training_dataset(StatlessDataset(BaseDataConfig()), format_name="statless")
    assert "--dataset-format statless" in str(info.value) and "lacks stats, features" in str(info.value)
    trainer = _trainer(tmp_path, dataset_format="statless", train_iters=1)
    trainer.train()
    assert trainer.dataset_features["observation.state"] == DatasetFeature(key="observation.state", dtype="float32",
                                                                           shape=(8,))  # from the first sample
    assert trainer.dataset_features["observation.images.front"].dtype == "image"
    stats = trainer.data_stats["action"]  # computed from the samples: 16 items x 8 actions, none padded
    assert stats["count"].tolist() == [128] and stats["q01"].shape == (8,)


def test_make_transforms_receives_the_dataset_stats_resolved_once(formats: Any, tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, dataset_format="constant_stats", train_iters=1)
    trainer.train()
    received = trainer.transforms.sample_transform.stats
    assert received["observation.state"]["q99"].tolist() == [5.0] * 8
    assert received["action"]["q01"].dtype == np.float64
    assert trainer.data_stats is received  # what a checkpoint records is what the transforms got
    assert trainer.dataset_features["observation.state"].shape == (8,)


def test_pi05_normalizes_with_the_stats_core_hands_it(tmp_path: Path) -> None:
    """On a robot-layout dataset pi0.5 normalizes with the reordered statistics (it used to read the files')."""
    from embodied_core.config.resolve import load_config, model_spec
    from embodied_core.trainer.components import build_transforms

    root = _flipped_copy(tmp_path)
    config = load_config("pi05_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(root),
                                                "robot_type": "synthetic_arm"},
                         data={"camera_keys": ["observation.images.front"], "state_dim": 7, "action_dim": 4})
    dataset = build_training_dataset(config.training, config.data)
    transforms, stats = build_transforms(config, model_spec("pi05_tiny"), dataset)
    low = transforms.sample_transform.normalizer.features["observation.state"].low
    file_q01 = dataset_stats(root).stats["observation.state"]["q01"]
    np.testing.assert_allclose(low.numpy(), file_q01[::-1].astype(np.float32))
    assert stats is not None and stats["observation.state"]["q01"].tolist() == file_q01[::-1].tolist()

"""hdf5_datasets: robomimic and ALOHA layouts written here with h5py, read back with LeRobot keys and pads."""

from __future__ import annotations

import io
from pathlib import Path

import attrs
import h5py
import numpy as np
import pytest
import torch
from PIL import Image

from embodied_core import registry
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import DataError, UsageError
from embodied_data.hdf5 import Hdf5Dataset, scan_hdf5

H, W = 12, 16


def _frame(episode: int, t: int) -> np.ndarray:
    """A frame whose pixels encode (episode, t) so a mis-indexed frame is detected."""
    img = np.zeros((H, W, 3), dtype=np.uint8)
    img[..., 0] = 10 * episode
    img[..., 1] = 4 * t
    img[..., 2] = 200
    return img


def _write_robomimic(path: Path, lengths: dict[int, int], *, masks: dict[str, list[int]] | None = None) -> None:
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = '{"env_name": "Lift", "type": 1}'
        for demo, length in lengths.items():
            g = data.create_group(f"demo_{demo}")
            t = np.arange(length, dtype=np.float64)
            g.create_dataset("actions", data=np.stack([1000 * demo + t + 0.25 * j for j in range(4)], axis=1))
            obs = g.create_group("obs")
            obs.create_dataset("robot0_eef_pos", data=np.stack([100 * demo + t + j / 8 for j in range(3)], axis=1))
            obs.create_dataset("robot0_gripper_qpos", data=np.stack([-t, -t - 0.5], axis=1))
            obs.create_dataset("agentview_image", data=np.stack([_frame(demo, i) for i in range(length)]))
            g.create_dataset("rewards", data=t / 64)
        if masks:
            mask = f.create_group("mask")
            for split, demos in masks.items():
                mask.create_dataset(split, data=np.array([f"demo_{d}".encode() for d in demos]))


def _jpeg(img: np.ndarray) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(img).save(buffer, format="JPEG", quality=95)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _write_aloha(path: Path, episode: int, length: int, *, images: str) -> None:
    with h5py.File(path, "w") as f:
        f.attrs["task"] = "transfer the cube"
        t = np.arange(length, dtype=np.float32)
        f.create_dataset("action", data=np.stack([1000 * episode + t + j for j in range(14)], axis=1))
        obs = f.create_group("observations")
        obs.create_dataset("qpos", data=np.stack([100 * episode + t + j for j in range(14)], axis=1))
        obs.create_dataset("qvel", data=np.zeros((length, 14), dtype=np.float32))
        cams = obs.create_group("images")
        frames = [_frame(episode, i) for i in range(length)]
        if images == "raw":
            cams.create_dataset("cam_high", data=np.stack(frames))
        elif images == "jpeg_vlen":
            ds = cams.create_dataset("cam_high", (length,), dtype=h5py.vlen_dtype(np.uint8))
            for i, img in enumerate(frames):
                ds[i] = _jpeg(img)
        else:  # ACT's padded layout: rows of JPEG bytes padded with zeros to the longest one
            encoded = [_jpeg(img) for img in frames]
            padded = np.zeros((length, max(len(e) for e in encoded) + 7), dtype=np.uint8)
            for i, e in enumerate(encoded):
                padded[i, : len(e)] = e
            cams.create_dataset("cam_high", data=padded)


def _config(**overrides: object) -> BaseDataConfig:
    base = {"camera_keys": ["observation.images.agentview"], "state_dim": 5, "action_dim": 4, "action_horizon": 4,
            "state_history": 2, "image_history": 2}
    return BaseDataConfig(**{**base, **overrides})


@pytest.fixture
def robomimic_file(tmp_path: Path) -> Path:
    path = tmp_path / "lift.hdf5"
    _write_robomimic(path, {10: 6, 0: 5, 2: 3}, masks={"train": [0, 10], "valid": [2]})
    return path


def test_robomimic_demos_sorted_numerically_and_split_masks(robomimic_file: Path) -> None:
    train = scan_hdf5(robomimic_file, split="train")
    assert [ep.group for ep in train.episodes] == ["data/demo_0", "data/demo_10"]
    valid = scan_hdf5(robomimic_file, split="valid")
    assert [ep.group for ep in valid.episodes] == ["data/demo_2"]
    assert train.layout == "robomimic"
    assert train.fps == 20.0
    with pytest.raises(UsageError, match="has masks train, valid"):
        scan_hdf5(robomimic_file, split="test")


def test_robomimic_sample_keys_windows_and_pads(robomimic_file: Path) -> None:
    ds = Hdf5Dataset(str(robomimic_file), _config(), split="train")
    assert len(ds) == 11
    first = ds[0]  # demo_0, frame 0: state history pads before the start
    assert first["observation.state"].shape == (2, 5)
    assert first["observation.state_is_pad"].tolist() == [True, False]
    # observation.state = eef_pos (3) then gripper_qpos (2), in name order; the padded row repeats frame 0
    assert torch.equal(first["observation.state"][0], first["observation.state"][1])
    assert first["observation.state"][1].tolist() == [0.0, 0.125, 0.25, -0.0, -0.5]
    assert first["action"].shape == (4, 4)
    assert first["action"].dtype == torch.float32
    assert first["action_is_pad"].tolist() == [False] * 4
    assert first["task"] == "Lift"
    last = ds[4]  # demo_0, frame 4 (last of 5): action window runs past the end
    assert last["action"][:, 0].tolist() == [4.0, 4.0, 4.0, 4.0]
    assert last["action_is_pad"].tolist() == [False, True, True, True]
    assert int(last["frame_index"]) == 4
    assert int(last["episode_index"]) == 0
    demo10 = ds[5 + 2]  # second selected episode is demo_10
    assert demo10["action"][0].tolist() == [10002.0, 10002.25, 10002.5, 10002.75]
    assert int(demo10["episode_index"]) == 10  # the demo number, stable across splits
    cam = demo10["observation.images.agentview"]
    assert cam.shape == (2, 3, H, W)
    assert cam.dtype == torch.uint8
    assert torch.equal(cam[1], torch.from_numpy(_frame(10, 2)).permute(2, 0, 1))
    assert torch.equal(cam[0], torch.from_numpy(_frame(10, 1)).permute(2, 0, 1))
    assert demo10["timestamp"].item() == pytest.approx(2 / 20)
    assert demo10["next.reward"].item() == pytest.approx(2 / 64)


def test_history_one_has_no_time_axis(robomimic_file: Path) -> None:
    ds = Hdf5Dataset(str(robomimic_file), _config(state_history=1, image_history=1))
    sample = ds[1]
    assert sample["observation.state"].shape == (5,)
    assert sample["observation.images.agentview"].shape == (3, H, W)
    assert "observation.state_is_pad" not in sample
    assert "action_is_pad" in sample


def test_missing_camera_names_the_valid_keys(robomimic_file: Path) -> None:
    with pytest.raises(DataError, match=r"observation\.images\.agentview"):
        Hdf5Dataset(str(robomimic_file), _config(camera_keys=["observation.images.agentvew"]))


@pytest.mark.parametrize("images", ["raw", "jpeg_vlen", "jpeg_padded"])
def test_aloha_folder(tmp_path: Path, images: str) -> None:
    for episode, length in ((10, 4), (0, 3), (1, 5)):
        _write_aloha(tmp_path / f"episode_{episode}.hdf5", episode, length, images=images)
    config = _config(camera_keys=["observation.images.cam_high"], state_dim=14, action_dim=14, action_horizon=3)
    ds = Hdf5Dataset(str(tmp_path), config)
    assert ds.index.layout == "aloha"
    assert ds.index.fps == 50.0
    assert [ep.file.name for ep in ds.index.episodes] == ["episode_0.hdf5", "episode_1.hdf5", "episode_10.hdf5"]
    assert len(ds) == 12
    sample = ds[3 + 5 + 1]  # episode_10, frame 1
    assert sample["observation.state"][1, 0].item() == 1001.0
    assert sample["action"][:, 0].tolist() == [10001.0, 10002.0, 10003.0]
    assert sample["task"] == "transfer the cube"
    assert int(sample["episode_index"]) == 10
    frame = sample["observation.images.cam_high"][1].permute(1, 2, 0).numpy().astype(int)
    tolerance = 0 if images == "raw" else 6  # JPEG at quality 95 on flat colours
    assert np.abs(frame - _frame(10, 1)).max() <= tolerance
    assert set(ds.index.features) >= {"observation.state", "observation.velocity", "action",
                                      "observation.images.cam_high"}


def test_stats_exact_for_lowdim(robomimic_file: Path) -> None:
    ds = Hdf5Dataset(str(robomimic_file), _config())
    stats = ds.stats
    actions = np.concatenate([[1000 * d + t + 0.25 * j for j in range(4)] for d, n in ((0, 5), (10, 6))
                              for t in range(n)]).reshape(-1, 4)
    assert np.allclose(stats["action"]["mean"], actions.mean(0))
    assert np.allclose(stats["action"]["q01"], np.quantile(actions, 0.01, axis=0))
    assert not np.allclose(stats["action"]["q01"], stats["action"]["min"])
    assert "observation.images.agentview" not in stats  # normalization stats: numeric keys only
    assert ds.compute_stats()["observation.images.agentview"]["mean"].shape == (3, 1, 1)


def test_format_plugin_builds_from_training_args(robomimic_file: Path) -> None:
    factory = registry.load_factory("embodied.dataset_formats", "hdf5_datasets")
    args = attrs.evolve(TrainingArgs(), dataset_format="hdf5_datasets", dataset_path=str(robomimic_file),
                        split="valid")
    ds = factory(args, _config())
    assert len(ds) == 3


def test_worker_processes_reopen_files(robomimic_file: Path) -> None:
    ds = Hdf5Dataset(str(robomimic_file), _config())
    ds[0]  # open a handle in the parent first: workers must not reuse it
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=lambda b: b)
    indices = [int(s["index"]) for batch in loader for s in batch]
    assert indices == list(range(len(ds)))

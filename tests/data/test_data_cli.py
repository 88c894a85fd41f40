"""``embodied data synth|inspect|stats``: a synthesized v3.0 dataset inspects clean, reads with the LeRobot
reader (frames aligned with the state), and a damaged copy fails inspect with every problem listed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from embodied_core import registry
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import UsageError
from embodied_data.cli import main
from embodied_data.cli.inspect import inspect_dataset
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.stats import read_stats_json
from tests.support import DATASETS_DIR, run_embodied

SIZE = 32


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth") / "reach"
    code = main(["synth", str(root), "--episodes", "3", "--min-length", "8", "--max-length", "12", "--image-size",
                 str(SIZE), str(SIZE), "--cameras", "front", "wrist", "--episodes-per-file", "2", "--num-tasks", "2"])
    assert code == 0
    return root


def _data(root: Path) -> dict[str, np.ndarray]:
    tables = [pq.read_table(f) for f in sorted((root / "data").glob("**/*.parquet"))]
    return {k: np.concatenate([np.asarray(t.column(k).to_pylist()) for t in tables]) for k in tables[0].column_names}


def test_synth_writes_the_v30_layout(synth_root: Path) -> None:
    info = json.loads((synth_root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["total_episodes"] == 3
    assert info["features"]["observation.images.wrist"]["shape"] == [SIZE, SIZE, 3]
    files = sorted(str(p.relative_to(synth_root)) for p in synth_root.rglob("*") if p.is_file())
    assert files == ["data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet",
                     "meta/episodes/chunk-000/file-000.parquet", "meta/info.json", "meta/stats.json",
                     "meta/tasks.parquet",
                     "videos/observation.images.front/chunk-000/file-000.mp4",
                     "videos/observation.images.front/chunk-000/file-001.mp4",
                     "videos/observation.images.wrist/chunk-000/file-000.mp4",
                     "videos/observation.images.wrist/chunk-000/file-001.mp4"]
    data = _data(synth_root)
    assert data["index"].tolist() == list(range(info["total_frames"]))
    stats = read_stats_json(synth_root / "meta/stats.json")
    np.testing.assert_allclose(stats["action"]["q01"], np.quantile(data["action"], 0.01, axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["mean"], data["action"].mean(0), rtol=1e-6)
    assert stats["observation.images.front"]["q99"].shape == (3, 1, 1)


def test_synth_task_moves_the_arm_toward_the_target() -> None:
    from embodied_data.synth.task import TaskParams, simulate_episode

    episode = simulate_episode(np.random.default_rng(1), length=60, fps=10, task_index=0, params=TaskParams())
    target = episode.targets[0]
    before = np.linalg.norm(target - episode.state, axis=1)
    after = np.linalg.norm(target - episode.action, axis=1)
    assert (after < before).mean() > 0.95
    np.testing.assert_array_equal(episode.state[1:], episode.action[:-1])  # the action is the next state


def test_inspect_synth_is_clean_and_names_the_codec(synth_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(synth_root)]) == 0
    out = capsys.readouterr().out
    assert "version: LeRobot v3.0" in out
    assert "no problems found" in out
    report = inspect_dataset(synth_root)
    codecs = report.facts["cameras"]["observation.images.front"]["codec_in_files"]
    assert codecs in (["h264"], ["mpeg4"])
    assert report.facts["frames"] == json.loads((synth_root / "meta/info.json").read_text())["total_frames"]


def test_synth_reads_with_the_lerobot_reader_and_frames_match_the_state(synth_root: Path) -> None:
    ds = LeRobotDataset(synth_root, delta_timestamps={"action": [0.0, 0.1, 0.2]}, video_backend="pyav")
    data = _data(synth_root)
    lengths = np.bincount(data["episode_index"])
    last_episode_start = int(lengths[:2].sum())  # episode 2 lives in file-001
    for row in (0, 5, last_episode_start, last_episode_start + 3, len(ds) - 1):
        sample = ds[row]
        assert sample["action"].shape == (3, 2)
        frame = sample["observation.images.front"].numpy().astype(int)  # [3, H, W]
        x, y = ((data["observation.state"][row] + 1) / 2 * (SIZE - 1)).round().astype(int)
        red, green, blue = frame[:, y, x]
        assert blue > red + 60, f"row {row}: no arm at its state position {x, y}: rgb {red, green, blue}"
        assert blue > green + 60
    assert ds[0]["task"] == "move the arm to the red target"
    assert ds[last_episode_start - 1]["task"] == "move the arm to the green target"


def test_synth_builds_through_the_lerobot_format_plugin(synth_root: Path) -> None:
    factory = registry.load_factory("embodied.dataset_formats", "lerobot_datasets")
    args = attrs.evolve(TrainingArgs(), dataset_path=str(synth_root))
    config = BaseDataConfig(camera_keys=["observation.images.front"], state_dim=2, action_dim=2, action_horizon=4,
                            image_size=(SIZE, SIZE))
    sample = factory(args, config)[3]
    assert sample["action"].shape == (4, 2)
    assert sample["observation.images.front"].dtype == torch.uint8
    assert sample["observation.images.front"].shape[-2:] == (SIZE, SIZE)


def test_stats_command(synth_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(synth_root), "--episodes", "0-1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["action"]["count"] == [int(np.bincount(_data(synth_root)["episode_index"])[:2].sum())]
    assert "quantiles computed from data" in out["sources"]["action"]


def test_synth_refuses_a_non_empty_output(synth_root: Path) -> None:
    with pytest.raises(UsageError, match="--overwrite"):
        main(["synth", str(synth_root), "--episodes", "1"])
    with pytest.raises(UsageError, match="--image-size"):
        main(["synth", str(synth_root.parent / "odd"), "--image-size", "33", "32"])


@pytest.mark.timeout(120)
def test_inspect_broken_dataset_lists_every_problem(synth_root: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(synth_root, broken)
    (broken / "videos/observation.images.wrist/chunk-000/file-001.mp4").unlink()
    (broken / "data/chunk-000/file-000.parquet").unlink()
    info = json.loads((broken / "meta/info.json").read_text())
    info["total_frames"] += 5
    info["features"]["observation.images.front"]["shape"] = [SIZE, SIZE + 2, 3]
    (broken / "meta/info.json").write_text(json.dumps(info))
    result = run_embodied("data", "inspect", str(broken), timeout=110)
    assert result.returncode == 1, result.stderr
    problems = result.stdout.split("PROBLEMS (4):")[1]
    assert "total_frames" in problems
    assert "data files missing for 2 episode(s): 0-1" in problems
    assert "observation.images.wrist: video files missing for 1 episode(s): 2" in problems
    assert f"declares {SIZE + 2}x{SIZE}" in problems


def test_inspect_real_partial_dataset_reports_missing_videos_and_codec() -> None:
    report = inspect_dataset(DATASETS_DIR / "lingzu_pi05_v30")
    assert not report.ok
    assert report.facts["cameras"]["image"]["codec_in_files"] == ["mpeg4"]
    assert any("video.codec 'h264', the files are mpeg4" in note for note in report.notes)
    assert any("video files missing for 43 episode(s): 0-2, 7-9, 13-49" in p for p in report.problems)
    assert inspect_dataset(DATASETS_DIR / "lerobot_written/v20").ok


def test_inspect_not_a_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    assert "info.json" in out["problems"][0]


def test_inspect_hdf5_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import h5py

    for episode, length in ((0, 4), (1, 6)):
        with h5py.File(tmp_path / f"episode_{episode}.hdf5", "w") as f:
            f.create_dataset("action", data=np.zeros((length, 14), dtype=np.float32))
            f.create_dataset("observations/qpos", data=np.zeros((length, 14), dtype=np.float32))
            f.create_dataset("observations/images/cam_high", data=np.zeros((length, 8, 8, 3), dtype=np.uint8))
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "format: HDF5 (aloha)   fps: 50   episodes: 2   frames: 10" in out
    assert "observation.images.cam_high" in out
    (tmp_path / "episode_1.hdf5").write_bytes(b"not hdf5")
    assert main(["inspect", str(tmp_path)]) == 1
    assert "cannot open" in capsys.readouterr().out


def test_synth_mpeg4_codec_is_probed_from_the_file(tmp_path: Path) -> None:
    root = tmp_path / "mpeg4"
    assert main(["synth", str(root), "--episodes", "2", "--min-length", "5", "--max-length", "6", "--image-size",
                 "16", "16", "--codec", "mpeg4"]) == 0
    report = inspect_dataset(root)
    assert report.ok, report.problems
    assert report.facts["cameras"]["observation.images.front"]["codec_in_files"] == ["mpeg4"]
    sample = LeRobotDataset(root, video_backend="torchcodec")[6]
    assert sample["observation.images.front"].shape == (3, 16, 16)

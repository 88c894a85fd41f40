"""lerobot 0.6.1's own ``LeRobotDataset`` (in .venv-lerobot, a subprocess) reads the LeRobot v3.0 datasets we write
and returns what our reader returns: same episodes, frames, states, actions, indices, timestamps and task strings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from embodied_data.lerobot.dataset import LeRobotDataset
from tests.support import REPO_ROOT, clean_env, run_embodied

LEROBOT_PYTHON = REPO_ROOT / ".venv-lerobot" / "bin" / "python"
SCRIPT = Path(__file__).with_name("lerobot_read_script.py")
INT_KEYS = ("episode_index", "frame_index", "index", "task_index")


def lerobot_read(root: Path, indices: list[int], tmp_path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """Rows ``indices`` of ``root`` as lerobot's LeRobotDataset returns them (see lerobot_read_script.py)."""
    assert LEROBOT_PYTHON.is_file(), f"{LEROBOT_PYTHON} missing: run scripts/setup.sh (it creates .venv-lerobot)"
    out = tmp_path / "lerobot_rows.npz"
    env = clean_env(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), OMP_NUM_THREADS="1")
    proc = subprocess.run([str(LEROBOT_PYTHON), str(SCRIPT), str(root), str(out), *map(str, indices)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as data:
        arrays = {key: data[key] for key in data.files}
    return arrays, json.loads(out.with_suffix(".json").read_text())


def assert_same_rows(root: Path, indices: list[int], tmp_path: Path) -> dict:
    """lerobot's rows equal ours (frames within one level of the float round trip); returns lerobot's facts."""
    arrays, facts = lerobot_read(root, indices, tmp_path)
    ours = LeRobotDataset(root)
    assert facts["num_episodes"] == len(ours.meta.episodes)
    assert facts["num_frames"] == len(ours)
    assert facts["fps"] == ours.meta.fps
    assert facts["camera_keys"] == list(ours.meta.camera_keys)
    assert facts["episode_lengths"] == [e.length for e in ours.meta.episodes.values()]
    for row, task in zip(indices, facts["tasks"], strict=True):
        sample = ours[row]
        assert task == sample["task"], row
        for key in ours.meta.camera_keys:
            frame = sample[key].numpy().transpose(1, 2, 0)  # ours: uint8 [3, H, W]
            theirs = arrays[f"{row}|{key}"]
            assert theirs.shape == frame.shape
            # both decode the same H.264 stream; lerobot hands floats x/255, rounded back here
            assert np.abs(theirs.astype(int) - frame.astype(int)).max() <= 1, (row, key)
        for key in ("observation.state", "action"):
            np.testing.assert_array_equal(arrays[f"{row}|{key}"], sample[key].numpy(), err_msg=f"{row} {key}")
        for key in INT_KEYS:
            assert int(arrays[f"{row}|{key}"]) == int(sample[key]), (row, key)
        assert float(arrays[f"{row}|timestamp"]) == pytest.approx(float(sample["timestamp"]), abs=1e-6)
    return facts


def test_lerobot_reads_our_synth_dataset(tmp_path: Path) -> None:
    root = tmp_path / "synth"
    result = run_embodied("data", "synth", str(root), "--episodes", "2", "--seed", "3")
    assert result.returncode == 0, result.stderr
    length = LeRobotDataset(root).meta.episodes[0].length
    facts = assert_same_rows(root, [0, 7, length - 1, length, length + 11], tmp_path)
    assert facts["num_episodes"] == 2

"""lerobot 0.6.1's own ``LeRobotDataset`` (in .venv-lerobot, a subprocess) reads the LeRobot v3.0 datasets we write
(``embodied data collect`` of MetaWorld's expert, ``embodied data synth``) and returns what our reader returns: same
episodes, frames, states, actions, indices, timestamps and task strings."""

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


def lerobot_read(jobs: list[tuple[Path, list[int]]], tmp_path: Path) -> list[tuple[dict[str, np.ndarray], dict]]:
    """For each (root, rows): the rows as lerobot's LeRobotDataset returns them (see lerobot_read_script.py)."""
    assert LEROBOT_PYTHON.is_file(), f"{LEROBOT_PYTHON} missing: run scripts/setup.sh (it creates .venv-lerobot)"
    out = tmp_path / "lerobot_rows"
    out.mkdir()
    env = clean_env(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), OMP_NUM_THREADS="1")
    args = [f"{root}={','.join(map(str, rows))}" for root, rows in jobs]
    proc = subprocess.run([str(LEROBOT_PYTHON), str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = []
    for k in range(len(jobs)):
        with np.load(out / f"{k}.npz") as data:
            arrays = {key: data[key] for key in data.files}
        results.append((arrays, json.loads((out / f"{k}.json").read_text())))
    return results


def assert_same_rows(root: Path, indices: list[int], arrays: dict[str, np.ndarray], facts: dict) -> None:
    """lerobot's rows equal ours (frames within one level of the float round trip)."""
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


def test_lerobot_reads_our_collected_and_synth_datasets(tmp_path: Path) -> None:
    collected = tmp_path / "metaworld"
    done = run_embodied("data", "collect", "--env", "metaworld", "--task", "button-press-topdown-v3", "--episodes",
                        "2", "--image-size", "64", "--out", str(collected), "--no-progress")
    assert done.returncode == 0, done.stderr
    synth = tmp_path / "synth"
    done = run_embodied("data", "synth", str(synth), "--episodes", "2", "--seed", "3")
    assert done.returncode == 0, done.stderr
    jobs = []
    for root in (collected, synth):
        first = LeRobotDataset(root).meta.episodes[0].length  # rows around the episode boundary
        jobs.append((root, [0, 7, first - 1, first, first + 11]))
    (mw_rows, mw_facts), (synth_rows, synth_facts) = lerobot_read(jobs, tmp_path)
    assert_same_rows(collected, jobs[0][1], mw_rows, mw_facts)
    assert mw_facts["camera_keys"] == ["observation.image"] and mw_facts["fps"] == 80  # lerobot's MetaWorld keys
    assert set(mw_facts["tasks"]) == {"Press a button from the top"}
    assert mw_rows["0|observation.image"].shape == (64, 64, 3)
    assert np.abs(mw_rows["7|action"]).max() <= 1.0  # the expert's actions as recorded: clipped to the space
    assert_same_rows(synth, jobs[1][1], synth_rows, synth_facts)
    assert synth_facts["num_episodes"] == 2

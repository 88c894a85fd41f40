"""``embodied data collect``: an env's scripted expert recorded as a LeRobot v3.0 dataset that ``embodied data
inspect --deep`` passes and the training loader reads; clipped actions, re-seeded failures, resuming."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from embodied_core.errors import DataError, UsageError
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.stats.io import read_stats_json
from embodied_eval.collect import CollectSettings, collect_dataset
from embodied_eval.env_options import resolve_env
from tests.support import run_embodied

BPT = "button-press-topdown-v3"


def _collect(out: Path, *args: str) -> str:
    done = run_embodied("data", "collect", "--out", str(out), "--no-progress", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_metaworld_expert_dataset_inspects_clean_loads_and_resumes(tmp_path):
    out = tmp_path / "bpt"
    stdout = _collect(out, "--env", "metaworld", "--task", BPT, "--episodes", "2", "--image-size", "64")
    assert "2 episodes (2 new)" in stdout
    inspect = run_embodied("data", "inspect", str(out), "--deep")
    assert inspect.returncode == 0 and "no problems found" in inspect.stdout, inspect.stdout + inspect.stderr

    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 80
    assert info["features"]["observation.image"]["shape"] == [64, 64, 3]
    state = json.loads((out / "meta" / "collect.json").read_text())
    assert [e["seed"] for e in state["episodes"]] == [0, 1] and state["env_settings"]["render"]["look"] == "fast"

    # the training loader: action chunks with padding, frames, the task string of the episode
    fps = info["fps"]
    data = LeRobotDataset(out, delta_timestamps={"action": [k / fps for k in range(4)]}, video_backend="pyav")
    batch = next(iter(torch.utils.data.DataLoader(data, batch_size=4, shuffle=False)))
    assert batch["observation.image"].shape == (4, 3, 64, 64) and batch["observation.image"].dtype == torch.uint8
    assert batch["action"].shape == (4, 4, 4) and batch["task"] == ["Press a button from the top"] * 4

    # what was recorded is the env's own rollout: frames and states before each action, the expert's action
    # clipped to the action space (it asks for up to +-25)
    factory, _ = resolve_env("metaworld", flags={"task": BPT, "image_size": "64"})
    env = factory(None)
    try:
        obs = env.reset(0)
        rows = [data[i] for i in range(data.meta.episodes[0].length)]
        raw_max = 0.0
        for t, row in enumerate(rows):
            np.testing.assert_array_equal(row["observation.state"].numpy(), obs["observation.state"], err_msg=str(t))
            expert = env.expert_action()
            raw_max = max(raw_max, float(np.abs(expert).max()))
            np.testing.assert_array_equal(row["action"][0].numpy(), np.clip(expert, -1, 1), err_msg=str(t))
            step = env.step(np.clip(expert, -1, 1))
            obs = step.observation
        assert step.success and raw_max > 1.0
        recorded = np.stack([r["action"][0].numpy() for r in rows])
        assert np.abs(recorded).max() == 1.0
    finally:
        env.close()

    # the same command with more episodes continues; other settings into the folder are refused
    assert "3 episodes (1 new)" in _collect(out, "--env", "metaworld", "--task", BPT, "--episodes", "3",
                                             "--image-size", "64")
    # stats.json covers every episode after the resume: exact quantiles of all recorded actions
    actions = np.concatenate([np.stack(pq.read_table(f).column("action").to_numpy(zero_copy_only=False))
                              for f in sorted((out / "data").rglob("*.parquet"))])
    stats = read_stats_json(out / "meta" / "stats.json")
    assert actions.shape[0] == json.loads((out / "meta" / "info.json").read_text())["total_frames"]
    np.testing.assert_allclose(stats["action"]["q99"], np.quantile(actions, 0.99, axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["mean"], actions.mean(axis=0), rtol=1e-5, atol=1e-7)
    refused = run_embodied("data", "collect", "--out", str(out), "--no-progress", "--env", "metaworld", "--task",
                           BPT, "--episodes", "3", "--image-size", "96")
    assert refused.returncode == 2 and "collected with other settings" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_failed_expert_episodes_are_reseeded_not_recorded(tmp_path):
    """synth_reach's expert needs 3 frames on the target: in 8 steps it makes it from some starts only."""
    settings = CollectSettings(num_episodes=3, seed=0, max_steps=8)
    summary = collect_dataset("synth_reach", tmp_path / "a", settings, show_progress=False)
    state = json.loads((tmp_path / "a" / "meta" / "collect.json").read_text())
    kept, failed = [e["seed"] for e in state["episodes"]], [f["seed"] for f in state["failures"]]
    assert failed and len(kept) == 3 and all(e["success"] for e in state["episodes"])
    assert sorted(kept + failed) == list(range(len(kept) + len(failed)))  # seeds tried in order, none skipped
    assert summary.attempts == len(kept) + len(failed) and summary.failures == len(failed)
    # deterministic: a fresh folder gets the same seeds; --keep-failures records the failed ones too
    again = collect_dataset("synth_reach", tmp_path / "b", settings, show_progress=False)
    assert json.loads((tmp_path / "b" / "meta" / "collect.json").read_text())["episodes"] == state["episodes"]
    assert again.num_frames == summary.num_frames
    keep = collect_dataset("synth_reach", tmp_path / "c", CollectSettings(num_episodes=3, max_steps=8,
                                                                        keep_failures=True), show_progress=False)
    kept_all = json.loads((tmp_path / "c" / "meta" / "collect.json").read_text())["episodes"]
    assert [e["seed"] for e in kept_all] == [0, 1, 2] and keep.num_episodes == 3


def test_an_expert_that_never_succeeds_stops_with_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="the expert failed 3 episodes of synth_reach"):
        collect_dataset("synth_reach", tmp_path / "x", CollectSettings(num_episodes=2, max_steps=1, max_failures=3),
                        show_progress=False)


def test_bad_settings_are_refused_before_any_env_is_built(tmp_path):
    with pytest.raises(UsageError, match=r"--episodes must be >= 1 \(got 0\); --policy 'random': valid: expert"):
        collect_dataset("metaworld", tmp_path / "o", CollectSettings(num_episodes=0, policy="random"),
                        env_flags={"task": "reach-v3"}, show_progress=False)
    with pytest.raises(UsageError, match="give --task"):
        collect_dataset("metaworld", tmp_path / "o", CollectSettings(num_episodes=1), show_progress=False)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--env", "pusht", "--episodes", "1"], "has no scripted expert"),
    (["--env", "metaworld", "--task", "reach-v2", "--episodes", "1"], "did you mean 'reach-v3'"),
    (["--env", "synth_reach", "--task", "x"], "unrecognized arguments: --task"),
])
def test_bad_input_exits_2_with_a_message(tmp_path, args, message):
    done = run_embodied("data", "collect", "--out", str(tmp_path / "o"), "--no-progress", *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr

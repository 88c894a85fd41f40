"""``embodied eval --env metaworld`` with a real checkpoint: expert demos collected, smolvla_tiny trained a few
steps on them, evaluated in two tasks (episodes per task, lerobot-eval's aggregation, the hold baseline, videos
from the observation frames). Checks the pipeline, not the success rate."""

from __future__ import annotations

import json

import av
import pytest

from embodied_core.trainer.api import Trainer
from embodied_eval import RolloutSettings, evaluate
from embodied_eval.collect import CollectSettings, collect_dataset

pytestmark = pytest.mark.slow

TASKS = "button-press-topdown-v3,reach-v3"


def test_a_trained_policy_runs_per_task_with_baseline_and_videos(tmp_path):
    data = tmp_path / "demos"
    collect_dataset("metaworld", data, CollectSettings(num_episodes=1), env_flags={"task": "reach-v3",
                                                                                  "image_size": "64"},
                    show_progress=False)
    run = tmp_path / "run"
    Trainer({
        "training": {"model_name": "smolvla_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(data),
                     "train_iters": 2, "save_interval": 2, "dtype": "float32", "per_device_batch_size": 2,
                     "num_workers": 0, "lr_warmup_iters": 0, "log_interval": 2, "output_dir": str(run)},
    }).train()
    out = tmp_path / "eval"
    report = evaluate(run / "checkpoints" / "step_2", env="metaworld", env_flags={"task": TASKS},
                      settings=RolloutSettings(num_episodes=2, seed=1000, max_steps=3, video_dir=out / "videos"),
                      output_dir=out, baselines=("hold",), show_progress=False)
    doc = json.loads((out / "eval.json").read_text())
    assert [(e["task"], e["seed"]) for e in doc["episodes"]] == [
        ("button-press-topdown-v3", 1000), ("button-press-topdown-v3", 1001), ("reach-v3", 1000), ("reach-v3", 1001)]
    assert doc["env"]["render"]["look"] == "fast" and doc["env"]["render"]["image_size"] == [64, 64]
    assert doc["env"]["action_semantics"] == "delta" and doc["env"]["options"]["task"] == TASKS
    tasks = doc["tasks"]
    assert list(tasks["per_task"]) == TASKS.split(",") and list(tasks["per_group"]) == ["easy"]
    assert tasks["overall"]["episodes"] == 4 and "Avg" in tasks["mean_of_group_means"]["label"]
    assert "success per task and group" in report.table and "Avg (mean of group means)" in report.table
    hold = json.loads((out / "baselines" / "hold" / "eval.json").read_text())
    assert hold["tasks"]["overall"]["episodes"] == 4 and hold["policy"]["name"] == "hold"
    with av.open(str(out / "videos" / "episode_000.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 4 and frames[0].shape == (192, 192, 3)  # reset + 3 steps; 64 px enlarged 3x

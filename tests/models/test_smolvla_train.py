"""smolvla_tiny trains through the real CLI on a real LeRobot v3.0 video dataset (two cameras of different sizes,
7-dim state, 4-dim actions, episode ends padded) and its loss falls; the checkpoint is a policy folder."""

from __future__ import annotations

import json
import math

import pytest

from tests.support import DATASETS_DIR, clean_env, run_embodied

V30 = DATASETS_DIR / "lerobot_written" / "v30"


@pytest.mark.timeout(300)
def test_cli_training_on_a_real_dataset_lowers_the_loss(tmp_path):
    out = tmp_path / "run"
    result = run_embodied(
        "train", "--model-name", "smolvla_tiny", "--dataset-format", "lerobot_datasets", "--dataset-path", str(V30),
        "--train-iters", "40", "--per-device-batch-size", "8", "--num-workers", "0", "--dtype", "float32",
        "--lr-base", "2e-3", "--lr-warmup-iters", "0", "--min-lr", "2e-4", "--log-interval", "1", "--seed", "3",
        "--save-interval", "40", "--output-dir", str(out), env=clean_env(OMP_NUM_THREADS="1"), timeout=280)
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in rows]
    assert len(losses) == 40 and all(math.isfinite(x) for x in losses)
    first, last = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    print(f"smolvla_tiny on v30: mean loss of steps 1-8 {first:.3f}, of steps 33-40 {last:.3f}; "
          f"median step_time_s {sorted(r['step_time_s'] for r in rows)[20]:.3f}")
    assert last < 0.8 * first
    checkpoint = out / "checkpoints" / "step_40"
    policy = json.loads((checkpoint / "policy.json").read_text())
    assert policy["model_name"] == "smolvla_tiny"
    assert policy["interface"]["camera_keys"] == ["observation.images.front", "observation.images.wrist"]
    assert policy["interface"]["image_shapes"] == {"observation.images.front": [120, 160, 3],
                                                   "observation.images.wrist": [72, 96, 3]}
    assert (checkpoint / "stats.safetensors").is_file() and (checkpoint / "model.safetensors").is_file()

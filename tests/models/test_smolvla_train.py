"""smolvla_tiny trains through the real CLI, launched by examples/smolvla/run_smolvla_ddp_finetune.sh (torchrun, one
process, DDP on gloo), on a real LeRobot v3.0 video dataset (two cameras of different sizes, 7-dim state, 4-dim
actions, episode ends padded); its loss falls and the checkpoint is a policy folder."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.models.test_pi05_distributed import _free_port
from tests.support import DATASETS_DIR, REPO_ROOT, clean_env, recipe_env

V30 = DATASETS_DIR / "lerobot_written" / "v30"
RECIPE = REPO_ROOT / "examples" / "smolvla" / "run_smolvla_ddp_finetune.sh"

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_recipe_trains_smolvla_tiny_on_a_real_dataset_and_the_loss_falls(tmp_path: Path):
    out = tmp_path / "run"
    env = clean_env(OMP_NUM_THREADS="1", MODEL_NAME="smolvla_tiny", TOKENIZER_PATH="", CHECKPOINT_PATH="",
                    DATA_PATH=str(V30), OUTPUT_DIR=str(out), NPROC_PER_NODE="1", NUM_WORKERS="0", TRAIN_ITERS="40",
                    PER_DEVICE_BATCH_SIZE="8", LR="2e-3", MIN_LR="2e-4", WARMUP_ITERS="0", DECAY_ITERS="40",
                    SAVE_INTERVAL="40", LOG_INTERVAL="1", DTYPE="float32", SEED="3", MASTER_PORT=str(_free_port()),
                    PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(RECIPE), "model.num_inference_steps=4"], env=recipe_env(env), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "embodied SmolVLA fine-tuning (DDP)" in proc.stdout
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in rows]
    assert len(losses) == 40 and all(math.isfinite(x) for x in losses)
    first, last = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    print(f"smolvla_tiny on v30: mean loss of steps 1-8 {first:.3f}, of steps 33-40 {last:.3f}; "
          f"median step_time_s {sorted(r['step_time_s'] for r in rows)[20]:.3f}")
    assert last < 0.8 * first
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["model"]["num_inference_steps"] == 4 and config["training"]["distributed_strategy"] == "ddp"
    checkpoint = out / "checkpoints" / "step_40"
    policy = json.loads((checkpoint / "policy.json").read_text())
    assert policy["model_name"] == "smolvla_tiny"
    assert policy["interface"]["image_shapes"] == {"observation.images.front": [120, 160, 3],
                                                   "observation.images.wrist": [72, 96, 3]}
    assert (checkpoint / "stats.safetensors").is_file() and (checkpoint / "model.safetensors").is_file()

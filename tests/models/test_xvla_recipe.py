"""examples/xvla/run_xvla_fsdp_finetune.sh on CPU (gloo): xvla_tiny on two processes with the recipe's FSDP units,
the VLM's 1/10 learning rate group and a policy folder at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models.test_pi05_distributed import _free_port
from tests.support import DATASETS_DIR, REPO_ROOT, clean_env

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

RECIPES = REPO_ROOT / "examples" / "xvla"


@pytest.mark.timeout(300)
def test_fsdp_recipe_trains_xvla_tiny_on_two_processes(tmp_path: Path):
    out = tmp_path / "run"
    env = clean_env(MODEL_NAME="xvla_tiny", TOKENIZER_PATH="", CHECKPOINT_PATH="",
                    DATA_PATH=str(DATASETS_DIR / "lerobot_written" / "v30"), OUTPUT_DIR=str(out), NPROC_PER_NODE="2",
                    NUM_WORKERS="0", TRAIN_ITERS="2", WARMUP_ITERS="0", SAVE_INTERVAL="2", LOG_INTERVAL="1",
                    DTYPE="float32", PER_DEVICE_BATCH_SIZE="2", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1",
                    PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(RECIPES / "run_xvla_fsdp_finetune.sh"), "data.normalization=mean_std"], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=240, start_new_session=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "embodied X-VLA fine-tuning (FSDP2)" in proc.stdout
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    # the VLM group starts at 1/10 of the base LR (both then decay toward the same --min-lr floor)
    assert rows[0]["lr/default"] == pytest.approx(1e-4) and rows[0]["lr/vlm"] == pytest.approx(1e-5)
    assert (out / "checkpoints" / "step_2" / "policy.json").is_file()

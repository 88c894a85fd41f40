"""examples/lingbot_va/train.sh on CPU (gloo): lingbot_va_tiny with NPROC_PER_NODE=2, RESUME_FROM continuing step
and LR exactly, and a 2-node launch on localhost (WORLD_SIZE=2, RANK=0/1) that selects HSDP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_models.lingbot_va.precompute import precompute_latents
from tests.support import DATASETS_DIR, recipe_env

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "examples" / "lingbot_va" / "train.sh"
DATASET = DATASETS_DIR / "lerobot_written" / "v21"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_lingbot_va_data import _base_model

    root = tmp_path_factory.mktemp("recipe")
    base = _base_model(root / "base")
    config = load_config(training={"model_name": "lingbot_va_tiny"}, data={"latent_cache": str(root / "cache")})
    precompute_latents(DATASET, base_model_path=base, data_config=config.data, text_len=config.model.text_len,
                       device="cpu", dtype=torch.float32)
    recipe_env(dict(os.environ))  # starts the warm torchrun server here, not inside the first launch's set-up
    return root


def _launch(root: Path, tag: str, *, steps: int, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "DATASET_PATH": str(DATASET), "BASE_MODEL_PATH": str(root / "base"),
           "SAVE_ROOT": str(root / "runs"), "RUN_TAG": tag, "NPROC_PER_NODE": "2", "NUM_STEPS": str(steps),
           "SAVE_INTERVAL": "2", "MODEL_NAME": "lingbot_va_tiny", "NUM_WORKERS": "0", "PER_DEVICE_BATCH_SIZE": "2",
           "MASTER_PORT": str(_free_port()), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           **(extra_env or {})}
    if "WORLD_SIZE" not in (extra_env or {}):
        env.pop("WORLD_SIZE", None)
        env.pop("RANK", None)
    env = recipe_env(env)
    return subprocess.Popen(["bash", str(RECIPE), f"data.latent_cache={root / 'cache'}"], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=240)
    first_error = out.find("Traceback")
    assert proc.returncode == 0, out[first_error:first_error + 4000] if first_error >= 0 else out[-4000:]
    return out


def _metrics(root: Path, tag: str) -> dict[int, dict]:
    lines = (root / "runs" / tag / "metrics.jsonl").read_text().splitlines()
    return {row["step"]: row for row in map(json.loads, lines) if "loss" in row}


def test_the_recipe_cache_is_precomputed(prepared):
    """The recipe trains from the latent cache (built by the module fixture, its own set-up here so that the
    launch below is the next test's set-up alone): the meta file and one latent file per episode."""
    from embodied_models.lingbot_va.cache import META_NAME, TEXT_NAME

    metas = list((prepared / "cache").rglob(META_NAME))
    assert len(metas) == 1
    folder = metas[0].parent
    assert (folder / TEXT_NAME).is_file() and len(list(folder.rglob("*.safetensors"))) > 1


@pytest.fixture(scope="module")
def full_run(prepared) -> str:
    """3 steps with a save every 2: step 2 by the interval, step 3 by the end of the run (its console output)."""
    return _finish(_launch(prepared, "full", steps=3))


@pytest.mark.timeout(600)
def test_recipe_trains_with_fsdp_and_saves(prepared, full_run):
    assert "TOPOLOGY nodes=1" in full_run and "FSDP2 (shard 2)" in full_run
    assert full_run.count("STEP_TIMING step=") == 3
    log = next((prepared / "runs" / "logs").glob("full_*.log")).read_text()
    assert "STEP_TIMING step=3" in log
    assert sorted(_metrics(prepared, "full")) == [1, 2, 3]
    assert (prepared / "runs" / "full" / "checkpoints" / "step_3" / "transformer" / "config.json").is_file()


@pytest.mark.timeout(600)
def test_recipe_resumes_exactly(prepared, full_run):
    full = _metrics(prepared, "full")
    step2 = prepared / "runs" / "full" / "checkpoints" / "step_2"
    _finish(_launch(prepared, "resumed", steps=3, extra_env={"RESUME_FROM": str(step2)}))
    resumed = _metrics(prepared, "resumed")
    assert sorted(resumed) == [3]  # the resume repeats step 3 only
    assert resumed[3]["loss"] == full[3]["loss"] and resumed[3]["lr"] == full[3]["lr"]


@pytest.mark.timeout(600)
def test_two_nodes_on_localhost_select_hsdp(prepared):
    port = str(_free_port())
    nodes = [_launch(prepared, "hsdp", steps=2,
                     extra_env={"WORLD_SIZE": "2", "RANK": str(rank), "MASTER_PORT": port, "NPROC_PER_NODE": "1"})
             for rank in (0, 1)]
    outs = [_finish(proc) for proc in nodes]
    assert "mode=HSDP (replicate 2 x shard 1)" in outs[0]
    assert "replicate x shard, HSDP" in outs[0]
    assert sorted(_metrics(prepared, "hsdp")) == [1, 2]

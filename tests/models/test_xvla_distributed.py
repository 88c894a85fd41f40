"""The X-VLA recipes (examples/xvla, DDP and FSDP2 with the declared units) on two gloo processes equal one process
training the same global batch of a real LeRobot dataset with the same settings.

X-VLA draws one flow time per batch, stratified over its samples, so a batch split over ranks would get other times
than the same batch in one process. ``xvla_tiny_det`` (defined here, loaded through EMBODIED_PLUGINS) draws the
noise and the time of each sample from a hash of its state instead, which makes the loss of a global batch
independent of the split; dropout is off. Each launch runs under a subprocess timeout, so a hung collective fails
the test instead of the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from embodied_core import registry
from embodied_core.model_api import ModelOutput
from embodied_core.registry import ModelSpec
from embodied_core.trainer.api import Trainer
from embodied_models.xvla.batch import XvlaPreparedBatch
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.modeling import XvlaModel
from tests.support import DATASETS_DIR, REPO_ROOT, clean_env, recipe_env

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

DET = "xvla_tiny_det"
MODULE = "tests.models.test_xvla_distributed"  # as the launched processes import it (PYTHONPATH=repo)


class XvlaDet(XvlaModel):
    """xvla_tiny with per-sample draws: noise and flow time seeded from the sample's state bytes."""

    def forward(self, batch: XvlaPreparedBatch) -> ModelOutput:
        noise = torch.empty_like(batch.actions, dtype=torch.float32)
        times = torch.empty(batch.actions.shape[0])
        for row, state in enumerate(batch.state.cpu()):
            seed = int(hashlib.sha1(state.numpy().tobytes()).hexdigest()[:12], 16)
            generator = torch.Generator().manual_seed(seed)
            noise[row] = torch.randn(noise.shape[1:], generator=generator)
            times[row] = torch.rand((), generator=generator)
        losses, _ = self.training_outputs(batch, noise=noise, times=times)
        return ModelOutput(loss=sum(losses.values()), metrics={k: v.detach() for k, v in losses.items()})


def build_det(model_config: XvlaModelConfig, data_config: XvlaDataConfig) -> XvlaDet:
    """Factory of DET_SPEC."""
    return XvlaDet(model_config, data_config)


DET_SPEC = ModelSpec(name=DET, description="xvla_tiny with per-sample draws (tests)",
                     factory=f"{MODULE}:build_det", model_config=XvlaModelConfig, data_config=XvlaDataConfig,
                     default_yaml="embodied_models.xvla:xvla_tiny.yaml",
                     transforms="embodied_models.xvla.transforms:make_transforms")

_OVERRIDES = ["model.dropout=0", "model.text_dropout=0", "model.vision_drop_path_rate=0", "data.normalization=mean_std"]
V30 = DATASETS_DIR / "lerobot_written" / "v30"
RECIPES = REPO_ROOT / "examples" / "xvla"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _single(out: Path) -> list[dict]:
    """The reference: one process (this one), unwrapped, with the recipes' optimizer settings (_common.sh)."""
    registry.register("embodied.models", DET, DET_SPEC, replace=True)
    Trainer({"training": {
        "model_name": DET, "dataset_format": "lerobot_datasets", "dataset_path": str(V30), "num_workers": 0,
        "per_device_batch_size": 4, "train_iters": 3, "seed": 42, "output_dir": str(out), "optimizer": "AdamW",
        "lr_base": 1e-4, "lr_group": "vlm=1e-5", "min_lr": 2.5e-6, "lr_decay_style": "cosine_with_min_lr",
        "lr_warmup_iters": 0, "adam_beta1": 0.9, "adam_beta2": 0.99, "adam_eps": 1e-8, "weight_decay": 0.0,
        "clip_grad": 10.0, "save_interval": 0, "log_interval": 1, "dtype": "float32"},
        "model": {"action_mode": "auto", "dropout": 0.0, "text_dropout": 0.0, "vision_drop_path_rate": 0.0},
        "data": {"domain_id": 0, "normalization": "mean_std"}}).train()
    return _metrics(out)


def _recipe(out: Path, script: str) -> list[dict]:
    """examples/xvla/<script> on two gloo processes (per-device batch 2: the same global batch of 4)."""
    env = clean_env(MODEL_NAME=DET, EMBODIED_PLUGINS=f"models:{DET}={MODULE}:DET_SPEC", TOKENIZER_PATH="",
                    CHECKPOINT_PATH="", DATA_PATH=str(V30), OUTPUT_DIR=str(out), NPROC_PER_NODE="2", NUM_WORKERS="0",
                    TRAIN_ITERS="3", WARMUP_ITERS="0", SAVE_INTERVAL="3", LOG_INTERVAL="1", DTYPE="float32",
                    PER_DEVICE_BATCH_SIZE="2", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1",
                    PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
                    PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env = recipe_env(env)
    log = out.with_suffix(".log")
    out.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        # own session: on timeout the whole group (torchrun and both ranks) is killed, no orphans
        proc = subprocess.Popen(["bash", str(RECIPES / script), *_OVERRIDES], stdout=sink, stderr=subprocess.STDOUT,
                                env=env, cwd=REPO_ROOT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{script} hung for 240 s:\n{log.read_text()[-4000:]}")
    assert returncode == 0, log.read_text()[-4000:]
    assert (out / "checkpoints" / "step_3" / "policy.json").is_file()
    return _metrics(out)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The one-process reference, shared by the two recipe tests (each launch is its own test, under 30 s)."""
    rows = _single(tmp_path_factory.mktemp("xvla_single") / "single")
    assert [r["step"] for r in rows] == [1, 2, 3]
    # the VLM group starts at 1/10 of the base LR (both then decay toward the same --min-lr floor)
    assert rows[0]["lr/default"] == pytest.approx(1e-4) and rows[0]["lr/vlm"] == pytest.approx(1e-5)
    return rows


@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", ["run_xvla_ddp_finetune.sh", "run_xvla_fsdp_finetune.sh"])
def test_recipe_on_two_processes_equals_one_process(single: list[dict], script: str, tmp_path: Path) -> None:
    rows = _recipe(tmp_path / script.split("_")[2], script)
    for ref, row in zip(single, rows, strict=True):
        for key in ("loss", "joints_loss", "lr/vlm"):
            assert row[key] == pytest.approx(ref[key], rel=1e-5), (script, row["step"], key)
        assert row["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-4), (script, row["step"])

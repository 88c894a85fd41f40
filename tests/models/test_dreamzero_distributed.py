"""The DreamZero LoRA recipe (examples/dreamzero, FSDP2 with one unit per DiT block, activation checkpointing with
a selective skip) on two gloo processes equals one process training the same global batch.

DreamZero draws timesteps and noise for the whole local batch, so a batch split over ranks would get other draws
than in one process; ``dreamzero_tiny_det`` (defined here, loaded through EMBODIED_PLUGINS) draws each sample's from
a hash of its state and actions instead, which makes the loss of a global batch independent of the split. Each
launch runs under a subprocess timeout, so a hung collective fails the test instead of the suite.
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
from typing import Any

import attrs
import pytest
import torch

from embodied_core import registry
from embodied_core.trainer.api import Trainer
from embodied_models.dreamzero.modeling import DreamZeroModel
from embodied_models.dreamzero.spec import dreamzero_spec
from tests.support import DATASETS_DIR, REPO_ROOT, clean_env, recipe_env

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

DET = "dreamzero_tiny_det"
MODULE = "tests.models.test_dreamzero_distributed"  # as the launched processes import it (PYTHONPATH=repo)
LIBERO = DATASETS_DIR / "strategies" / "dreamzero_libero_v21"
TOKENIZER = DATASETS_DIR / "strategies" / "tokenizers" / "umt5_tiny"
STEPS = 2


class DreamZeroDet(DreamZeroModel):
    """dreamzero_tiny whose timestep ids and noise are drawn per sample from a hash of its state and actions."""

    def draw_training_noise(self, batch: dict[str, Any], latents: torch.Tensor, actions: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        rows = []
        for i in range(actions.shape[0]):
            key = torch.cat([batch["state"][i].flatten(), batch["action"][i].flatten()]).cpu().numpy().tobytes()
            state = torch.random.get_rng_state()
            torch.manual_seed(int(hashlib.sha1(key).hexdigest()[:12], 16))
            rows.append(super().draw_training_noise(batch, latents[i:i + 1], actions[i:i + 1]))
            torch.random.set_rng_state(state)
        return tuple(torch.cat(parts) for parts in zip(*rows, strict=True))  # type: ignore[return-value]


def build_det(model_config: Any, data_config: Any = None) -> DreamZeroDet:
    """Factory of DET_SPEC."""
    return DreamZeroDet(model_config, data_config)


DET_SPEC = attrs.evolve(dreamzero_spec(DET, "dreamzero_tiny", "dreamzero_tiny with per-sample draws (tests)"),
                        factory=f"{MODULE}:build_det")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _single(out: Path) -> list[dict]:
    """The reference: one process (this one), unwrapped, global batch 4, the recipe's optimizer settings."""
    registry.register("embodied.models", DET, DET_SPEC, replace=True)
    Trainer({"training": {
        "model_name": DET, "dataset_format": "lerobot_datasets", "dataset_strategy": "dreamzero",
        "dataset_path": str(LIBERO), "tokenizer_path": str(TOKENIZER), "num_workers": 0, "per_device_batch_size": 4,
        "train_iters": STEPS, "seed": 42, "output_dir": str(out), "use_lora": True, "lora_r": 4, "lora_alpha": 4,
        "lora_dropout": 0.0, "optimizer": "AdamW", "lr_base": 1e-3, "min_lr": 0.0,
        "lr_decay_style": "cosine_with_min_lr", "lr_warmup_iters": 0, "adam_beta1": 0.95, "adam_beta2": 0.999,
        "adam_eps": 1e-8, "weight_decay": 1e-5, "weight_decay_grouping": "bias_norm", "clip_grad": 1.0,
        "save_interval": 0, "log_interval": 1, "dtype": "float32"},
        "data": {"use_sample_transform_seed": True}}).train()
    return _metrics(out)


def _recipe(out: Path) -> list[dict]:
    """examples/dreamzero/run_dreamzero_lora_fsdp_finetune.sh on two gloo processes (per-device batch 2)."""
    env = clean_env(MODEL_NAME=DET, EMBODIED_PLUGINS=f"models:{DET}={MODULE}:DET_SPEC", TOKENIZER_PATH=str(TOKENIZER),
                    WAN_DIR="", IMAGE_ENCODER_DIR="", DATA_PATH=str(LIBERO), OUTPUT_DIR=str(out), NPROC_PER_NODE="2",
                    NUM_WORKERS="0", TRAIN_ITERS=str(STEPS), WARMUP_ITERS="0", LR="1e-3", SAVE_INTERVAL=str(STEPS),
                    DTYPE="float32", FSDP_REDUCE_DTYPE="fp32", AC_SKIP="dit.blocks.1", PER_DEVICE_BATCH_SIZE="2",
                    SEED="42", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1",
                    PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
                    PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env = recipe_env(env)
    log = out.with_suffix(".log")
    out.parent.mkdir(parents=True, exist_ok=True)
    script = REPO_ROOT / "examples" / "dreamzero" / "run_dreamzero_lora_fsdp_finetune.sh"
    with log.open("w") as sink:
        # own session: on timeout the whole group (torchrun and both ranks) is killed, no orphans
        proc = subprocess.Popen(["bash", str(script), "data.use_sample_transform_seed=true"], stdout=sink,
                                stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"the DreamZero recipe hung for 300 s:\n{log.read_text()[-4000:]}")
    text = log.read_text()
    assert returncode == 0, text[-4000:]
    assert "activation checkpointing" in text.lower() and "dit.blocks.1" in text, text[-4000:]
    assert (out / "checkpoints" / f"step_{STEPS}" / "policy.json").is_file()
    return _metrics(out)


@pytest.mark.timeout(600)
def test_lora_fsdp_recipe_on_two_processes_equals_one_process(tmp_path):
    single = _single(tmp_path / "single")
    fsdp = _recipe(tmp_path / "fsdp")
    assert [r["step"] for r in single] == [r["step"] for r in fsdp] == list(range(1, STEPS + 1))
    for ref, row in zip(single, fsdp, strict=True):
        for key in ("loss", "dynamics_loss", "action_loss"):
            assert row[key] == pytest.approx(ref[key], rel=1e-5), (row["step"], key)
        assert row["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-4), row["step"]

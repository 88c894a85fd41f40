"""dreamzero_tiny trains with LoRA (the preset's default) through the real CLI on the ``dreamzero`` strategy's
LIBERO-layout dataset; the trained model's loss (fixed draws) is below the initial one; resuming from the middle
checkpoint repeats the last steps exactly; the checkpoint is a policy (``load_policy`` + ``predict_action``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from embodied_core import load_policy
from embodied_core.checkpoint.pretrained import read_state_dict
from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset
from embodied_models.dreamzero.modeling import DreamZeroModel
from embodied_models.dreamzero.transforms import make_transforms
from tests.support import DATASETS_DIR, run_embodied

pytestmark = pytest.mark.slow

LIBERO = DATASETS_DIR / "strategies" / "dreamzero_libero_v21"
TOKENIZER = DATASETS_DIR / "strategies" / "tokenizers" / "umt5_tiny"
STEPS, HALF = 6, 3
ARGS = ("train", "--model-name", "dreamzero_tiny", "--dataset-format", "lerobot_datasets", "--dataset-path",
        str(LIBERO), "--tokenizer-path", str(TOKENIZER), "--train-iters", str(STEPS), "--per-device-batch-size", "4",
        "--num-workers", "0", "--lr-base", "3e-2", "--lr-warmup-iters", "0", "--save-interval", str(HALF),
        "--log-interval", "1", "--seed", "0", "--dtype", "float32")


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dz") / "run"
    proc = run_embodied(*ARGS, "--output-dir", str(out))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "trained in full: dit.state_encoder, dit.action_encoder, dit.action_decoder" in proc.stderr
    return out


def test_lora_training_lowers_the_loss(run):
    rows = _metrics(run)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert all(np.isfinite(r["loss"]) and "dynamics_loss" in r and "action_loss" in r for r in rows)
    cfg = load_config("dreamzero_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(LIBERO),
                                                  "output_dir": str(run)},
                      data={"state_dim": 8, "action_dim": 7, "tokenizer_path": str(TOKENIZER)})
    dataset = build_training_dataset(cfg.training, cfg.data)
    batch = make_transforms(cfg.model, cfg.data, stats=None).collate_fn([dataset[i] for i in (0, 20, 40, 60)])
    initial = DreamZeroModel(cfg.model, cfg.data)
    initial.load_state_dict(read_state_dict(run / "lora_base" / "model.safetensors"))
    trained = load_policy(run / "checkpoints" / f"step_{STEPS}").model

    def mean_losses(model: torch.nn.Module) -> np.ndarray:
        with torch.no_grad():
            rows = []
            for seed in range(3):  # the same timesteps and noise for both models
                torch.manual_seed(seed)
                out = model(batch)
                rows.append([out.loss.item(), out.metrics["dynamics_loss"].item(), out.metrics["action_loss"].item()])
        return np.mean(rows, axis=0)

    before, after = mean_losses(initial.eval()), mean_losses(trained.eval())
    print(f"dreamzero_tiny LoRA, {STEPS} steps, fixed draws: loss / dynamics / action {before.round(4)} -> "
          f"{after.round(4)}")
    assert after[0] < before[0] and after[2] < 0.9 * before[2]


def test_resume_repeats_the_last_steps_exactly(run, tmp_path):
    from embodied_core.cli.main import main

    out = tmp_path / "resumed"  # the same CLI, in this process (saves an interpreter start)
    assert main([*ARGS, "--output-dir", str(out), "--resume-from", str(run / "checkpoints" / f"step_{HALF}")]) == 0
    full = {r["step"]: r for r in _metrics(run)}
    resumed = _metrics(out)
    assert [r["step"] for r in resumed] == list(range(HALF + 1, STEPS + 1))
    for row in resumed:
        for key in ("loss", "dynamics_loss", "action_loss", "grad_norm"):
            assert row[key] == full[row["step"]][key], (row["step"], key)


def test_checkpoint_is_a_policy(run):
    ckpt = run / "checkpoints" / f"step_{STEPS}"
    policy = load_policy(ckpt, seed=0)
    meta = policy.metadata
    assert meta.action_horizon == 4 and meta.action_dim == 7 and meta.needs_task
    frames = {key: np.full(meta.image_shape, 90, dtype=np.uint8) for key in meta.camera_keys}
    obs = {**frames, meta.state_key: np.linspace(0, 1, meta.state_dim, dtype=np.float32),
           "task": "put the bowl on the plate"}
    first = policy.predict_action(obs)
    assert first.shape == (4, 7) and first.dtype == np.float32 and np.isfinite(first).all()
    again = load_policy(ckpt, seed=0).predict_action(obs)
    np.testing.assert_array_equal(first, again)


def test_relative_actions_come_back_absolute(tmp_path):
    """oxe_droid with relative joint actions: the policy adds the observed joint state to those dimensions only."""
    from embodied_core.policy.runtime import TransformsPolicy
    from embodied_core.trainer.api import Trainer
    from embodied_models.dreamzero.policy import DreamZeroPolicy

    geometry = {"num_frames": 17, "action_horizon": 24, "num_frame_per_block": 2, "max_chunk_size": 2}
    out = tmp_path / "droid"
    Trainer({"training": {"model_name": "dreamzero_tiny", "dataset_format": "lerobot_datasets",
                          "dataset_path": str(DATASETS_DIR / "strategies" / "dreamzero_droid_v21"),
                          "tokenizer_path": str(TOKENIZER), "num_workers": 0, "per_device_batch_size": 2,
                          "train_iters": 1, "save_interval": 1, "output_dir": str(out)},
             "model": {**geometry, "num_action_per_block": 24, "target_video_size": [64, 64]},
             "data": {**geometry, "embodiment_tag": "oxe_droid", "language_chunk_sampling": True,
                      "require_full_language_chunks": True, "relative_action": True,
                      "relative_action_keys": ["joint_position"]}}).train()
    policy = load_policy(out / "checkpoints" / "step_1", seed=0)
    assert isinstance(policy, DreamZeroPolicy)
    meta = policy.metadata
    action_dims, state_dims = policy.relative
    assert action_dims.tolist() == list(range(7)) and state_dims.tolist() == list(range(7))  # not the gripper
    obs = {**{key: np.full(meta.image_shape, 120, dtype=np.uint8) for key in meta.camera_keys},
           meta.state_key: np.arange(meta.state_dim, dtype=np.float32) + 100.0, "task": "wipe the counter"}
    policy.reset()
    absolute = policy.predict_action(obs)
    policy.reset()
    relative = TransformsPolicy.predict_action(policy, obs)
    assert absolute.shape == (24, 8)
    np.testing.assert_allclose(absolute - relative, np.tile(np.r_[obs[meta.state_key][:7], 0.0], (24, 1)),
                               rtol=1e-5, atol=1e-3)  # float32 sums of values near 1000

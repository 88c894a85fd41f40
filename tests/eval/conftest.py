"""Fixtures of the serve/eval tests: one small synth_reach dataset and one pi05_tiny checkpoint trained on it (a
few steps, through the real Trainer), shared by the whole session."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_core.trainer.api import Trainer
from embodied_data.synth import SynthConfig, write_synthetic_dataset

IMAGE_SIZE = (64, 64)


@pytest.fixture(scope="session")
def synth_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 episodes of the reaching task, 20-24 frames each, 64 x 64 front camera."""
    root = tmp_path_factory.mktemp("eval_data") / "synth_reach"
    write_synthetic_dataset(root, SynthConfig(num_episodes=8, min_length=20, max_length=24, image_size=IMAGE_SIZE,
                                              seed=3))
    return root


@pytest.fixture(scope="session")
def checkpoint(synth_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pi05_tiny trained 6 steps on :func:`synth_dataset` (checkpoints/step_6)."""
    out = tmp_path_factory.mktemp("eval_run")
    Trainer({
        "training": {"model_name": "pi05_tiny", "dataset_format": "lerobot_datasets",
                     "dataset_path": str(synth_dataset), "train_iters": 6, "save_interval": 6, "dtype": "float32",
                     "per_device_batch_size": 4, "num_workers": 0, "lr_warmup_iters": 0, "log_interval": 6,
                     "output_dir": str(out)},
        "data": {"state_dim": 2, "action_dim": 2},
    }).train()
    path = out / "checkpoints" / "step_6"
    assert (path / "policy.json").is_file(), f"no policy folder at {path}"
    return path

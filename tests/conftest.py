"""Shared fixtures; helpers live in tests/support.py.

``synth_dataset`` and ``checkpoint`` (a real pi05_tiny policy folder) are session fixtures used by the serve/eval
tests and the reliability tests: defined once here, so a worker running both builds them once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import SHARED_DIR


@pytest.fixture
def shared_dir() -> Path:
    """The shared datasets and fixtures folder; skips nothing: a missing folder is a setup error."""
    assert SHARED_DIR.is_dir(), f"{SHARED_DIR} not found; set SHARED_DATA_DIR to the shared folder"
    return SHARED_DIR


@pytest.fixture(autouse=True)
def _isolate_embodied_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests start without EMBODIED_*, TOKENIZER_PATH and torchrun variables of the surrounding shell, and what a
    test leaves in os.environ (an in-process ``Trainer`` exports ``--tokenizer-path`` as TOKENIZER_PATH) is undone
    after it, so it cannot reach the tests that follow."""
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith("EMBODIED_") or key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                  "TOKENIZER_PATH"):
            monkeypatch.delenv(key, raising=False)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def synth_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 episodes of the reaching task, 20-24 frames each, 64 x 64 front camera."""
    from embodied_data.synth import SynthConfig, write_synthetic_dataset

    root = tmp_path_factory.mktemp("eval_data") / "synth_reach"
    write_synthetic_dataset(root, SynthConfig(num_episodes=8, min_length=20, max_length=24, image_size=(64, 64),
                                              seed=3))
    return root


@pytest.fixture(scope="session")
def checkpoint(synth_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pi05_tiny trained 6 steps on :func:`synth_dataset` (checkpoints/step_6)."""
    from embodied_core.trainer.api import Trainer

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

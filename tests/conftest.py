"""Shared fixtures; helpers live in tests/support.py.

``synth_dataset`` and ``checkpoint`` (a real pi05_tiny policy folder) are session fixtures used by the serve/eval
tests and the reliability tests: defined once here and built once per test run, also across pytest-xdist workers
(the first worker builds them under a file lock in the run's shared temporary folder, the others read them)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

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


def _built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """``<run temp>/<name>``, made by ``build(path)`` in exactly one pytest process of the run (xdist workers share
    the parent of their base temporary folders); a folder is complete once its ``.done`` marker exists."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    path = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (shared / f"{name}.done").is_file():
            build(path)
            (shared / f"{name}.done").touch()
    return path


def _write_synth(folder: Path) -> None:
    from embodied_data.synth import SynthConfig, write_synthetic_dataset

    config = SynthConfig(num_episodes=8, min_length=20, max_length=24, image_size=(64, 64), seed=3)
    write_synthetic_dataset(folder / "synth_reach", config)


@pytest.fixture(scope="session")
def synth_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 episodes of the reaching task, 20-24 frames each, 64 x 64 front camera."""
    return _built_once(tmp_path_factory, "eval_data", _write_synth) / "synth_reach"


@pytest.fixture(scope="session")
def checkpoint(synth_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pi05_tiny trained 6 steps on :func:`synth_dataset` (checkpoints/step_6)."""
    from embodied_core.trainer.api import Trainer

    def train(out: Path) -> None:
        Trainer({
            "training": {"model_name": "pi05_tiny", "dataset_format": "lerobot_datasets",
                         "dataset_path": str(synth_dataset), "train_iters": 6, "save_interval": 6,
                         "dtype": "float32", "per_device_batch_size": 4, "num_workers": 0, "lr_warmup_iters": 0,
                         "log_interval": 6, "output_dir": str(out)},
            "data": {"state_dim": 2, "action_dim": 2},
        }).train()

    path = _built_once(tmp_path_factory, "eval_run", train) / "checkpoints" / "step_6"
    assert (path / "policy.json").is_file(), f"no policy folder at {path}"
    return path
